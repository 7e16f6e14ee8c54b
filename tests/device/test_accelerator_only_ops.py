"""Ops with no CPU kernel that ATen calls on neuron: LSTM/GRU equal CPU; the rest are refused by name; the sweep."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from trn_notebook.device.ops.policy import no_cpu_kernel_ops

pytestmark = pytest.mark.usefixtures("fresh_device")

MODULES = {
    "LSTM": lambda: nn.LSTM(8, 16, num_layers=2, bidirectional=True),
    "GRU": lambda: nn.GRU(8, 16, num_layers=2, batch_first=True),
    "LSTMCell": lambda: nn.LSTMCell(8, 16),
    "GRUCell": lambda: nn.GRUCell(8, 16),
    "LSTM no bias": lambda: nn.LSTM(8, 16, bias=False),
}


def _input(name: str) -> torch.Tensor:
    return torch.randn(5, 3, 8) if "Cell" not in name else torch.randn(3, 8)


def _loss(out: object) -> torch.Tensor:
    """Every output (sequence, final hidden and cell state) feeds the loss, so every gradient path runs."""
    if isinstance(out, torch.Tensor):
        return (out * out).sum()
    return sum(_loss(o) for o in out)  # type: ignore[union-attr, return-value]


def _run(name: str, compiled: bool) -> None:
    torch.manual_seed(0)
    ref = MODULES[name]()
    model = MODULES[name]().to("neuron")
    model.load_state_dict(ref.state_dict())
    x = _input(name)
    want = ref(x)
    _loss(want).backward()
    run = torch.compile(model, backend="neuron") if compiled else model
    got = run(x.to("neuron"))
    _loss(got).backward()
    flat_want = [want] if isinstance(want, torch.Tensor) else list(torch.utils._pytree.tree_leaves(want))
    flat_got = [got] if isinstance(got, torch.Tensor) else list(torch.utils._pytree.tree_leaves(got))
    for g, w in zip(flat_got, flat_want, strict=True):
        assert g.device.type == "neuron"
        torch.testing.assert_close(g.detach().cpu(), w.detach(), rtol=1e-5, atol=1e-6)
    for (n, p), q in zip(model.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=n)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_lstm_and_gru_eager_forward_and_backward_equal_cpu(name):
    _run(name, compiled=False)


@pytest.mark.parametrize("name", ["LSTM", "GRU"])
def test_lstm_and_gru_modules_under_torch_compile_equal_cpu(name, fresh_compiler):
    """Dynamo runs nn.LSTM/nn.GRU eagerly inside a compiled program by default (allow_rnn=False, every device)."""
    _run(name, compiled=True)


@pytest.mark.slow  # one compile per cell (dynamo + AOT Autograd)
@pytest.mark.parametrize("name", ["LSTMCell", "GRUCell"])
def test_lstm_and_gru_cells_compiled_by_the_neuron_compiler_equal_cpu(name, fresh_compiler):
    import torch._dynamo

    from trn_notebook.compiler import compile_log

    with torch._dynamo.config.patch(allow_rnn=True):  # dynamo traces the cell into the graph
        _run(name, compiled=True)
    assert {r.kind for r in compile_log.snapshot()} >= {"forward", "backward"}


def test_an_accelerator_only_op_without_a_record_is_refused_by_name():
    with pytest.raises(NotImplementedError, match=r"aten::_fused_dropout has no CPU kernel.*x\.cpu\(\)") as err:
        torch._fused_dropout(torch.ones(4, device="neuron"), 0.5)
    assert "'CPU' backend" not in str(err.value).split("PyTorch said:")[0]  # no longer blames the CPU backend
    assert torch.ones(2, device="neuron").add(1).cpu().tolist() == [2.0, 2.0]  # the session stays usable


def test_the_sweep_lists_every_op_without_a_cpu_kernel_and_how_neuron_treats_it():
    rows = {r["op"]: r for r in no_cpu_kernel_ops()}
    assert rows["aten::_thnn_fused_lstm_cell"]["neuron"] == "decomposed"
    assert rows["aten::_thnn_fused_gru_cell"]["neuron"] == "decomposed"
    assert rows["aten::_thnn_fused_gru_cell_backward"]["neuron"].startswith("unsupported: the fused cell's backward")
    assert rows["aten::_fused_dropout"] == {
        "op": "aten::_fused_dropout",
        "kind": "accelerator only",
        "neuron": "refused: no CPU kernel",
    }
    assert rows["aten::_values"]["kind"] == "other layouts"  # a sparse-only op, not an accelerator one
    assert "aten::mm.default" not in rows and "aten::log.int" not in rows  # CPU kernel / no tensor argument
    assert {r["neuron"].split(":")[0] for r in rows.values()} <= {"decomposed", "unsupported", "refused"}
