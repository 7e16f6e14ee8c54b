"""Compiled graphs with tensor constants (``get_attr``), buffers and lifted constants compile and match CPU."""

from __future__ import annotations

import pytest
import torch
import torch.fx
import torch.nn as nn

from trn_notebook.compiler.lower import LoweringError, lift_constants

pytestmark = pytest.mark.usefixtures("fresh_compiler")


class WithConstants(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("offset", torch.tensor([0.5, -1.0, 2.0]))
        self.register_buffer("mask", torch.tensor([True, False, True]), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = torch.tensor([1.0, 2.0, 3.0], device=x.device)  # a tensor built in forward: _tensor_constant0
        neg = torch.tensor(-1e4, device=x.device)  # a 0-dim one, as in HF's attention masks
        y = self.lin(x) * bias + self.offset
        return torch.where(self.mask, y, neg).softmax(-1)


def _run(model: nn.Module, x: torch.Tensor, fn=None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    out = (fn if fn is not None else model)(x)
    (out * torch.arange(3.0, device=x.device)).sum().backward()
    grads = {n: p.grad.cpu() for n, p in model.named_parameters()}
    model.zero_grad()
    return out.detach().cpu(), grads


def test_constants_buffers_compile_and_match_cpu():
    torch.manual_seed(0)
    model = WithConstants()
    x = torch.randn(4, 3)
    ref_out, ref_grads = _run(model, x)
    model.to("neuron")
    compiled = torch.compile(model, backend="neuron")
    for _ in range(2):  # second call reuses the compiled graph with the same constants
        out, grads = _run(model, x.to("neuron"), compiled)
        torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-6)
        for name, g in ref_grads.items():
            torch.testing.assert_close(grads[name], g, rtol=1e-5, atol=1e-6, msg=name)
    from trn_notebook.compiler import compile_log

    assert not [r for r in compile_log.snapshot() if r.error]


def test_lift_constants_makes_trailing_inputs():
    gm = torch.fx.symbolic_trace(lambda x: x)
    gm.register_buffer("_tensor_constant0", torch.tensor([2.0, 3.0]))
    g = torch.fx.Graph()
    x = g.placeholder("x")
    c = g.get_attr("_tensor_constant0")
    g.output(g.call_function(torch.ops.aten.mul.Tensor, (x, c)))
    gm = torch.fx.GraphModule(gm, g)
    lifted, consts = lift_constants(gm)
    assert [n.op for n in lifted.graph.nodes] == ["placeholder", "placeholder", "call_function", "output"]
    assert len(consts) == 1 and torch.equal(consts[0], torch.tensor([2.0, 3.0]))
    torch.testing.assert_close(lifted(torch.ones(2), *consts), torch.tensor([2.0, 3.0]))
    assert any(n.op == "get_attr" for n in gm.graph.nodes)  # the original is unchanged (fallback runs it)


def test_non_tensor_attribute_is_a_clear_error():
    root = nn.Module()
    root.table = [1, 2]
    g = torch.fx.Graph()
    g.output(g.get_attr("table"))
    with pytest.raises(LoweringError, match="table is a list, not a tensor"):
        lift_constants(torch.fx.GraphModule(root, g))


def test_weight_norm_compiles_and_matches_cpu():
    """Wav2Vec2's positional conv: nn.utils.parametrizations.weight_norm lowers (forward and backward)."""
    torch.manual_seed(0)
    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 3, padding=1), dim=2)
    x = torch.randn(2, 4, 3)
    ref_out, ref_grads = _run(conv, x)
    conv.to("neuron")
    out, grads = _run(conv, x.to("neuron"), torch.compile(conv, backend="neuron"))
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-6)
    for name, g in ref_grads.items():
        torch.testing.assert_close(grads[name], g, rtol=1e-4, atol=1e-6, msg=name)
