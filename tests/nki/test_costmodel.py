"""The engine-level cost model: per-instruction formulas, overlap of engines, overridable constants."""

from __future__ import annotations

import pytest
import torch

import trn_notebook.nki as nki
import trn_notebook.nki.isa as nisa
import trn_notebook.nki.language as nl
from trn_notebook.nki import costmodel as cm
from trn_notebook.nki.kernels_tutorial import TUTORIAL_KERNELS, mamba_v1, matmul_fully_optimized


@nki.jit
def one_matmul(a, b):
    sa, sb = nl.load(a), nl.load(b)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=sa, moving=sb)
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(acc))
    return out


def test_matmul_instruction_cost_follows_the_isa_formula():
    rep = nki.estimate(one_matmul, ((128, 128), torch.bfloat16), ((128, 512), torch.bfloat16), chip="trn2")
    assert rep.busy_s["TensorE"] == pytest.approx(512 / 2.4e9)  # max(min(64, 128), 512) cycles at 2.4 GHz
    rep32 = nki.estimate(one_matmul, ((128, 128), torch.float32), ((128, 512), torch.float32), chip="trn2")
    assert rep32.busy_s["TensorE"] == pytest.approx(4 * 512 / 2.4e9)  # FP32 is four passes


def test_engines_overlap_and_utilisation_is_a_fraction():
    rep = nki.estimate(
        TUTORIAL_KERNELS["Optimization 3"], ((2048, 2048), torch.bfloat16), ((2048, 1024), torch.bfloat16), chip="trn1"
    )
    flops = 2 * 2048 * 2048 * 1024
    tensor_bound = flops / (2 * 128 * 128 * 2.8e9)
    assert rep.modeled_s >= tensor_bound
    assert rep.modeled_s < sum(rep.busy_s.values())  # lanes ran in parallel
    assert all(0 <= u <= 1.0 + 1e-9 for u in rep.utilisation.values())


def test_constants_are_overridable():
    shapes = (((128, 128), torch.bfloat16), ((128, 512), torch.bfloat16))
    base = nki.estimate(one_matmul, *shapes).modeled_s
    try:
        nki.set_kernel_cost_constants(dma_fixed_latency_s=10e-6)
        slower = nki.estimate(one_matmul, *shapes).modeled_s
    finally:
        nki.reset_kernel_cost_constants()
    assert slower > base + 2 * (10e-6 - 1.3e-6) * 0.99  # two dependent DMA waves (load, store)
    with pytest.raises(TypeError, match="valid"):
        nki.set_kernel_cost_constants(no_such_constant=1)


def test_dma_efficiency_saturates_with_descriptor_size():
    assert cm.dma_efficiency(256) < 0.5 < cm.dma_efficiency(2048) < cm.dma_efficiency(4096) < 1


def test_tutorial_kernels_compute_the_product():
    a, b = torch.randn(1024, 256).bfloat16(), torch.randn(1024, 1024).bfloat16()
    want = a.float().T @ b.float()
    for k in TUTORIAL_KERNELS.values():
        kw = {"tiles_m": 2, "tiles_n": 2, "tiles_k": 4} if k is matmul_fully_optimized else {}
        got = k(a, b, **kw).float()
        assert float((got - want).abs().max() / want.abs().max()) < 1e-2


def test_mamba_kernel_matches_the_recurrence():
    torch.manual_seed(0)
    b, c, s, n = 1, 128, 32, 3
    delta, u = torch.rand(b, c, s) * 0.1, torch.randn(b, c, s)
    A, B, C = -torch.rand(c, n), torch.randn(b, n, s), torch.randn(b, n, s)
    dA = torch.exp(delta[:, :, None, :] * A[None, :, :, None])
    dBu = delta[:, :, None, :] * B[:, None, :, :] * u[:, :, None, :]
    h, outs = torch.zeros_like(dA[..., 0]), []
    for i in range(s):
        h = dA[..., i] * h + dBu[..., i]
        outs.append(h)
    want = (torch.stack(outs, -1) * C[:, None, :, :]).sum(2)
    torch.testing.assert_close(mamba_v1(delta, u, A, B, C), want, rtol=1e-5, atol=1e-5)
