"""The training ledger: plan() against the published Trn1 training table, graph pricing, sequence parallelism,
and plans of different meshes one after another in one process."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from transformers import LlamaConfig

import trn_notebook
from trn_notebook.fidelity import training
from trn_notebook.planner import Workload


def _tiny(layers: int = 2) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip


def test_plans_of_different_meshes_one_after_another(fresh_device) -> None:
    """DTensor caches sharding results per thread (the backward's on the autograd engine's neuron thread); a later
    mesh of the same ranks compares equal, so a stale hit named the destroyed groups of the previous plan."""
    w = Workload(batch=1, seq=16, global_batch=4)
    for layouts in ("tp2xdp2+zero1", "tp2xpp2xdp2+zero1", "tp2", "tp2xpp2"):
        result = trn_notebook.plan(_tiny(4), w, layouts=layouts, execution="graph")
        assert result.table["step_s"].iloc[0] > 0


def test_sequence_parallel_plan_for_llama_shaped_models(fresh_device) -> None:
    result = trn_notebook.plan(_tiny(), Workload(batch=1, seq=16), layouts="tp2")
    kinds = result.runs["tp2"].run.ranks.by_kind()
    assert {"all_gather", "reduce_scatter"} <= set(kinds)  # the sequence shards gathered and scattered
    assert "sequence parallel" in result.text() and "loss on the shards" in result.text()


def test_graph_pricing_drops_dispatch_fallbacks_and_fused_traffic(fresh_device) -> None:
    cfg = _tiny()
    cfg.attention_dropout = 0.1  # dropout falls back to the CPU eagerly; the compiler lowers it
    eager = trn_notebook.plan(cfg, Workload(batch=2, seq=16), layouts="dp2")
    graph = trn_notebook.plan(cfg, Workload(batch=2, seq=16), layouts="dp2", execution="graph")
    assert graph.table.loc["dp2", "micro_s"] < 0.5 * eager.table.loc["dp2", "micro_s"]
    assert "dropout" in " ".join(eager.runs["dp2"].run.placement.fallback_ops)
    assert not graph.runs["dp2"].run.placement.fallback_ops
    assert "GRAPH" in graph.text() and "(LNC=2, graph)" in graph.text()
    with pytest.raises(ValueError, match="'eager' or 'graph'"):
        trn_notebook.plan(cfg, layouts="dp2", execution="compiled")


def test_the_ledger_shows_a_row_without_a_figure_as_missing() -> None:
    t6 = training.row("T6")
    table = training.markdown([training.TrainingResult(t6)])  # a row not (or not yet) modeled
    assert "| missing |" in table and t6.not_modeled in table
    assert [r.id for r in training.ROWS if r.fitted] == ["T1", "T2"]
    with pytest.raises(KeyError, match="T1, T2"):
        training.row("T9")


def test_an_image_model_plans_with_pixels(fresh_device) -> None:
    from transformers import ViTConfig

    cfg = ViTConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32, patch_size=8,
        num_labels=10,
    )  # fmt: skip
    result = trn_notebook.plan(cfg, Workload(batch=4, seq=17, global_batch=16), layouts="dp2", execution="graph")
    row = result.table.loc["dp2"]
    assert row["microbatches"] == 2 and row["sequences_per_s"] == pytest.approx(16 / row["step_s"])
    assert "conv" in " ".join(result.runs["dp2"].run.placement.keys())  # the patch embedding ran on pixels


@pytest.mark.slow
def test_t1_and_t2_are_within_the_issue_band(fresh_device) -> None:
    """The two rows the one training constant is fitted on: modeled within 0.8-1.25x of published."""
    for row in training.ROWS[:2]:
        r = training.evaluate(row, ("trn1",))
        assert 0.8 <= r.ratio <= 1.25, (row.id, r.ratio)
        assert r.fits and r.parts["compute"] > 0
