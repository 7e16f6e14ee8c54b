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


@pytest.fixture
def fresh_compiler(tmp_path, fresh_device):
    """Own compile-cache dir, empty compile/shape logs, no compiled frames left over from other tests."""
    from trn_notebook.compiler import backend, compile_log, contracts, shape_log
    from trn_notebook.compiler.config import override

    torch._dynamo.reset()
    backend.clear_memory_cache()
    compile_log.reset()
    shape_log.reset()
    contracts._warned_modes.clear()
    with override(cache_dir=str(tmp_path / "cache")):
        yield
    torch._dynamo.reset()
