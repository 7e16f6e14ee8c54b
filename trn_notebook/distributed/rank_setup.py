"""What a process wires into torch once the device is registered — one list for ``import trn_notebook`` and for
each rank process.

A rank says what it needs instead of importing the whole package (as PyTorch's reference PrivateUse1 backend,
``torch_openreg``, registers itself in its short ``__init__``): the device, the ``neuron`` c10d backend,
``torch.compile``'s route to our compiler, and the profiler's device lanes and ``torch.neuron.memory`` namespace.
The package's ``__init__`` registers the device first and then calls :func:`install_integrations` too.
"""

from __future__ import annotations


def install_integrations() -> None:
    """The ``neuron`` c10d backend, ``torch.compile``'s route, the profiler lanes and ``torch.neuron.memory``
    (each idempotent)."""
    from ..facts.dynamo import route_default_compile
    from ..profiling import install, install_memory_namespace
    from .backend import register

    register()
    install()
    install_memory_namespace()
    route_default_compile()


def prepare_rank() -> None:
    """Register the device, then :func:`install_integrations`; raises what registering the device raises
    (another package owns ``neuron``)."""
    from ..device.autoload import autoload

    autoload(explicit=True)
    install_integrations()
