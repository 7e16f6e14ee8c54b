"""Fixtures of the widget tests: a placement log with native and fallback ops; a throwaway compile cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from trn_notebook.device.placement import placement_log


@pytest.fixture
def ops() -> dict[str, tuple[Any, ...]]:
    """A fresh placement log with matmuls (native) and sorts (CPU fallback)."""
    placement_log.reset()
    x = torch.randn(32, 32, device="neuron")
    for _ in range(3):
        y = (x @ x).relu()
    torch.sort(y, dim=1)
    return placement_log.snapshot()


@pytest.fixture(autouse=True)
def private_compile_cache(tmp_path: Path) -> Any:
    """Compiles in these tests go to a throwaway cache, never the user's."""
    from trn_notebook.compiler import config

    with config.override(cache_dir=str(tmp_path / "neff-cache")) as cfg:
        yield cfg
