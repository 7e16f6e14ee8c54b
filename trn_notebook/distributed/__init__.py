"""Distributed training on simulated ranks with PyTorch's own engine (torch.distributed + gloo).

``import trn_notebook`` (or ``import torch`` with the device autoloaded) registers the ``neuron``
process-group backend, so ``dist.init_process_group("neuron")``, DDP, FSDP2, DTensor and torchrun
work on ``neuron`` tensors. See :mod:`.backend` for how, :mod:`.commmodel` for the modeled cost.
"""

from .backend import BACKEND, register
from .commmodel import (
    CommConstants,
    collective_seconds,
    get_comm_constants,
    reset_comm_constants,
    set_comm_constants,
)
from .compare import compare_ranks
from .ledger import comm_log, exposed_comm

__all__ = [
    "BACKEND",
    "CommConstants",
    "collective_seconds",
    "comm_log",
    "compare_ranks",
    "exposed_comm",
    "get_comm_constants",
    "register",
    "reset_comm_constants",
    "set_comm_constants",
]
