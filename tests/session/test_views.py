"""Session views and results: the figures the workshop's lessons are asserted from."""

from __future__ import annotations

import pytest
import torch

import trn_notebook
from trn_notebook import session
from trn_notebook.session.eager import EagerWindow


def _work(x: torch.Tensor) -> torch.Tensor:
    for _ in range(5):
        x = torch.tanh(x @ x)
    return x


def test_timeit_enqueue_only_is_shorter_on_the_modeled_host_clock(fresh_device):
    x = torch.randn(128, 128, device="neuron")
    synced = session.timeit(lambda: _work(x), number=2, repeat=2, warmup=0, sync=True)
    enqueued = session.timeit(lambda: _work(x), number=2, repeat=2, warmup=0, sync=False)
    assert enqueued.host_s < synced.host_s
    assert synced.host_s >= synced.modeled_device_s * 0.99  # the synchronised host waited for the device
    assert "modeled host time per loop" in synced.text() and "host does not wait" in enqueued.text()


def test_eager_report_modeled_time_includes_fallbacks(fresh_device):
    x = torch.randn(64, 64, device="neuron")
    with EagerWindow() as plain:
        _work(x)
    with EagerWindow() as falls:
        y = _work(x)
        for _ in range(5):
            y, _ = y.sort(dim=-1)
    a, b = plain.report, falls.report
    assert a is not None and b is not None
    assert a.fallback_s == 0 and b.fallback_s > 0
    assert b.modeled_s == pytest.approx(a.modeled_s + b.fallback_s, rel=1e-6)
    assert "CPU fallbacks" in b.text() and "aten::sort" in b.text()


def test_fused_window_reports_fewer_launches(fresh_device):
    x = torch.randn(32, 32, device="neuron")
    with EagerWindow() as plain:
        _work(x)
    with EagerWindow(fusion=True) as fused:
        _work(x)
    assert fused.report.launches < plain.report.launches  # type: ignore[union-attr]


def test_explain_shows_the_cached_ir_on_a_disk_hit(fresh_compiler):
    from trn_notebook.compiler import backend

    def f(x):
        return torch.relu(x @ x) + 1

    x = torch.randn(8, 8, device="neuron")
    cold = trn_notebook.compile(f)
    cold(x)
    cold_ir = session.explain(cold, "ir").text()
    torch._dynamo.reset()
    backend.clear_memory_cache()
    warm = trn_notebook.compile(f)
    torch.testing.assert_close(warm(x).cpu(), f(x.cpu()))
    warm_ir = session.explain(warm, "ir").text()
    assert "mm(" in cold_ir and "mm(" in warm_ir
    assert "lowering skipped" not in warm_ir and "disk cache hit" in warm_ir


def test_shapes_result_counts_graphs_per_bucket(fresh_compiler):
    from trn_notebook import BucketPolicy, bucketed

    model = bucketed(torch.nn.Linear(4, 4).to("neuron"), dims={"input": 0}, policy=BucketPolicy.pow2(4, 16))
    for n in (3, 4, 5, 7, 9):
        model(torch.randn(n, 4, device="neuron"))
    result = session.shapes()
    assert result.shapes_seen() == 5 and result.graphs() == 3  # buckets 4, 8, 16
    assert "5 input shapes seen → 3 graphs" in result.text()


def test_shapes_result_without_compiles_says_what_will_appear(fresh_compiler):
    text = session.shapes().text()
    assert "no compiled callable has run yet" in text and "%%trn compile" in text


def test_shapes_counts_the_graphs_that_exist_not_the_shapes_seen(fresh_compiler):
    # Issue 31: `%trn shapes` said "14 graphs" when 8 existed (dynamo's recompile_limit: shapes 9-14 ran eagerly).
    import trn_notebook
    from trn_notebook.compiler import compile_log

    def scale_rows(x):  # a name no other test compiles
        return x * 2 + 1

    fn = trn_notebook.compile(scale_rows)
    limit = torch._dynamo.config.recompile_limit
    for n in range(1, limit + 7):
        torch.testing.assert_close(fn(torch.ones(n, 3, device="neuron")).cpu(), torch.full((n, 3), 3.0))
    records = [r for r in compile_log.snapshot() if r.model_name == "scale_rows"]
    result = session.shapes("scale_rows")
    assert result.shapes_seen() == limit + 6
    assert result.graphs("scale_rows") == len(records) == limit
    assert f"{limit + 6} input shapes seen → {limit} graphs compiled" in result.text()
    assert "6 ran eagerly" in result.text()
