"""Issue 27 item 3: foreach ops under ``trainium`` are one launch each, rounding every written tensor per the policy.

The reference is the per-tensor path the device took before (torch's CompositeExplicitAutograd foreach
kernel: one device op per tensor, each rounded by the policy), selected by a dispatch mode in the test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import trn_notebook
from trn_notebook.device.placement import placement_log

COMPOSITE = torch._C.DispatchKey.CompositeExplicitAutograd
MAKERS: dict[str, Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]] = {
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=True),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1, foreach=True),
}


class PerTensor(TorchDispatchMode):
    """Every foreach op through torch's composite kernel: one op per tensor (the old trainium path)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.__name__.startswith("_foreach_") and func.has_kernel_for_dispatch_key(COMPOSITE):
            return func._op_dk(COMPOSITE, *args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))


def _train(name: str, per_tensor: bool) -> tuple[list[torch.Tensor], dict[str, int]]:
    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(33, 7, generator=g).bfloat16().to("neuron")) for _ in range(4)]
    opt = MAKERS[name](params)
    grads = [[torch.randn(p.shape, generator=g).bfloat16().to("neuron") for p in params] for _ in range(3)]
    before = placement_log.snapshot()
    with trn_notebook.numerics("trainium", stochastic_rounding=True, seed=5):
        for step in grads:
            for p, grad in zip(params, step):
                p.grad = grad
            if per_tensor:
                with PerTensor():
                    opt.step()
            else:
                opt.step()
    after = placement_log.snapshot()
    calls = {k: after[k].calls - (before[k].calls if k in before else 0) for k in after}
    return [p.detach().cpu() for p in params], {k: c for k, c in calls.items() if c}


@pytest.mark.parametrize("name", list(MAKERS))
def test_foreach_step_under_trainium_is_one_launch_per_call_and_equals_the_per_tensor_path(name: str) -> None:
    fused, calls = _train(name, per_tensor=False)
    reference, per_tensor_calls = _train(name, per_tensor=True)
    assert all(torch.equal(a, b) for a, b in zip(fused, reference, strict=True))
    foreach = {k: c for k, c in calls.items() if k.startswith("_foreach_")}
    assert foreach, calls  # the optimizer's foreach calls were placed on the device, each once
    assert not any(k.startswith("_foreach_") for k in per_tensor_calls)
    per_op = sum(per_tensor_calls.values())
    assert sum(calls.values()) * 3 <= per_op, (calls, per_tensor_calls)  # 4 params: one launch, not four
    with trn_notebook.numerics("trainium", stochastic_rounding=True, seed=5):
        exact_rounding = (torch.ones(4096, dtype=torch.bfloat16) + 2**-9).float().mean().item()
    assert exact_rounding == 1.0  # a CPU tensor keeps CPU rounding: the policy is the device's only


def test_foreach_sqrt_checks_the_scalare_range_of_every_tensor() -> None:
    xs = [torch.ones(3).to("neuron"), torch.zeros(3).to("neuron")]
    with trn_notebook.numerics("trainium"), pytest.warns(trn_notebook.NeuronNumericsWarning, match="sqrt"):
        torch._foreach_sqrt(xs)
