"""What a rank process sets up before it runs the user's function: what ``import trn_notebook`` gives a notebook.

A rank says what it needs instead of importing the whole package (as PyTorch's reference PrivateUse1 backend,
``torch_openreg``, registers itself in its short ``__init__``): the device, the ``neuron`` c10d backend,
``torch.compile``'s route to our compiler, and the profiler's device lanes and ``torch.neuron.memory`` namespace.
"""

from __future__ import annotations


def prepare_rank() -> None:
    """Register the device and the c10d backend, route ``torch.compile``, install the profiler lanes.

    Raises what registering the device raises (another package owns ``neuron``).
    """
    from ..device.autoload import autoload
    from ..facts.dynamo import route_default_compile
    from ..profiling import install, install_memory_namespace
    from .backend import register

    autoload(explicit=True)
    register()
    install()
    install_memory_namespace()
    route_default_compile()
