"""nki.simulate under the numerics policy (tile stores, ScalarE ranges) and nki.check's AWS ratio."""

from __future__ import annotations

import warnings

import torch

import trn_notebook
import trn_notebook.nki as nki
import trn_notebook.nki.isa as nisa
import trn_notebook.nki.language as nl
from trn_notebook.aws_ratio import numerics_ratio
from trn_notebook.device.numerics.policy import NeuronNumericsWarning
from trn_notebook.nki.kernels_tutorial import matmul_tiled


@nki.jit
def _rsqrt_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.ndarray(x.shape, dtype=nl.float32)
    nisa.activation(dst=r, op=nl.rsqrt, data=t)
    nl.store(out, r)
    return out


@nki.jit
def _to_bf16_kernel(x):
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.load(x)
    r = nl.ndarray(x.shape, dtype=nl.bfloat16)
    nisa.activation(dst=r, op=nl.copy, data=t)
    nl.store(out, r)
    return out


def test_check_reports_the_aws_ratio_of_a_bf16_matmul(fresh_device):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(256, 128, generator=g).bfloat16(), torch.randn(256, 512, generator=g).bfloat16()
    res = nki.check(matmul_tiled, lambda lhsT, rhs: lhsT.T @ rhs, a, b, rtol=2e-2, atol=2e-2)
    (ratio,) = res.ratios
    assert ratio is not None and res.ratio_passed  # FP32 PSUM, one rounding: about CPU BF16's error
    assert ratio.linf < 1.5 and ratio.l2 < 1.5
    ref = numerics_ratio(matmul_tiled(a, b), (a.float().T @ b.float()), (a.T @ b))
    assert abs(ref.l2 - ratio.l2) < 1e-12
    assert "AWS ratio vs CPU BF16" in res.text()


def test_ratio_fails_when_the_error_is_twice_bf16s():
    fp32 = torch.linspace(-3, 3, 1000)
    bf16 = fp32.bfloat16()
    worse = fp32 + 2 * (bf16.float() - fp32) + 2**-8 * fp32.sign()
    r = numerics_ratio(worse, fp32, bf16)
    assert not r.passed and r.l2 > 1.5
    assert numerics_ratio(fp32, fp32, bf16).linf == 0.0


def test_simulated_kernel_stores_round_stochastically_under_the_policy(fresh_device):
    x = torch.full((128, 256), 1 + 2**-9)
    assert set(_to_bf16_kernel(x).float().unique().tolist()) == {1.0}  # RNE
    with trn_notebook.numerics("trainium", stochastic_rounding=True, seed=2):
        out = _to_bf16_kernel(x).float()
    assert set(out.unique().tolist()) == {1.0, 1 + 2**-7}
    assert abs(out.double().mean().item() - (1 + 2**-9)) < 3e-4


def test_simulated_activation_outside_its_range_warns_under_trainium(fresh_device):
    x = torch.zeros(128, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _rsqrt_kernel(x)  # exact: the simulator's historical behaviour, no warning
    with trn_notebook.numerics("trainium"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _rsqrt_kernel(x)
    msgs = [w for w in caught if issubclass(w.category, NeuronNumericsWarning)]
    assert msgs and "rsqrt" in str(msgs[0].message) and "[2^-87, 2^97]" in str(msgs[0].message)
