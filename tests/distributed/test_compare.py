"""compare_ranks: argument checks and the table's arithmetic (the full run is in the notebook and benchmark)."""

from __future__ import annotations

import pytest

from trn_notebook import compare_ranks
from trn_notebook.distributed.compare import _row, _source_of


def make_model():
    import torch

    return torch.nn.Linear(4, 4)


def make_batch(n, seed):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g), torch.randn(n, 4, generator=g)


def test_bad_arguments_raise_before_any_rank_starts():
    with pytest.raises(ValueError, match="unknown strategies"):
        compare_ranks(make_model, make_batch, strategies=("zero3",))
    with pytest.raises(ValueError, match="divisible"):
        compare_ranks(make_model, make_batch, global_batch=5, world_size=2)
    with pytest.raises(TypeError, match="defined in a file or a notebook cell"):
        _source_of(len, "make_model")


def test_row_takes_the_slowest_rank_and_the_global_batch_loss():
    per_rank = [
        dict(rank=1, ranks=2, batch_per_rank=8, step_ms=4.0, step_ms_spread=0.1, comm_ms=1.0, exposed_comm_ms=0.5,
             peak_memory_bytes=100, param_bytes=10, loss=3.0),
        dict(rank=0, ranks=2, batch_per_rank=8, step_ms=2.0, step_ms_spread=0.2, comm_ms=1.0, exposed_comm_ms=1.0,
             peak_memory_bytes=200, param_bytes=10, loss=1.0),
    ]  # fmt: skip
    row = _row("ddp", per_rank, 16)
    assert row["step_ms"] == 4.0
    assert row["samples_per_s_per_device"] == pytest.approx(16 / 0.004 / 2)
    assert row["comm_share"] == pytest.approx(1.0 / 4.0)
    assert row["peak_memory_per_rank"] == 200 and row["loss"] == 2.0
