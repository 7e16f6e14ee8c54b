"""Device regressions the compatibility sweep found: each compares the device against CPU PyTorch."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import trn_notebook


def _neuron(t: torch.Tensor) -> torch.Tensor:
    return t.to("neuron")


def test_import_trn_notebook_before_torch_registers_the_device() -> None:
    code = "import trn_notebook, torch; print((torch.ones(2).to('neuron') + 1).cpu().tolist())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[2.0, 2.0]"


def test_out_tensor_resized_to_zero_elements_keeps_its_shape() -> None:
    x = torch.ones(1, 0, 3)
    assert torch.logical_not(_neuron(x)).shape == torch.logical_not(x).shape == (1, 0, 3)
    assert torch.eye(0, device="neuron").shape == (0, 0)
    assert (torch.isfinite(_neuron(x)).shape) == (1, 0, 3)


def test_out_tensor_grown_by_an_op_matches_cpu() -> None:
    out = torch.empty(0, device="neuron")
    torch.add(_neuron(torch.arange(4.0).reshape(2, 2)), 1, out=out)
    assert out.shape == (2, 2)
    assert out.cpu().tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_channels_last_tensor_moved_to_the_device_pools_like_cpu() -> None:
    x = torch.randn(2, 3, 6, 6).to(memory_format=torch.channels_last)
    moved = _neuron(x)
    assert moved.is_contiguous()  # the device stores only the contiguous format
    torch.testing.assert_close(torch.nn.functional.max_pool2d(moved, 2).cpu(), torch.nn.functional.max_pool2d(x, 2))
    x3 = torch.randn(1, 2, 3, 4, 5).to(memory_format=torch.channels_last_3d)
    got = torch.nn.functional.interpolate(_neuron(x3), scale_factor=2).cpu()
    torch.testing.assert_close(got, torch.nn.functional.interpolate(x3, scale_factor=2))


def test_python_scalar_for_a_tensor_parameter_matches_cpu() -> None:
    x, idx = torch.randn(3, 4), torch.randint(0, 3, (3, 4))
    assert torch.equal(torch.take_along_dim(_neuron(x), _neuron(idx), 0).cpu(), torch.take_along_dim(x, idx, 0))
    assert torch.equal(torch.copysign(_neuron(x), -1.5).cpu(), torch.copysign(x, -1.5))
    ints = torch.arange(6, dtype=torch.int32)
    got = torch.remainder(_neuron(ints), 2.5).cpu()
    assert got.dtype == torch.float32
    assert torch.equal(got, torch.remainder(ints, 2.5))


def test_backward_through_zero_gradient_ops_matches_cpu() -> None:
    x = torch.randn(5, requires_grad=True)
    xn = _neuron(x.detach()).requires_grad_()
    g = torch.randn(5)
    (expected,) = torch.autograd.grad(torch.sgn(x), x, g)
    (got,) = torch.autograd.grad(torch.sgn(xn), xn, _neuron(g))
    assert got.device.type == "neuron"
    assert torch.equal(got.cpu(), expected)


def test_non_blocking_copy_to_host_matches_cpu() -> None:
    x = torch.randn(4, 5)
    got = _neuron(x).to("cpu", non_blocking=True)
    assert got.device.type == "cpu"
    assert torch.equal(got, x)
    assert torch.equal(_neuron(x).to("cpu", torch.bfloat16, non_blocking=True), x.to(torch.bfloat16))


def test_lazy_conjugate_results_and_inputs_match_cpu() -> None:
    x = torch.randn(5, 6)
    torch.testing.assert_close(torch.fft.ifft(_neuron(x), norm="ortho").cpu(), torch.fft.ifft(x, norm="ortho"))
    z = torch.randn(4, dtype=torch.complex64)
    zc = _neuron(z).conj()
    assert zc.is_conj()
    torch.testing.assert_close(zc.cpu(), z.conj())
    torch.testing.assert_close((zc * 2).cpu(), z.conj() * 2)
    assert "-" in repr(_neuron(torch.tensor([1 + 1j], dtype=torch.complex64)).conj())


def test_bfloat16_group_norm_and_addr_match_cpu_kernels() -> None:
    x = torch.randn(2, 6, 5, dtype=torch.bfloat16) * 4
    w, b = torch.randn(6, dtype=torch.bfloat16), torch.randn(6, dtype=torch.bfloat16)
    expected = torch.nn.functional.group_norm(x, 3, w, b)
    got = torch.nn.functional.group_norm(_neuron(x), 3, _neuron(w), _neuron(b)).cpu()
    torch.testing.assert_close(got, expected)
    m, u, v = (torch.randn(*s, dtype=torch.bfloat16) for s in ((4, 5), (4,), (5,)))
    torch.testing.assert_close(
        torch.addr(_neuron(m), _neuron(u), _neuron(v), beta=0.3, alpha=2).cpu(), torch.addr(m, u, v, beta=0.3, alpha=2)
    )


def test_python_scalar_keeps_the_dtype_of_a_zero_dim_operand() -> None:
    y, x = torch.randn(6, dtype=torch.bfloat16), torch.randn(6, dtype=torch.bfloat16)
    assert torch.trapz(_neuron(y), _neuron(x)).dtype == torch.bfloat16  # sum(...) / 2.0 on a 0-dim tensor
    a = torch.tensor(1.5, dtype=torch.bfloat16)
    assert torch.equal(torch.remainder(_neuron(a), 0.7).cpu(), torch.remainder(a, 0.7))


def test_sparse_result_on_the_device_is_a_clear_error() -> None:
    with pytest.raises(NotImplementedError, match="neuron holds only strided"):
        _neuron(torch.eye(3)).to_sparse()


def test_mode_with_out_tensors_matches_cpu() -> None:
    x = torch.randint(0, 3, (4, 5)).float()
    values, indices = torch.empty(0, device="neuron"), torch.empty(0, dtype=torch.long, device="neuron")
    got = torch.mode(_neuron(x), 1, out=(values, indices))
    assert got[0] is values
    expected = torch.mode(x, 1)
    assert torch.equal(values.cpu(), expected.values) and torch.equal(indices.cpu(), expected.indices)


def test_pin_memory_then_non_blocking_copy_matches_cpu() -> None:
    x = torch.randn(3, 4)
    pinned = x.pin_memory()
    assert pinned.is_cpu and torch.equal(pinned, x)
    assert torch.equal(pinned.to("neuron", non_blocking=True).cpu(), x)


@pytest.mark.parametrize("fn", [torch.nn.functional.silu, torch.nn.functional.mish])
def test_bfloat16_activation_backward_matches_cpu_kernels(fn) -> None:
    x = (torch.randn(1000) * 4).bfloat16().requires_grad_()
    g = torch.randn(1000).bfloat16()
    (expected,) = torch.autograd.grad(fn(x), x, g)
    xn = _neuron(x.detach()).requires_grad_()
    (got,) = torch.autograd.grad(fn(xn), xn, _neuron(g))
    assert torch.equal(got.cpu(), expected)


def test_channels_last_request_on_the_device_is_refused_where_it_is_made() -> None:
    x = _neuron(torch.randn(1, 3, 4, 4))
    with pytest.raises(RuntimeError, match="only contiguous memory format.*aten::clone"):
        x.contiguous(memory_format=torch.channels_last)
    with pytest.raises(RuntimeError, match="only contiguous memory format"):
        x.to(memory_format=torch.channels_last)
    assert x.clone(memory_format=torch.contiguous_format).is_contiguous()


def test_float32_pinv_and_matrix_rank_run_on_the_host_with_gradients() -> None:
    x = torch.randn(4, 3)
    xn = _neuron(x).requires_grad_()
    pinv = torch.linalg.pinv(xn)  # its decomposition builds float64 tolerances: computed on the host
    assert pinv.device.type == "neuron"
    torch.testing.assert_close(pinv.detach().cpu(), torch.linalg.pinv(x))
    g = torch.randn(3, 4)
    (got,) = torch.autograd.grad(pinv, xn, _neuron(g))
    xc = x.clone().requires_grad_()
    (expected,) = torch.autograd.grad(torch.linalg.pinv(xc), xc, g)
    torch.testing.assert_close(got.cpu(), expected)
    assert torch.linalg.matrix_rank(_neuron(x)).item() == torch.linalg.matrix_rank(x).item()
    assert {"aten::linalg_pinv", "aten::linalg_matrix_rank"} <= set(trn_notebook.get_fallback_ops())


def test_renorm_backward_runs_on_the_host_and_matches_cpu() -> None:
    x = torch.randn(3, 4)
    xn, xc = _neuron(x).requires_grad_(), x.clone().requires_grad_()
    (got,) = torch.autograd.grad(torch.renorm(xn, 2, 0, 1.0).sum(), xn)  # its backward builds a float64 norm
    (expected,) = torch.autograd.grad(torch.renorm(xc, 2, 0, 1.0).sum(), xc)
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), expected)
