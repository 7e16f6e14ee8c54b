"""serve_estimate(): padding to buckets, p50/p99, cold compiles apart, the cost comparison, the ledger rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("transformers")

from transformers import LlamaConfig

from trn_notebook.compiler.compile_time import modeled_compile_s
from trn_notebook.fidelity import ledger
from trn_notebook.fidelity.configs import ModelSpec
from trn_notebook.fidelity.costs import CostInputs
from trn_notebook.fidelity.model import Layout
from trn_notebook.fidelity.serve import _instructions, last_estimate, serve_estimate

TINY = LlamaConfig(
    hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    vocab_size=512,
)  # fmt: skip
PROMPTS = [40, 100, 120, 200, 500]


@pytest.fixture(scope="module")
def est():
    return serve_estimate(TINY, prompt_len=PROMPTS, output_len=16, buckets=[128, 256, 512], layout=2)


def test_each_prompt_is_padded_to_its_bucket_and_percentiles_come_from_the_distribution(est):
    assert est.bucket_counts == {128: 3, 256: 1, 512: 1}
    ttft = {b: est.prefill[b].total_s for b in est.bucket_counts}
    assert ttft[128] < ttft[256] < ttft[512]  # a longer bucket is a bigger graph
    per_request = np.array([ttft[128]] * 3 + [ttft[256], ttft[512]])
    assert est.ttft.p50 == pytest.approx(np.percentile(per_request, 50))
    assert est.ttft.p99 == pytest.approx(np.percentile(per_request, 99))
    kernels = {b: est.prefill[b].compute_s + est.prefill[b].reads_s for b in ttft}
    buckets = [128, 128, 128, 256, 512]
    padded = sum((1 - p / b) * kernels[b] for p, b in zip(PROMPTS, buckets))
    assert est.padding_share == pytest.approx(padded / sum(kernels[b] for b in buckets))
    e2e = per_request + 15 * est.decode.total_s
    assert est.e2e.mean == pytest.approx(e2e.mean())
    assert est.tokens_per_s == pytest.approx(16 / e2e.mean())
    assert est.chips == 1 and est.tokens_per_s_per_chip == est.tokens_per_s


def test_cold_compiles_are_counted_per_graph_and_kept_out_of_the_latencies(est):
    # three prefill buckets + the decode buckets reached: 40..55, 100..115 -> 128; 120..135 -> 128, 256;
    # 200..215 -> 256; 500..515 -> 512 (past it: counted in 512's graph, and said)
    assert est.cold_graphs == 6
    assert any("1 request(s) decode past the largest bucket (512)" in n for n in est.notes)
    spec, lay = ModelSpec.from_config(TINY), Layout("trn2", 2)
    context = int(np.mean(PROMPTS)) + 8
    walks = {
        b: ledger.walk_scenario(ledger.Scenario(spec, lay, b, b, 16, decode_context=context)) for b in (128, 256, 512)
    }
    decodes = {b: ledger.walk_scenario(ledger.Scenario(spec, lay, b, b, 16, decode_context=b)) for b in (128, 256, 512)}
    instructions = sum(_instructions(w["prefill"], 2, spec.hidden) for w in walks.values())
    instructions += sum(_instructions(w["decode"], 2, spec.hidden) for w in decodes.values())
    assert (
        est.cold_compile_s == pytest.approx(modeled_compile_s(instructions, est.cold_graphs)) and est.cold_graphs == 6
    )
    assert est.e2e.p99 == pytest.approx(est.ttft.p99 + 15 * est.decode.total_s)  # no compile inside
    text = est.text()
    assert "modeled Neuron compile" in text and "TTFT p50" in text and "per chip" in text
    assert last_estimate() is est


def test_costs_only_from_user_figures_and_missing_inputs_read_missing(est):
    c = est.costs
    assert c is not None and c.cost_per_output is None and c.migration_cost is None and c.break_even_outputs is None
    assert "missing (give price_per_hour)" in c.card().text()
    assert c.first_useful_s == pytest.approx(c.cold_compile_s + c.load_s + est.e2e.p50)
    assert c.amortize_requests == int((c.cold_compile_s + c.load_s) / c.warm_request_s)


def test_break_even_against_a_named_baseline():
    from trn_notebook.fidelity.costs import cost_of

    est = last_estimate()
    assert est is not None
    per_request = 1 / est.requests_per_s
    ours = 36.0 / 3600 * per_request / 0.9
    base = {"name": "GPU box", "cost_per_output": 2 * ours}
    inputs = CostInputs(None, 36.0, 10, 800.0, 0.9, base)
    figures = {"requests_per_s": est.requests_per_s, "cold_compile_s": est.cold_compile_s, "first_request_s": 0.1}
    c = cost_of(inputs, **figures, weight_bytes=10**9)
    assert c.cost_per_accepted_output == pytest.approx(ours)
    assert c.migration_cost == 8000.0
    assert c.break_even_outputs == pytest.approx(8000.0 / ours)
    assert c.break_even_s == pytest.approx(c.break_even_outputs * per_request)
    cheaper = cost_of(
        CostInputs(None, 36.0, 10, 800.0, 0.9, {"name": "GPU", "cost_per_output": ours / 2}), **figures, weight_bytes=1
    )
    assert math.isinf(cheaper.break_even_outputs) and "never" in cheaper.card().text()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"accepted_fraction": 0.0},
        {"price_per_hour": -1.0},
        {"baseline": {"name": "x"}},
        {"baseline": {"cost_per_output": 1.0}},
    ],
)
def test_bad_cost_inputs_raise(kwargs):
    with pytest.raises(ValueError):
        CostInputs(**kwargs)


def test_bad_requests_raise_clear_errors():
    with pytest.raises(ValueError, match="exceeds the largest bucket"):
        serve_estimate(TINY, prompt_len=600, output_len=4, buckets=[128, 512], layout=2)
    with pytest.raises(ValueError, match="queue"):
        serve_estimate(TINY, prompt_len=64, output_len=4, batch=1, concurrency=2, buckets=[128], layout=2)
    with pytest.raises(ValueError, match="unknown model name"):
        serve_estimate("no-such-model")
    with pytest.raises(TypeError, match="transformers"):
        serve_estimate(object())
    with pytest.raises(ValueError, match="positive"):
        serve_estimate(TINY, prompt_len=[0, 5], buckets=[128], layout=2)


def test_the_migration_report_shows_the_session_estimate_and_reset_forgets_it(est):
    import trn_notebook
    from trn_notebook.migration.render import MigrationReport, collect_evidence

    serve_estimate(TINY, prompt_len=PROMPTS, output_len=16, buckets=[128, 256, 512], layout=2)
    rows = MigrationReport(collect_evidence()).rows()
    speed, startup = rows[3][1], rows[4][1]
    assert "serve estimate (modeled)" in speed and "TTFT p50" in speed and "held-out rows R1" in speed
    assert "Serve estimate (modeled)" in startup and "first useful result" in startup
    assert "break-even missing (give" in startup  # no price, days or baseline given: shown missing
    trn_notebook.reset()
    assert last_estimate() is None
    rows = MigrationReport(collect_evidence()).rows()
    assert "serve estimate" not in rows[3][1].lower() and "serve estimate" not in rows[4][1].lower()
    assert "ledger rows" in rows[3][1]  # the modeled device times still name their rows


@pytest.mark.slow
@pytest.mark.parametrize("row_id", ["R1", "R12"])
def test_serve_estimate_reproduces_the_ledger_rows_it_covers(row_id):
    rows = {r.metric: r for r in ledger.ROWS if r.id == row_id}
    s = rows["TTFT"].scenario
    est = serve_estimate(
        s.spec, prompt_len=s.prompt, output_len=s.output, batch=s.batch, concurrency=s.concurrency,
        buckets=[s.bucket], layout=s.layout, decode_context=s.decode_context or None,
    )  # fmt: skip
    assert est.ttft.p50 == pytest.approx(ledger.evaluate(rows["TTFT"]).modeled, rel=1e-9)
    assert est.tpot.p50 == pytest.approx(ledger.evaluate(rows["TPOT"]).modeled, rel=1e-9)
    if "tok/s" in rows:
        assert est.tokens_per_s == pytest.approx(ledger.evaluate(rows["tok/s"]).modeled, rel=1e-9)
    for metric, row in rows.items():
        modeled = {"TTFT": est.ttft.p50, "TPOT": est.tpot.p50, "tok/s": est.tokens_per_s}[metric]
        ratio = row.published / modeled if metric == "tok/s" else modeled / row.published
        assert 0.75 <= ratio <= 1.25, (row_id, metric, ratio)  # the held-out rows are within 25%


def test_a_decode_only_walk_walks_no_prefill_and_reuses_the_cached_decode(monkeypatch):
    """Issue 30 item 3: serve_estimate's decode graphs ask for the decode phase only, so no prefill is walked
    for them, and a second scenario with the same decode graph reuses the walk (the same list object)."""
    spec, lay = ModelSpec.from_config(TINY), Layout("trn2", 2)
    scenario = ledger.Scenario(spec, lay, 128, 128, 16, batch=2, decode_context=200)
    keys = ledger._phase_keys(scenario)
    for key in keys.values():
        monkeypatch.delitem(ledger._WALKS, key, raising=False)
    decode = ledger.walk_scenario(scenario, ("decode",))["decode"]
    assert keys["prefill"] not in ledger._WALKS and any(op.kv_bytes > 0 for op in decode)
    again = ledger.Scenario(spec, lay, 256, 256, 16, batch=2, decode_context=200)
    assert ledger.walk_scenario(again, ("decode",))["decode"] is decode
