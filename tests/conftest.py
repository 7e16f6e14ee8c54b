"""Shared fixtures: every test starts from :func:`trn_notebook.state.reset` (the public reset)."""

from __future__ import annotations

import gc

import pytest
import torch

import trn_notebook  # noqa: F401 - registers the neuron device
from trn_notebook import state
from trn_notebook.device.runtime import allocator, set_memory_capacity


@pytest.fixture
def fresh_device():
    """Reset placement log, clocks and memory statistics; restore the memory capacity and default device."""
    gc.collect()
    state.reset(compiled=False)
    capacity = allocator.snapshot().capacity
    default_device = torch.get_default_device()
    yield
    set_memory_capacity(capacity)
    torch.set_default_device(default_device)


@pytest.fixture
def fresh_compiler(tmp_path, fresh_device):
    """Own compile-cache dir, empty compile/shape logs, no compiled graphs or frames left from other tests."""
    from trn_notebook.compiler.config import override

    state.reset()
    with override(cache_dir=str(tmp_path / "cache")):
        yield
    torch._dynamo.reset()


@pytest.fixture(autouse=True)
def _no_leaked_torch_globals():
    """Every test starts on CPU with float32 defaults, whatever the previous test changed."""
    yield
    torch.set_default_device(None)
    torch.set_default_dtype(torch.float32)
    torch.__future__.set_overwrite_module_params_on_conversion(False)
