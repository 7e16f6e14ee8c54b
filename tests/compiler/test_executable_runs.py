"""A compiled graph run N times charges the same figures every run, as the static schedule says."""

from __future__ import annotations

import pytest
import torch

import trn_notebook  # noqa: F401
from trn_notebook.compiler import executable
from trn_notebook.device.clocks import clocks
from trn_notebook.device.memory.allocator import MIN_BLOCK, round_size
from trn_notebook.device.memory.runtime import allocator
from trn_notebook.device.placement import placement_log


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


def test_seeded_host_views_change_no_figure_of_a_training_step() -> None:
    """A compiled forward+backward with its results seeded as cached host views (issue 33) charges the placement
    log, the clocks and the allocator exactly as with plain wraps, and computes the same values."""
    from trn_notebook.device.memory import runtime

    w = torch.randn(16, 8).to("neuron").requires_grad_(True)
    x = torch.randn(32, 16).to("neuron")
    fn = torch.compile(_f, backend="neuron")
    plain = runtime.wrap

    def unseeded(cpu: torch.Tensor, seed: bool = False) -> torch.Tensor:
        return plain(cpu)

    def step() -> tuple[object, ...]:
        c0, p0, m0 = clocks.snapshot(), placement_log.snapshot(), allocator.snapshot().counters
        s, h = fn(x, w)
        (s + h.sum()).backward()
        assert w.grad is not None
        grad, w.grad = w.grad.cpu(), None
        c1, p1, m1 = clocks.snapshot(), placement_log.snapshot(), allocator.snapshot().counters
        entries = {k: (v.minus(p0[k]).calls, v.minus(p0[k]).device_s) for k, v in p1.items() if k in p0}
        alloc = (m1.num_allocs - m0.num_allocs, m1.num_frees - m0.num_frees, m1.allocated - m0.allocated)
        return (c1.launches - c0.launches, c1.sim_device_s - c0.sim_device_s, entries, alloc, s.item(), grad)

    step()  # compile both graphs
    try:
        runs = []
        for wrap in (plain, unseeded, plain):
            executable.wrap = wrap  # type: ignore[assignment]
            runs.append(step())
    finally:
        executable.wrap = plain  # type: ignore[assignment]
    for other in runs[1:]:
        assert (other[0], other[3], other[4]) == (runs[0][0], runs[0][3], runs[0][4])
        assert other[1] == pytest.approx(runs[0][1], rel=1e-9)
        assert {k: v[0] for k, v in other[2].items()} == {k: v[0] for k, v in runs[0][2].items()}  # type: ignore[union-attr]
        assert {k: v[1] for k, v in other[2].items()} == pytest.approx(
            {k: v[1] for k, v in runs[0][2].items()}, rel=1e-9
        )  # type: ignore[union-attr]
        assert torch.equal(other[5], runs[0][5])  # type: ignore[arg-type]
