"""MoE as NxD Inference runs it (fidelity.moe), replicated weights and the PE-array utilisation of the
model-level cost model (issue 26)."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.compiler import compile_time
from trn_notebook.device import costmodel
from trn_notebook.fidelity import moe
from trn_notebook.fidelity.compile_rows import COMPILE_ROWS
from trn_notebook.fidelity.configs import DEEPSEEK_V3, LLAMA_8B, QWEN35, TRINITY_MINI
from trn_notebook.fidelity.model import chip_of, graph_instructions, kernels_budget, pe_utilisation, rank_shape
from trn_notebook.fidelity.walk import GROUPED, MATMUL, OpCount, walk


def _grouped(tokens: int, top_k: int, experts: int, d: int, n: int) -> OpCount:
    rows = tokens * top_k
    weights = 2.0 * d * n * min(experts, rows)
    return OpCount("_grouped_mm", GROUPED, 2.0 * rows * d * n, 2.0 * rows * (d + n) + weights, torch.bfloat16,
                   0.0, weights, experts, rows, d, n, tokens)  # fmt: skip


def test_blockwise_context_encoding_computes_every_worst_case_block():
    # expert_mlps_v2.forward_blockwise: N = ceil((T*k - (E-1)) / B) + E - 1, at most T*k
    assert moe.blocks(512, 8, 256) == 263  # DeepSeek-V3 / Qwen3.5-35B-A3B at their 512 bucket
    assert moe.blocks(2048, 8, 128) == 159  # Trinity-Mini's 2048 bucket, batch 1
    assert moe.blocks(16, 8, 256) == 128  # fewer routed rows than experts: one block per row at most
    op = moe.dispatch(_grouped(2048, 8, 128, 2048, 2048), prefill=True)
    assert op.name.endswith("[blockwise]") and (op.batch, op.m) == (159, moe.BLOCK_SIZE)
    assert op.flops == pytest.approx(2.0 * 159 * 512 * 2048 * 2048)  # padded rows computed: ~5x the routed
    assert op.weight_bytes == pytest.approx(159 * 2 * 2048 * 2048)  # each block loads its expert
    with pytest.raises(ValueError):
        moe.blocks(0, 8, 128)


def test_token_generation_loads_each_tokens_experts_and_small_prefills_run_all_experts():
    dec = moe.dispatch(_grouped(4, 8, 128, 2048, 1024), prefill=False)
    assert dec.name.endswith("[selective]") and dec.weight_bytes == pytest.approx(32 * 2 * 2048 * 1024)
    assert dec.flops == pytest.approx(2.0 * 32 * 2048 * 1024)  # only the routed rows
    assert moe.path(32, 8, 128, prefill=True) == "all_experts"  # T*k = 256 < one block of 512
    small = moe.dispatch(_grouped(32, 8, 128, 64, 64), prefill=True)
    assert small.flops == pytest.approx(2.0 * 128 * 32 * 64 * 64)  # every expert on every token
    other = OpCount("mm", MATMUL, 1.0, 1.0, torch.bfloat16)
    assert moe.dispatch(other, prefill=True) is other


def test_pe_utilisation_and_the_per_rank_shape_of_sharded_experts():
    assert pe_utilisation(7168, 4096) == 1.0
    assert pe_utilisation(32, 7168) == pytest.approx(0.25)  # 32 of 128 contraction rows
    assert pe_utilisation(7168, 32) == pytest.approx(0.5)  # under the 64-cycle nc_matmul floor
    assert pe_utilisation(0, 0) == 1.0
    down = _grouped(512, 8, 256, 2048, 7168)  # DeepSeek-V3 down_proj: [I=2048] -> hidden 7168
    assert rank_shape(down, 64, 7168)[2:] == (32, 7168)  # intermediate split over 64 ranks: 32 rows
    gate_up = _grouped(512, 8, 256, 7168, 4096)
    assert rank_shape(gate_up, 64, 7168)[2:] == (7168, 64)
    chip = chip_of("trn2")
    before = costmodel.get_cost_constants()
    try:  # a low MFU keeps the op compute-bound whatever the fitted constants are (the factor is what is tested)
        costmodel.set_cost_constants(compute_efficiency=0.02)
        b = kernels_budget([down], chip, 64, kv_heads=1, hidden=7168)
        unsplit = costmodel.kernel_terms(chip, down.flops / 64, 0.0, down.dtype)[0]
    finally:
        costmodel.set_cost_constants(compute_efficiency=before.compute_efficiency)
    assert b.reads_s == 0 and b.compute_s == pytest.approx(4 * unsplit)  # a quarter of the array busy
    kv = OpCount("mm", MATMUL, 2.0 * 512 * 8192 * 1024, 1.0, torch.bfloat16, 0.0, 1.0, 1, 512, 8192, 1024)
    assert rank_shape(kv, 64, 8192)[3] == 128  # K/V heads fewer than ranks are replicated, not split


def test_replicated_weights_are_whole_on_every_rank():
    assert DEEPSEEK_V3.is_replicated("model.layers.3.self_attn.q_a_proj.weight")
    assert DEEPSEEK_V3.is_replicated("model.layers.3.self_attn.kv_a_proj_with_mqa.weight")
    assert not DEEPSEEK_V3.is_replicated("model.layers.3.self_attn.q_b_proj.weight")
    for spec in (DEEPSEEK_V3, QWEN35["35B-A3B"]):  # NxD's RouterTopK.linear_router is a plain nn.Linear
        assert spec.is_replicated("model.layers.3.mlp.gate.weight")
        assert not spec.is_replicated("model.layers.3.mlp.gate_proj.weight")
    assert not LLAMA_8B.is_replicated("model.layers.3.mlp.gate.weight")  # dense: no router
    rep = OpCount("mm", MATMUL, 8e9, 8e6, torch.bfloat16, 0.0, 8e6, 1, 512, 2048, 4096, replicated=True)
    split = OpCount("mm", MATMUL, 8e9, 8e6, torch.bfloat16, 0.0, 8e6, 1, 512, 2048, 4096)
    chip = chip_of("trn2")
    one, eight = (kernels_budget([o], chip, 8, kv_heads=8, hidden=2048) for o in (rep, split))
    assert one.compute_s + one.reads_s == pytest.approx(8 * (eight.compute_s + eight.reads_s))


@pytest.mark.slow
def test_the_walk_records_shapes_and_replicated_weights():
    class Two(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = torch.nn.Linear(256, 512, bias=False, dtype=torch.bfloat16)
            self.down = torch.nn.Linear(512, 256, bias=False, dtype=torch.bfloat16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down(self.up(x))

    def run(model, count):
        with count("fwd"):
            model(torch.zeros(64, 256, dtype=torch.bfloat16))

    ops = [o for o in walk(Two, run, replicated=lambda n: n.startswith("up"))["fwd"] if o.kind == MATMUL]
    assert [(o.m, o.k, o.n, o.replicated) for o in ops] == [(64, 256, 512, True), (64, 512, 256, False)]


def test_compile_instructions_count_tiles_and_rows_compile_their_sources_graph_sets():
    assert compile_time.matmul_instructions(1, 512, 32, 7168) == 56  # one per 128x128 stationary tile
    assert compile_time.matmul_instructions(263, 512, 32, 7168) == 263 * 56
    assert compile_time.matmul_instructions(0, 512, 32, 7168) == 0
    with pytest.raises(ValueError):
        compile_time.matmul_instructions(1, -1, 1, 1)
    down = moe.dispatch(_grouped(512, 8, 256, 2048, 7168), prefill=True)
    assert graph_instructions([down], 64, 7168) == 263 * 56  # the FLOPs bound would give 4x fewer
    graphs = {r.label: r.graphs for r in COMPILE_ROWS}
    assert graphs["DeepSeek-V3 TP64"] == 2 and graphs["Trinity-Mini TP4 batch 1"] == 2  # bucketing off / one bucket
    assert all(r.spec in (TRINITY_MINI, QWEN35["2B"], QWEN35["35B-A3B"], DEEPSEEK_V3, None) for r in COMPILE_ROWS)
    assert all((r.spec is None) == (r.walk is not None) for r in COMPILE_ROWS)  # a row walks a decoder or its own
