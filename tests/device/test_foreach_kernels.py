"""Foreach overloads of torch.optim's foreach paths: one fused launch each, results bit-identical to CPU."""

from __future__ import annotations

import gc
from collections.abc import Callable

import pytest
import torch

import trn_notebook
from trn_notebook.device.eager.foreach_fast import NOT_TAKEN, run_foreach
from trn_notebook.device.placement import placement_log

MAKERS: dict[str, Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]] = {
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1, foreach=True),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1, amsgrad=True, foreach=True),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=True),
}


def _train(make: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer], device: str) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(5, 7, generator=g).to(device)) for _ in range(4)]
    opt = make(params)
    for _ in range(3):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g).to(device)
        opt.step()
    return [p.detach().cpu() for p in params]


@pytest.mark.parametrize("name", list(MAKERS))
def test_foreach_step_equals_cpu_bit_for_bit(name: str) -> None:
    cpu, dev = _train(MAKERS[name], "cpu"), _train(MAKERS[name], "neuron")
    assert all(torch.equal(a, b) for a, b in zip(cpu, dev, strict=True))


def _delta(name: str, fn: Callable[[], None]) -> tuple[int, float, set[str]]:
    before = placement_log.snapshot()
    fn()
    after = placement_log.snapshot()
    entry = after[name].minus(before[name]) if name in before else after[name]
    return entry.calls, entry.device_s, {k for k in after if k not in before or after[k].calls != before[k].calls}


def test_foreach_call_is_one_launch_costing_the_sum_over_the_list() -> None:
    xs, ys = ([torch.randn(64, 64).to("neuron") for _ in range(3)] for _ in range(2))
    x1, y1 = [torch.randn(64, 64).to("neuron")], [torch.randn(64, 64).to("neuron")]
    calls, three, touched = _delta("_foreach_add_", lambda: torch._foreach_add_(xs, ys))
    _, one, _ = _delta("_foreach_add_", lambda: torch._foreach_add_(x1, y1))
    assert calls == 1 and touched == {"_foreach_add_"}  # no per-tensor add_ entries
    launch = trn_notebook.device.costmodel.get_cost_constants().eager_launch_s  # eager fusion is off by default
    assert three - launch == pytest.approx(3 * (one - launch), rel=1e-9)  # the sum over the list, one launch


def _adamw_step_figures(fast: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[object, ...]:
    """One AdamW step's placement entries, clock and allocator deltas and results, from a fixed state."""
    from trn_notebook.device.clocks import clocks
    from trn_notebook.device.eager import kernels
    from trn_notebook.device.memory.runtime import allocator

    taken: list[str] = []

    def spy(info: object, fresh: bool, args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        out = run_foreach(info, fresh, args, kwargs) if fast else NOT_TAKEN  # type: ignore[arg-type]
        if out is not NOT_TAKEN:
            taken.append(info.name)  # type: ignore[attr-defined]
        return out

    monkeypatch.setattr(kernels, "run_foreach", spy)
    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(33, 7, generator=g).to("neuron")) for _ in range(3)]
    opt = MAKERS["adamw"](params)
    for p in params:
        p.grad = torch.randn(p.shape, generator=g).to("neuron")
    opt.step()  # the first step creates the optimizer state
    clocks.reset()  # both runs' clocks from zero: their deltas compare exactly, not only to rounding
    gc.collect()  # the other run's garbage (an optimizer holds cycles) is freed now, not inside the window
    gc.disable()
    try:
        p0, c0, m0 = placement_log.snapshot(), clocks.snapshot(), allocator.snapshot().counters
        taken.clear()
        opt.step()
        p1, c1, m1 = placement_log.snapshot(), clocks.snapshot(), allocator.snapshot().counters
    finally:
        gc.enable()
    window = {k: (e.category, e.calls, e.device_s, e.h2d, e.d2h) for k, e in p1.since(p0).items()}
    d = c1.since(c0)
    counts = [getattr(m1, f) - getattr(m0, f) for f in ("allocated", "active", "num_allocs", "num_frees")]
    values = [p.detach().cpu() for p in params]
    monkeypatch.undo()
    return window, (d.sim_host_s, d.sim_device_s, d.launches, d.sync_points, d.fused_groups), counts, values, taken


def test_foreach_steady_path_charges_exactly_what_the_general_path_charges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 33 item 2: the steady-state foreach path of an AdamW step changes no placement entry, clock or
    allocator figure and no value (the general path of run_op is the reference); and it is taken."""
    slow = _adamw_step_figures(False, monkeypatch)
    fast = _adamw_step_figures(True, monkeypatch)
    assert slow[4] == [] and set(fast[4]) == {k for k in fast[0] if k.startswith("_foreach_")}, fast[4]
    assert len(fast[4]) == 8  # mul_ (x2), addcmul_, sqrt, div_, add_, addcdiv_
    assert fast[0] == slow[0]  # exact floats: the same charge, in the same order of summation
    assert fast[1] == slow[1] and fast[2] == slow[2]
    assert all(torch.equal(a, b) for a, b in zip(fast[3], slow[3], strict=True))
