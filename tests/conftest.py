"""Shared fixtures: every test starts with an empty placement log and zeroed clocks."""

from __future__ import annotations

import gc

import pytest
import torch

import trn_notebook  # noqa: F401 - registers the neuron device
from trn_notebook.device import clocks, placement_log
from trn_notebook.device.runtime import allocator


@pytest.fixture
def fresh_device():
    """Reset the placement log and clocks; restore the memory capacity and config after the test."""
    gc.collect()
    placement_log.reset()
    clocks.reset()
    capacity = allocator.capacity
    default_device = torch.get_default_device()
    yield
    allocator.capacity = capacity
    torch.set_default_device(default_device)
