"""Host calls: ops eager runs as CPU fallbacks run on the host inside a compiled graph, charged as eager charges
them; native pointwise ops with no record are pointwise nodes; data-dependent output shapes are refused."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.compiler import compile_log
from trn_notebook.compiler.host_call import ATEN_POINTWISE, HOST_CALL, resolve
from trn_notebook.device import costmodel
from trn_notebook.device.placement import placement_log

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="neuron", fullgraph=True, dynamic=False)


def _window(fn, *args):
    before = placement_log.snapshot()
    out = fn(*args)
    return out, placement_log.snapshot().since(before)


def _graph_ops():
    from trn_notebook.compiler.backend import _memory

    return [n.op for graph, _ in _memory.values() for n in graph.nodes]


def det_plus(x):
    return torch.linalg.det(x) * 2 + 1


def test_linear_algebra_is_a_host_call_charged_exactly_as_the_eager_fallback():
    a = torch.randn(3, 4, 4)
    x = a.to("neuron")
    _, eager = _window(det_plus, x)
    compiled = _compiled(det_plus)
    compiled(x)  # compile (and a first run)
    out, window = _window(compiled, x)
    torch.testing.assert_close(out.cpu(), det_plus(a))
    assert HOST_CALL in _graph_ops()
    fallbacks = {op: e for op, e in window.items() if e.category == "cpu_fallback"}
    assert set(fallbacks) == {op for op, e in eager.items() if e.category == "cpu_fallback"} == {"_linalg_det"}
    got, want = fallbacks["_linalg_det"], eager["_linalg_det"]
    # eager's function of the functional op's tensors (eager reaches the out= overload, so it also copies the
    # out buffers to the host: its d2h is larger by exactly the results' bytes)
    results = list(torch.ops.aten._linalg_det.default(a))
    assert got.calls == 1 and got.device_s == pytest.approx(costmodel.fallback_seconds("_linalg_det", [a], results))
    assert got.h2d == want.h2d == sum(r.nbytes for r in results) and got.d2h == a.nbytes
    assert [op for op, e in window.items() if e.category == "native"] == [
        f"graph:{compile_log.snapshot()[-1].graph_name}"
    ]


def test_host_call_backward_equals_cpu_and_its_gradient_graph_falls_back_too():
    a = torch.randn(2, 3, 3) + 3 * torch.eye(3)
    x = a.to("neuron").requires_grad_()
    compiled = _compiled(lambda t: torch.linalg.inv(t).sum(-1))
    out, window = _window(lambda t: torch.autograd.grad(compiled(t).sum(), t)[0], x)
    ref = a.clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.linalg.inv(ref).sum(-1).sum(), ref)
    torch.testing.assert_close(out.cpu(), want, rtol=1e-4, atol=1e-4)
    assert window["linalg_inv_ex"].category == "cpu_fallback"


def test_fft_runs_on_the_host_and_a_special_function_as_a_pointwise_node():
    a = torch.rand(4, 16) + 0.5
    x = a.to("neuron")

    def spectrum(t):
        return torch.fft.rfft(t).abs().sum(-1, keepdim=True) + torch.special.bessel_j0(t)

    out, window = _window(_compiled(spectrum), x)
    torch.testing.assert_close(out.cpu(), spectrum(a), rtol=1e-5, atol=1e-5)
    assert [op for op, e in window.items() if e.category == "cpu_fallback"] == ["_fft_r2c"]
    assert ATEN_POINTWISE in _graph_ops() and "special_bessel_j0" not in window  # native: inside the graph


def test_data_dependent_output_shape_is_refused_at_compile_time_with_the_reason():
    x = torch.tensor([0.0, 1.0, 0.0, 2.0], device="neuron")
    with pytest.raises(Exception, match=r"aten\.nonzero\.default has a data-dependent output shape.*static shapes"):
        _compiled(lambda t: torch.nonzero(t) + 1)(x)
    # training: masked_select's backward (masked_scatter at a data-dependent size) once aborted the process
    w = torch.randn(4, device="neuron", requires_grad=True)
    with pytest.raises(Exception, match=r"aten\.masked_select\.default has a data-dependent output shape"):
        _compiled(lambda t, m: torch.masked_select(t, m))(w, x > 0)


def test_a_parsed_graph_may_call_only_ops_of_the_placement_its_ir_op_stands_for():
    assert resolve("aten._linalg_det.default", HOST_CALL) is torch.ops.aten._linalg_det.default
    assert resolve("aten.special_bessel_j0.default", ATEN_POINTWISE) is torch.ops.aten.special_bessel_j0.default
    for name, ir_op in (
        ("aten.add.Tensor", HOST_CALL),  # native: never a host call
        ("aten._linalg_det.default", ATEN_POINTWISE),
        ("aten.nonzero.default", HOST_CALL),  # data-dependent: refused
        ("quantized.add.default", HOST_CALL),
        ("aten.no_such_op.default", HOST_CALL),
    ):
        with pytest.raises(KeyError):
            resolve(name, ir_op)


def test_an_effectful_check_runs_on_the_host_and_raises_as_eagerly():
    def inv_plus(t):
        return torch.linalg.inv(t) + 1

    compiled = _compiled(inv_plus)
    a = torch.eye(3) * 2
    torch.testing.assert_close(compiled(a.to("neuron")).cpu(), inv_plus(a))
    with pytest.raises(Exception, match="singular"):
        compiled(torch.zeros(3, 3, device="neuron"))


def test_a_host_call_under_dryrun_is_charged_as_a_real_run_charges_it():
    import trn_notebook

    x = torch.randn(3, 4, 4, device="neuron")
    compiled = _compiled(det_plus)
    compiled(x)
    _, real = _window(compiled, x)
    torch._dynamo.reset()
    with trn_notebook.dryrun() as run:
        _compiled(det_plus)(torch.randn(3, 4, 4, device="neuron"))
    dry = run.figures.placement["_linalg_det"]
    assert dry.category == "cpu_fallback" and dry.calls == 1
    assert dry.device_s == pytest.approx(real["_linalg_det"].device_s) and dry.h2d == real["_linalg_det"].h2d
