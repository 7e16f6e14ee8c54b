"""nki_op: a kernel as a torch custom op on neuron (placement, clocks, autograd) and inside torch.compile."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trn_notebook.device import clocks, placement_log
from trn_notebook.nki import nki_op
from trn_notebook.nki.kernels import rmsnorm_kernel, softmax_kernel


def _rms(x, w, eps=1e-6):
    return F.rms_norm(x, (x.shape[-1],), w, eps=eps)


rmsnorm = nki_op("nkitest::rmsnorm", reference=_rms)(rmsnorm_kernel)
softmax = nki_op("nkitest::softmax")(softmax_kernel)


def test_op_on_neuron_is_a_custom_kernel_in_the_placement_log(fresh_device):
    x, w = torch.randn(200, 96), torch.randn(96)
    y = rmsnorm(x.to("neuron"), w.to("neuron"))
    assert y.device.type == "neuron"
    torch.testing.assert_close(y.cpu(), _rms(x, w), rtol=1e-5, atol=1e-5)
    entry = placement_log.snapshot()["nkitest::rmsnorm"]
    assert entry.category == "custom_kernel" and entry.calls == 1
    modeled = rmsnorm.kernel.last_report.modeled_s
    assert entry.device_s == pytest.approx(modeled + 150e-6)  # kernel time + one eager launch
    assert clocks.snapshot().launches >= 1


def test_reference_gives_gradients():
    x = torch.randn(130, 64, requires_grad=True)
    w = torch.randn(64, requires_grad=True)
    rmsnorm(x, w).square().sum().backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    _rms(x2, w2).square().sum().backward()
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-4, atol=1e-4)


def test_without_gradients_backward_is_torch_library_error():
    x = torch.randn(4, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        softmax(x).sum().backward()


def test_compiled_model_runs_the_kernel_as_one_launch(fresh_compiler):
    import trn_notebook

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(64, 64)
            self.w = torch.nn.Parameter(torch.rand(64) + 0.5)

        def forward(self, x):
            return rmsnorm(self.lin(x), self.w).relu()

    torch.manual_seed(0)
    cpu = Block()
    dev = Block().to("neuron")
    dev.load_state_dict(cpu.state_dict())
    x = torch.randn(128, 64)
    compiled = torch.compile(dev, fullgraph=True, backend="neuron")
    got = compiled(x.to("neuron"))
    torch.testing.assert_close(got.detach().cpu(), cpu(x), rtol=1e-4, atol=1e-4)
    schedule = trn_notebook.explain(compiled).stages["schedule"]
    nki_rows = [line for line in schedule.splitlines() if " NKI " in line]
    assert len(nki_rows) == 1 and nki_rows[0].rstrip().endswith("kernel_call"), schedule
    ir = trn_notebook.explain(compiled).stages["ir"]
    assert "kernel_call('nkitest::rmsnorm@" in ir
    got.sum().backward()  # the backward graph differentiates through the reference
    cpu(x).sum().backward()
    torch.testing.assert_close(dev.w.grad.cpu(), cpu.w.grad, rtol=1e-4, atol=1e-4)


def test_kernel_call_survives_the_disk_cache(fresh_compiler, tmp_path):
    from trn_notebook.compiler import backend, compile_log
    from trn_notebook.compiler.config import override

    def rms_twice(x, w):  # a name no other test compiles (graph names count per function name)
        return rmsnorm(x, w) * 2

    x, w = torch.randn(128, 64), torch.rand(64) + 0.5
    want = _rms(x, w) * 2
    with torch.no_grad(), override(cache_dir=str(tmp_path / "kc"), disable_cache=False):
        first = torch.compile(rms_twice, fullgraph=True, backend="neuron")(x.to("neuron"), w.to("neuron"))
        torch._dynamo.reset()
        backend.clear_memory_cache()  # the next compile reads the graph text back from disk
        second = torch.compile(rms_twice, fullgraph=True, backend="neuron")(x.to("neuron"), w.to("neuron"))
    torch.testing.assert_close(first.cpu(), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(second.cpu(), want, rtol=1e-5, atol=1e-5)
    assert compile_log.snapshot()[-1].cache_result == "disk hit"


def test_mutating_kernel_writes_its_argument_in_place(fresh_device):
    import trn_notebook.nki as nki
    import trn_notebook.nki.language as nl

    @nki.jit
    def scale_into(x, out):
        nl.store(out, nl.multiply(nl.load(x), 3.0))

    op = nki_op("nkitest::scale_into", mutates_args=("out",), outputs=0)(scale_into)
    x = torch.randn(64, 32)
    out = torch.zeros(64, 32).to("neuron")
    assert op(x.to("neuron"), out) is None
    torch.testing.assert_close(out.cpu(), 3 * x)
    with pytest.raises(ValueError, match="not tensor parameters"):
        nki_op("nkitest::bad", mutates_args=("nope",))(scale_into)
