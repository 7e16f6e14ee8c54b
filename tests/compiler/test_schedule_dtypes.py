"""The schedule prices a fused kernel's FLOPs at each node's own dtype (dry25: the 8B's compiled forward
was modeled slower than its eager forward because a bf16 matmul fused with RMSNorm's f32 upcast was
charged at the f32 peak)."""

from __future__ import annotations

import torch

from trn_notebook.compiler.aten_decompositions import trace
from trn_notebook.compiler.lower import lower
from trn_notebook.compiler.ops import OPS
from trn_notebook.compiler.passes import run_passes
from trn_notebook.compiler.schedule import build_schedule


def residual_then_norm(x: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """A decoder layer's projection, residual add and RMSNorm's f32 upcast (Llama's order)."""
    h = x @ w + r
    return h.float().pow(2).mean(-1)


def test_a_bf16_matmul_fused_with_f32_pointwise_is_not_charged_at_the_f32_peak():
    args = (torch.randn(2048, 4096, dtype=torch.bfloat16), torch.randn(4096, 4096, dtype=torch.bfloat16))
    args += (torch.randn(2048, 4096, dtype=torch.bfloat16),)
    g, _ = run_passes(lower(trace(residual_then_norm, *args), "residual_then_norm"))
    sched = build_schedule(g)
    mm_kernel = next(k for k in sched.kernels if "mm" in k.ops)
    assert any(OPS[op].kind == "pointwise" and op != "add" for op in mm_kernel.ops), mm_kernel.ops  # fused
    # compiled = one launch + fused kernels; eager = the same nodes each with a launch and a round trip
    assert sched.device_s < sched.eager_device_s
    # the matmul's kernel alone is at most the bf16 roofline of its FLOPs plus what the f32 ops add
    mm_only, _ = run_passes(lower(trace(lambda a, b: a @ b, *args[:2]), "mm_only"))
    mm_s = max(k.device_s for k in build_schedule(mm_only).kernels)
    assert mm_kernel.device_s < 1.5 * mm_s
