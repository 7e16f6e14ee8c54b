"""The kernel library against PyTorch on the CPU (differential tests; hypothesis where it is cheap)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from trn_notebook.nki.kernels import flash_attention_kernel, matmul_kernel, rmsnorm_kernel, softmax_kernel


@settings(max_examples=6, deadline=None)
@given(m=st.integers(1, 2), k=st.integers(1, 3), n=st.sampled_from([128, 512, 1024]), seed=st.integers(0, 99))
def test_matmul_kernel_matches_torch(m, k, n, seed):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(128 * m, 128 * k, generator=g), torch.randn(128 * k, n, generator=g)
    torch.testing.assert_close(matmul_kernel(a.T.contiguous(), b), a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_kernel_bf16_accumulates_in_fp32():
    a, b = torch.randn(128, 512).bfloat16(), torch.randn(512, 512).bfloat16()
    got = matmul_kernel(a.T.contiguous(), b)
    want = (a.float() @ b.float()).bfloat16()
    torch.testing.assert_close(got, want, rtol=1.6e-2, atol=1e-2)


@settings(max_examples=6, deadline=None)
@given(rows=st.integers(1, 300), cols=st.integers(1, 700), seed=st.integers(0, 99))
def test_softmax_kernel_matches_torch(rows, cols, seed):
    x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)) * 4
    torch.testing.assert_close(softmax_kernel(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)


@settings(max_examples=6, deadline=None)
@given(rows=st.integers(1, 300), dim=st.integers(1, 600), seed=st.integers(0, 99))
def test_rmsnorm_kernel_matches_torch(rows, dim, seed):
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(rows, dim, generator=g), torch.randn(dim, generator=g)
    want = F.rms_norm(x, (dim,), w, eps=1e-6)
    torch.testing.assert_close(rmsnorm_kernel(x, w), want, rtol=1e-5, atol=1e-5)


def test_flash_attention_kernel_matches_sdpa():
    torch.manual_seed(0)
    q, k, v = (torch.randn(256, 64) for _ in range(3))
    for causal in (False, True):
        want = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=causal)[0]
        torch.testing.assert_close(flash_attention_kernel(q, k, v, causal=causal), want, rtol=1e-4, atol=1e-4)
    rep = flash_attention_kernel.last_report
    assert rep.utilisation["ScalarE"] > 0 and rep.instructions["TensorE"] > 0
