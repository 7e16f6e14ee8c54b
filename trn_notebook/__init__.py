"""trn-notebook: learn, try and evaluate PyTorch on AWS Trainium (``neuron``) from Jupyter.

``import trn_notebook`` registers the simulated ``neuron`` device (idempotent).
"""

from .device import register as _register_device

_register_device()

from .api import (  # noqa: E402
    clear_op_tracking,
    get_executed_ops,
    get_fallback_ops,
    memory_timeline,
    op_table,
    phase,
    placement_summary,
)
from .device import get_chip, set_chip, set_memory_capacity, set_op_category  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "clear_op_tracking",
    "get_chip",
    "get_executed_ops",
    "get_fallback_ops",
    "memory_timeline",
    "op_table",
    "phase",
    "placement_summary",
    "set_chip",
    "set_memory_capacity",
    "set_op_category",
]
