"""Compiler cases the model zoo found (issue 28): complex rotary embeddings (DeepSeek-V2), a
channels_last-strided view through interpolate/pooling (BEiT), graphs that return Python numbers
(Gemma3/Starcoder2 static-cache generate). Every result is compared with CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.fx
import torch.nn.functional as F

import trn_notebook  # noqa: F401  (registers the device and the backend)
from trn_notebook.compiler.ir import IRError
from trn_notebook.compiler.lower import LoweringError, lower
from trn_notebook.compiler.passes import run_passes
from trn_notebook.compiler.text import constant_outputs, format_value, parse_graph, print_graph

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _compiled_matches_cpu(fn, *inputs: torch.Tensor) -> None:
    """``fn`` compiled for neuron equals ``fn`` on CPU: outputs and the gradient of every input."""
    cpu = [x.clone().requires_grad_() for x in inputs]
    dev = [x.to("neuron").requires_grad_() for x in inputs]
    ref = fn(*cpu)
    got = torch.compile(fn, backend="neuron", fullgraph=True)(*dev)
    torch.testing.assert_close(got.detach().cpu(), ref.detach())
    weight = torch.linspace(-1, 1, ref.numel()).reshape(ref.shape)
    (ref * weight).sum().backward()
    (got * weight.to("neuron")).sum().backward()
    for c, d in zip(cpu, dev):
        torch.testing.assert_close(d.grad.cpu(), c.grad)


def test_complex_rotary_embedding_compiles_forward_and_backward() -> None:
    def rotary(angle: torch.Tensor, q: torch.Tensor) -> torch.Tensor:  # DeepSeek-V2's apply_rotary_emb
        freqs = torch.polar(torch.ones_like(angle), angle)
        q_ = torch.view_as_complex(q.reshape(*q.shape[:-1], -1, 2))
        return torch.view_as_real(q_ * freqs).flatten(2)

    _compiled_matches_cpu(rotary, torch.randn(2, 3, 4), torch.randn(2, 3, 8))


def test_complex_scalars_round_trip_through_ir_text() -> None:
    from trn_notebook.compiler.text import _Values

    for value in (1j, complex(1.5, -2.0), complex(-0.0, 3e20), complex(float("inf"), float("nan"))):
        kind, token = (reader := _Values(format_value(value)))._next()
        back = reader.value(kind, token)
        assert repr(back) == repr(value)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic", "avg_pool", "max_pool"])
def test_channels_last_strided_view_through_resampling_matches_cpu(mode: str) -> None:
    def f(nhwc: torch.Tensor) -> torch.Tensor:
        t = nhwc.permute(0, 3, 1, 2)  # channels_last strides: torch's kernels keep that layout internally
        if mode == "avg_pool":
            return F.avg_pool2d(t, 2)
        if mode == "max_pool":
            return F.max_pool2d(t, 2)
        return F.interpolate(t, size=(7, 9), mode=mode)

    x = torch.randn(2, 5, 6, 4)
    xn = x.to("neuron").requires_grad_()
    xc = x.clone().requires_grad_()
    torch.testing.assert_close(f(xn).detach().cpu(), f(xc).detach())  # eager
    f(xn).sum().backward()
    f(xc).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), xc.grad)
    _compiled_matches_cpu(f, x)


def test_explicit_channels_last_request_is_still_refused_when_compiled() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.contiguous(memory_format=torch.channels_last) + 1

    with pytest.raises(Exception, match="only contiguous memory format.*TorchNeuron rejects channels_last"):
        torch.compile(f, backend="neuron", fullgraph=True)(torch.randn(1, 3, 4, 4).to("neuron"))


def _graph_returning(*extra: object) -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(3)
    y = g.call_function(torch.ops.aten.add.Tensor, (x, x))
    y.meta["val"] = torch.empty(3)
    g.output((y, *extra))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_python_number_outputs_survive_passes_and_the_ir_text() -> None:
    graph, _ = run_passes(lower(_graph_returning(8, 2.5, True, None), "consts"), keep=True)
    assert graph.outputs[1:] == (None, None, None, None)
    parsed = parse_graph(print_graph(graph))
    assert constant_outputs(parsed) == {1: 8, 2: 2.5, 3: True}


def test_unsupported_graph_output_names_what_compiles() -> None:
    with pytest.raises(LoweringError, match="output 1 is a str.*tensors, None and Python numbers"):
        lower(_graph_returning("text"), "bad")


def test_malformed_constant_outputs_entry_is_refused() -> None:
    text = print_graph(run_passes(lower(_graph_returning(8), "consts"), keep=True)[0])
    with pytest.raises(IRError, match="bad constant_outputs"):
        constant_outputs(parse_graph(text.replace("[[1, 8]]", "[[7, 8]]")))
    with pytest.raises(IRError, match="both a value and a constant"):
        constant_outputs(parse_graph(text.replace("[[1, 8]]", "[[0, 8]]")))


def test_compiled_graph_returns_python_numbers_like_eager() -> None:
    def f(x: torch.Tensor, n: int) -> tuple[torch.Tensor, int]:
        return x * 2, x.shape[0] + n

    got = torch.compile(f, backend="neuron", fullgraph=True)(torch.ones(3).to("neuron"), 4)
    assert got[1] == 7
    torch.testing.assert_close(got[0].cpu(), torch.full((3,), 2.0))


def test_index_put_with_cpu_indices_on_the_device_matches_cpu() -> None:
    idx = torch.tensor([0, 2, 2])  # CPU indices into a device tensor are allowed, as on CUDA (BEiT's backward)
    x = torch.randn(5, 3, requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    x[idx].sum().backward()
    xn[idx].sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad)


def test_unbind_and_split_with_one_result_compile() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:  # nn.LSTM/GRU with one layer unbind their [1, B, H] initial state
        (a,) = x.unbind(0)
        (b,) = x.split(1, 0)
        return a * 2 + b.squeeze(0)

    x = torch.randn(1, 3, 4)
    got = torch.compile(f, backend="neuron", fullgraph=True)(x.to("neuron"))
    torch.testing.assert_close(got.cpu(), f(x))


@pytest.mark.slow  # dynamo unrolls the recurrence: one forward and one backward compile per module
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_single_layer_rnn_compiles_with_allow_rnn(kind: str) -> None:
    import torch._dynamo

    torch.manual_seed(0)
    ref = getattr(torch.nn, kind)(4, 6)
    dev = getattr(torch.nn, kind)(4, 6)
    dev.load_state_dict(ref.state_dict())
    dev = dev.to("neuron")
    x = torch.randn(5, 3, 4)
    with torch._dynamo.config.patch(allow_rnn=True):  # dynamo traces the cells into the graph
        got = torch.compile(dev, backend="neuron")(x.to("neuron"))[0]
    want = ref(x)[0]
    torch.testing.assert_close(got.detach().cpu(), want.detach())
    got.sum().backward()
    want.sum().backward()
    for (name, p), q in zip(dev.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=name)
