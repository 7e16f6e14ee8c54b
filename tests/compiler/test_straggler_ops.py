"""Ops the compiled OpInfo sweep found with no lowering (issue 28 item 4), compiled on neuron against CPU."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _check(fn, *args, grad: bool = True) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="neuron", fullgraph=True, dynamic=False)
    dev = [a.to("neuron").requires_grad_(grad and a.is_floating_point()) for a in args]
    ref = [a.clone().requires_grad_(grad and a.is_floating_point()) for a in args]
    out, want = compiled(*dev), fn(*ref)
    torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-5)
    if grad:
        g = torch.randn(want.shape)
        got = torch.autograd.grad(out, [d for d in dev if d.requires_grad], g.to("neuron"))
        exp = torch.autograd.grad(want, [r for r in ref if r.requires_grad], g)
        for a, e in zip(got, exp):
            torch.testing.assert_close(a.cpu(), e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1)])
def test_addbmm_decomposes_to_bmm_and_a_sum(beta, alpha) -> None:
    inp = torch.full((3, 5), float("nan")) if beta == 0 else torch.randn(3, 5)  # beta=0 ignores the input
    _check(
        lambda i, a, b: torch.addbmm(i, a, b, beta=beta, alpha=alpha),
        inp,
        torch.randn(2, 3, 4),
        torch.randn(2, 4, 5),
        grad=beta != 0,
    )


def test_masked_scatter_takes_source_elements_in_row_major_order() -> None:
    mask = torch.tensor([[True, False, True], [False, True, True]])
    _check(lambda x, s: x.masked_scatter(mask.to(x.device), s), torch.randn(2, 3), torch.randn(7))


def test_scatter_reduce_cumprod_and_adaptive_max_pool_compile() -> None:
    index = torch.tensor([[0, 1, 0], [1, 1, 0]])
    _check(
        lambda x, s: x.scatter_reduce(0, index.to(x.device), s, "amax", include_self=False),
        torch.randn(2, 3),
        torch.randn(2, 3),
    )
    _check(lambda x: torch.cumprod(x, 1), torch.rand(3, 4) + 0.5)
    _check(lambda x: torch.nn.functional.adaptive_max_pool2d(x, 2), torch.randn(1, 2, 5, 5))
