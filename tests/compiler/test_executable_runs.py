"""A compiled graph run N times charges the same figures every run, as the static schedule says."""

from __future__ import annotations

import pytest
import torch

import trn_notebook  # noqa: F401
from trn_notebook.compiler import executable
from trn_notebook.device.allocator import MIN_BLOCK, round_size
from trn_notebook.device.clocks import clocks
from trn_notebook.device.placement import placement_log
from trn_notebook.device.runtime import allocator


def _f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = torch.relu(x @ w)
    return h.sum(), h * 2


def test_each_run_charges_the_schedule_once_with_identical_figures() -> None:
    x, w = torch.randn(32, 16).to("neuron"), torch.randn(16, 8).to("neuron")
    fn = torch.compile(_f, backend="neuron")
    seen: list[executable.Executable] = []
    orig = executable.Executable.__call__

    def spy(self: executable.Executable, args: list[object]) -> list[object]:
        seen.append(self)
        return orig(self, args)

    executable.Executable.__call__ = spy  # type: ignore[method-assign]
    try:
        ref = _f(x.cpu(), w.cpu())
        for _ in range(2):
            out = fn(x, w)
        ex = seen[-1]
        # first principles: one launch of the schedule's device time, one placement call, a fresh block per
        # output (plus the scratch arena, malloc'd and freed), nothing left allocated but the outputs
        sizes = [o.nbytes for o in out]
        blocks = sum(MIN_BLOCK if n <= MIN_BLOCK else round_size(n) for n in sizes)
        scratch = 1 if ex.scratch_bytes else 0
        deltas = []
        for _ in range(4):
            del out
            c0, p0, m0 = clocks.snapshot(), placement_log.snapshot()[ex.launch_name], allocator.snapshot().counters
            a0, n0, f0 = m0.allocated, m0.num_allocs, m0.num_frees
            out = fn(x, w)
            c1, p1, m1 = clocks.snapshot(), placement_log.snapshot()[ex.launch_name], allocator.snapshot().counters
            d = p1.minus(p0)
            deltas.append((d.calls, d.device_s, c1.launches - c0.launches, c1.sim_device_s - c0.sim_device_s))
            assert (m1.num_allocs - n0, m1.num_frees - f0, m1.allocated - a0) == (len(sizes) + scratch, scratch, blocks)
        want = ex.schedule.device_s
        assert all(dl[0] == 1 and dl[2] == 1 and dl[1] == pytest.approx(want, rel=1e-9) for dl in deltas), deltas
        assert all(dl[3] == pytest.approx(want, rel=1e-6) for dl in deltas), (want, deltas)
        torch.testing.assert_close(out[0].cpu(), ref[0])
        assert torch.equal(out[1].cpu(), ref[1])
    finally:
        executable.Executable.__call__ = orig  # type: ignore[method-assign]
