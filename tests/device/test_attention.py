"""Eager SDPA on ``neuron`` equals CPU SDPA for every mask kind, GQA, dropout and causal combination."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from trn_notebook.device.ops.attention import FLASH, additive_mask, choose_kernel

N = "neuron"


@st.composite
def attention_case(draw):
    b, hq, lq, lk, d = (
        draw(st.integers(1, 2)),
        draw(st.sampled_from([2, 4])),
        draw(st.integers(1, 9)),
        draw(st.integers(1, 9)),
        draw(st.sampled_from([4, 8])),
    )
    gqa = draw(st.booleans())
    hk = hq // 2 if gqa else hq
    mask_kind = draw(st.sampled_from(["none", "bool", "bool_row_masked", "float", "float_grad", "bool_bcast"]))
    causal = draw(st.booleans()) and mask_kind in ("none", "bool", "float")
    dropout = draw(st.sampled_from([0.0, 0.0, 0.3]))
    dtype = draw(st.sampled_from([torch.float32, torch.float32, torch.bfloat16]))
    seed = draw(st.integers(0, 2**16))
    return b, hq, hk, lq, lk, d, gqa, mask_kind, causal, dropout, dtype, seed


def _inputs(case):
    b, hq, hk, lq, lk, d, _gqa, mask_kind, _causal, _dropout, dtype, seed = case
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, hq, lq, d, generator=g).to(dtype)
    k = torch.randn(b, hk, lk, d, generator=g).to(dtype)
    v = torch.randn(b, hk, lk, d, generator=g).to(dtype)
    mask = None
    if mask_kind.startswith("bool"):
        shape = (lq, lk) if mask_kind == "bool_bcast" else (b, 1, lq, lk)
        mask = torch.rand(shape, generator=g) > 0.3
        mask[..., 0] = True  # every row attends somewhere ...
        if mask_kind == "bool_row_masked":
            mask[..., 0, :] = False  # ... except one fully masked row (CPU gives zeros there)
    elif mask_kind.startswith("float"):
        mask = torch.randn(1, hq, lq, lk, generator=g).to(dtype)
    return q, k, v, mask


def _run(device, case):
    *_, gqa, mask_kind, causal, dropout, _dtype, seed = case
    q, k, v, mask = _inputs(case)
    leaves = [t.to(device).requires_grad_(True) for t in (q, k, v)]
    m = None
    if mask is not None:
        m = mask.to(device)
        if mask_kind == "float_grad":  # T5's learned position bias
            m.requires_grad_(True)
            leaves.append(m)
    torch.manual_seed(seed)  # dropout draws from the host generator on both devices
    out = F.scaled_dot_product_attention(*leaves[:3], attn_mask=m, dropout_p=dropout, is_causal=causal, enable_gqa=gqa)
    (out.float() * torch.linspace(-1, 1, out.shape[-1], device=device)).sum().backward()
    return [out.detach().cpu().float()] + [t.grad.cpu().float() for t in leaves]


@settings(max_examples=60, deadline=None)
@given(attention_case())
def test_eager_sdpa_matches_cpu(case):
    try:
        ref = _run("cpu", case)
    except RuntimeError as exc:  # e.g. is_causal=True with an explicit mask: neuron must refuse it the same way
        with pytest.raises(RuntimeError, match=re.escape(str(exc).splitlines()[0][:60])):
            _run(N, case)
        return
    got = _run(N, case)
    tol = {"rtol": 2e-2, "atol": 2e-2} if case[-2] == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-5}
    assert len(ref) == len(got)
    for name, r, g in zip(["out", "dq", "dk", "dv", "dmask"], ref, got, strict=False):
        torch.testing.assert_close(g, r, **tol, msg=lambda m, n=name: f"{n}: {m}")


def test_causal_bool_mask_regression(fresh_device):
    """The measured defect: a plain causal bool mask was off by 2.4 (passed to the kernel as numbers)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 16) for _ in range(3))
    mask = torch.ones(16, 16, dtype=torch.bool).tril()
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    got = F.scaled_dot_product_attention(q.to(N), k.to(N), v.to(N), attn_mask=mask.to(N)).cpu()
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_selection_follows_cpu(fresh_device):
    q = torch.randn(1, 2, 4, 8)
    mask = torch.randn(1, 2, 4, 4)
    n = q.to(N)

    def kernel(mask: torch.Tensor | None = None, dropout_p: float = 0.0) -> int:
        return choose_kernel(n, n, n, additive_mask(mask, n.dtype), dropout_p, False, None, False)

    assert kernel() == FLASH
    assert kernel(mask.to(N) > 0) == FLASH  # bool masks are converted, then flash
    assert kernel(mask.to(N).requires_grad_(True)) != FLASH
    assert kernel(dropout_p=0.1) != FLASH
    assert choose_kernel(q, q, q, None, 0.0, False, None, False) == FLASH


def test_t5_style_bias_with_grad_backward(fresh_device):
    torch.manual_seed(1)
    q = torch.randn(2, 4, 6, 8)
    bias = torch.randn(1, 4, 6, 6)
    ref_b = bias.clone().requires_grad_(True)
    F.scaled_dot_product_attention(q, q, q, attn_mask=ref_b).sum().backward()
    got_b = bias.to(N).requires_grad_(True)
    F.scaled_dot_product_attention(q.to(N), q.to(N), q.to(N), attn_mask=got_b).sum().backward()
    torch.testing.assert_close(got_b.grad.cpu(), ref_b.grad, rtol=1e-5, atol=1e-5)


def test_errors_match_cpu(fresh_device):
    q = torch.randn(1, 4, 3, 8)
    k = torch.randn(1, 2, 3, 8)
    with pytest.raises(RuntimeError) as cpu_err:
        F.scaled_dot_product_attention(q, k, k)  # different head counts without enable_gqa
    with pytest.raises(RuntimeError) as dev_err:
        F.scaled_dot_product_attention(q.to(N), k.to(N), k.to(N))
    assert str(dev_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]
