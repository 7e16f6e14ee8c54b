"""A prefill's masked attention on trn2 runs NxD Inference's causal flash-attention kernel, which skips the
upper-triangle tiles (fidelity.model.causal_attention_kernel): half the query x key pairs are computed."""

from __future__ import annotations

import torch

from trn_notebook.fidelity import Layout, step_budget, walk
from trn_notebook.fidelity.model import causal_attention_kernel
from trn_notebook.fidelity.walk import ATTENTION

H, L, DH = 4, 512, 64


def _attention_ops(causal_flag: bool):
    class Attn(torch.nn.Module):
        def forward(self, q: torch.Tensor) -> torch.Tensor:
            if causal_flag:
                return torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
            mask = torch.ones(L, L, dtype=torch.bool).tril()
            return torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)

    def run(model, count):
        with count("fwd"):
            model(torch.zeros(1, H, L, DH, dtype=torch.bfloat16))

    return [o for o in walk(Attn, run)["fwd"] if o.kind == ATTENTION]


def test_nxdi_picks_the_causal_kernel_at_lnc2_for_the_bucket_sizes_its_source_names():
    trn2, inf2 = Layout("trn2", 8), Layout("inf2", 8)
    assert causal_attention_kernel(trn2, 512) and causal_attention_kernel(trn2, 768)  # < 1024: multiple of 256
    assert causal_attention_kernel(trn2, 2048) and causal_attention_kernel(trn2, 12288)  # >= 1024: of 512
    assert not causal_attention_kernel(trn2, 1280) and not causal_attention_kernel(trn2, 500)
    assert not causal_attention_kernel(trn2, 1)  # a decode step
    assert not causal_attention_kernel(inf2, 2048)  # LNC=1


def test_a_masked_prefill_attention_is_charged_half_on_trn2_and_in_full_where_the_kernel_does_not_run():
    (masked,) = _attention_ops(causal_flag=False)
    (flagged,) = _attention_ops(causal_flag=True)
    assert masked.masked and not flagged.masked
    assert masked.flops == 2 * flagged.flops  # the walk counts every pair of a materialised mask

    def compute(op, layout, tokens):
        return step_budget([op], layout, layers=0, hidden=H * DH, kv_heads=H, tokens=tokens, vocab=1, batch=1).compute_s

    trn2, inf2 = Layout("trn2", 1), Layout("inf2", 1)
    assert compute(masked, trn2, L) == compute(flagged, trn2, L)  # the kernel skips the masked half
    assert compute(masked, trn2, L) < compute(masked, trn2, L - 12)  # no kernel for a bucket of 500 positions
    assert compute(flagged, inf2, L) * 2 == compute(masked, inf2, L)  # inf2: no causal kernel, every pair
