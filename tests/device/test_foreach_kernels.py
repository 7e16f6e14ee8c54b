"""Foreach overloads of torch.optim's foreach paths: one fused launch each, results bit-identical to CPU."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import trn_notebook
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
