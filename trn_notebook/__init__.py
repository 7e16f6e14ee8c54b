"""trn-notebook: learn, try and evaluate PyTorch on AWS Trainium (``neuron``) from Jupyter.

``import trn_notebook`` registers the simulated ``neuron`` device (idempotent).
"""

from .device.autoload import autoload as _autoload

_autoload(explicit=True)  # registers the simulated device unless a real torch_neuronx is installed

from .api import (  # noqa: E402
    clear_op_tracking,
    get_executed_ops,
    get_fallback_ops,
    memory_timeline,
    op_table,
    phase,
    placement_summary,
)
from .compiler import BucketPolicy, bucketed, compile, explain, suggest_policy, tune  # noqa: E402
from .device import get_chip, set_chip, set_memory_capacity, set_op_category  # noqa: E402
from .migration import report  # noqa: E402

__version__ = "0.1.0"


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext trn_notebook``: register the ``%trn`` / ``%%trn`` magics."""
    from .magics import load_ipython_extension as load

    load(ipython)  # type: ignore[arg-type]


def unload_ipython_extension(ipython: object) -> None:
    """``%unload_ext trn_notebook``: remove the magics and their hooks."""
    from .magics import unload_ipython_extension as unload

    unload(ipython)  # type: ignore[arg-type]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension (the status-bar item) lives in the package."""
    return [{"src": "labextension", "dest": "trn-notebook"}]


__all__ = [
    "BucketPolicy",
    "__version__",
    "bucketed",
    "clear_op_tracking",
    "compile",
    "explain",
    "get_chip",
    "get_executed_ops",
    "get_fallback_ops",
    "memory_timeline",
    "op_table",
    "phase",
    "placement_summary",
    "report",
    "set_chip",
    "set_memory_capacity",
    "set_op_category",
    "suggest_policy",
    "tune",
]
