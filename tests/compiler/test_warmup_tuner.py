"""Warm-up of a bucket policy, and the tuner's latency/compile columns read from compiled graphs (issue 19).

* ``warmup`` compiles every bucket once, then calls of any length compile nothing;
* with ``measured=`` the tuner's latency per bucket is the compiled graph's schedule, other
  buckets are scaled from those, and cold compile is the measured compile time; every figure
  says where it came from.
"""

from __future__ import annotations

import pytest
import torch

from trn_notebook import cache as user_cache
from trn_notebook.compiler import bucketed, compile_log, compile_time, tune
from trn_notebook.compiler.backend import clear_memory_cache
from trn_notebook.device import costmodel


def head(input_ids: torch.Tensor) -> torch.Tensor:
    return (input_ids.float() * 2).sin() + 1  # position-wise: padding does not change real positions


def test_warmup_compiles_every_bucket_then_nothing_compiles_and_the_tuner_reads_those_graphs(fresh_compiler):
    runner = bucketed(head, dims={"input_ids": 1}, policy="pow2:4-64")
    with pytest.raises(ValueError, match="needs example inputs"):
        user_cache.warmup(runner, progress=False)
    summary = user_cache.warmup(runner, torch.ones(1, 5, dtype=torch.long), progress=False)
    assert summary.buckets == (4, 8, 16, 32, 64) and summary.graphs == 5
    assert summary.results == {"miss": 5} and summary.cache_bytes > 0 and summary.compile_s > 0
    assert "5 buckets, 5 graphs (5 miss)" in str(summary)
    assert summary.modeled_neuron_s and summary.modeled_neuron_s > 0 and "modeled Neuron compile" in str(summary)
    before = len(compile_log.snapshot())
    for n in (1, 3, 7, 20, 33, 64):
        x = torch.randint(0, 9, (1, n))
        torch.testing.assert_close(runner(x), head(x))
    assert len(compile_log.snapshot()) == before  # 0 compiles in the timed loop
    with pytest.raises(TypeError, match="needs a bucketed callable"):
        user_cache.warmup(head)
    _tuner_reads_compiled_schedules_and_measured_compile_times(runner)


def _tuner_reads_compiled_schedules_and_measured_compile_times(runner) -> None:
    assert sorted(runner.compiled_buckets) == [4, 8, 16, 32, 64]
    lengths = [3, 5, 9, 17, 40, 60]
    result = tune("pow2:4-64", lengths, measured=runner)
    launch = costmodel.get_cost_constants().graph_launch_s
    for b, graphs in runner.compiled_buckets.items():
        assert result.bucket_latency_s[b] == pytest.approx(launch + sum(g.modeled_device_s for g in graphs))
    assert "compiled schedule for buckets 4, 8, 16, 32, 64" in result.latency_source
    modeled = sum(compile_time.record_compile_s(g) for graphs in runner.compiled_buckets.values() for g in graphs)
    measured = sum(g.compile_s for graphs in runner.compiled_buckets.values() for g in graphs)
    # cold compile is the modeled Neuron compile, never this laptop's compile wall time
    assert result.cold_compile_s == result.modeled_neuron_compile_s == pytest.approx(modeled) and modeled > 0
    assert result.cold_compile_s != pytest.approx(measured)
    assert result.compile_source.startswith("modeled Neuron compile: modeled from the instructions of buckets")
    assert compile_time.DERIVED_FROM in result.compile_source

    wider = tune("pow2:4-128", [*lengths, 100], measured=runner)  # bucket 128 never compiled
    assert "least-squares line" in wider.latency_source and "for 128" in wider.latency_source
    assert wider.bucket_latency_s[128] > wider.bucket_latency_s[64]
    assert "in proportion to their length" in wider.compile_source
    assert wider.modeled_neuron_compile_s > result.modeled_neuron_compile_s  # 128 scaled by its length
    assert "in proportion to their length" in wider.modeled_neuron_source


def test_tuner_without_compiled_graphs_says_its_figures_are_assumptions():
    result = tune("list:4,8", [1, 4, 5, 8])
    assert result.latency_source.endswith(
        "assumption: 20 µs per padded position (no compiled graph to read a schedule from)"
    )
    assert result.compile_source.startswith("assumed: 150 s per graph") and "torchneuron.md" in result.compile_source
    assert tune("list:4,8", [1], compile_s=2.0).compile_source == "given: 2 s per graph"


def test_the_tuner_prices_a_policy_the_same_on_a_cold_and_a_warm_cache(fresh_compiler):
    """Cold (every bucket a miss) and warm (every bucket a disk hit in a new session): one figure, modeled."""
    lengths = [3, 5, 9, 17, 40, 60]
    cold_runner = bucketed(head, dims={"input_ids": 1}, policy="pow2:4-64")
    user_cache.warmup(cold_runner, torch.ones(1, 5, dtype=torch.long), progress=False)
    cold = tune("pow2:4-64", lengths, measured=cold_runner)
    assert {g.cache_result for gs in cold_runner.compiled_buckets.values() for g in gs} == {"miss"}
    torch._dynamo.reset()  # a new session on the same disk cache
    clear_memory_cache()  # and without its in-memory compiled graphs
    warm_runner = bucketed(head, dims={"input_ids": 1}, policy="pow2:4-64")
    user_cache.warmup(warm_runner, torch.ones(1, 5, dtype=torch.long), progress=False)
    assert {g.cache_result for gs in warm_runner.compiled_buckets.values() for g in gs} == {"disk hit"}
    warm = tune("pow2:4-64", lengths, measured=warm_runner)
    assert warm.cold_compile_s == pytest.approx(cold.cold_compile_s) and warm.compile_source == cold.compile_source
    assert (warm.p50_s, warm.p99_s) == pytest.approx((cold.p50_s, cold.p99_s))
