"""ShapeTuner and CacheView against the compiler (split from test_widgets.py)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.widgets.helpers import HOSTILE, assert_no_raw_markup, front_end_custom, front_end_update
from trn_notebook.widgets import CacheView, ShapeTuner

# -- ShapeTuner and CacheView against the compiler ---------------------------------------------


def compiler_with(*names: str) -> Any:
    """The compiler package; fails (never skips) if it lacks one of ``names``."""
    import importlib

    compiler = importlib.import_module("trn_notebook.compiler")
    missing = [n for n in names if not hasattr(compiler, n)]
    assert not missing, f"trn_notebook.compiler lacks {', '.join(missing)}"
    return compiler


@pytest.fixture
def given_lengths() -> Any:
    import numpy as np

    return np.random.default_rng(7).integers(16, 2048, size=100_000)


def test_tuner_readouts_are_the_tuner_functions_figures(given_lengths: Any) -> None:
    compiler = compiler_with("tune", "BucketPolicy")
    view = ShapeTuner(lengths=given_lengths)
    assert view.error == ""
    assert view.source == "given distribution"
    assert view.hist["samples"] == 100_000
    policy = compiler.BucketPolicy.parse(view.policy)
    assert view.policy == "pow2:16-2048"
    assert view.buckets == policy.buckets()
    expected = compiler.tune(policy, given_lengths)
    assert view.readouts["compiles"] == expected.compiles
    assert view.readouts["padding_waste_pct"] == pytest.approx(expected.padding_waste_pct)
    assert view.readouts["p99_s"] == pytest.approx(expected.p99_s)
    assert view.readouts["cold_compile_s"] == pytest.approx(expected.cold_compile_s)
    assert view.can_apply is False


def test_tuner_control_moves_from_the_front_end_recompute(given_lengths: Any) -> None:
    compiler = compiler_with("tune", "BucketPolicy")
    view = ShapeTuner(lengths=given_lengths)
    hist = view.hist
    front_end_update(view, {"kind": "step", "min_len": 256, "max_len": 2048, "count": 8})
    assert view.policy == "step:256:256-2048"
    expected = compiler.tune(compiler.BucketPolicy.parse("step:256:256-2048"), given_lengths)
    assert view.readouts["compiles"] == expected.compiles
    assert view.readouts["padding_waste_pct"] == pytest.approx(expected.padding_waste_pct)
    assert view.hist is hist  # binning is per data change, not per control move
    front_end_update(view, {"kind": "list", "sizes": "512, 1024,2048"})
    assert view.policy == "list:512,1024,2048" and view.buckets == [512, 1024, 2048]


def test_tuner_invalid_policy_is_reported_as_data(given_lengths: Any) -> None:
    compiler_with("tune", "BucketPolicy")
    view = ShapeTuner(lengths=given_lengths)
    good = view.policy
    front_end_update(view, {"kind": "list", "sizes": "12,abc"})
    assert view.error and "ValueError" in view.error
    assert good and view.policy == "" and not view.valid and not view.can_apply  # no stale candidate to apply
    front_end_update(view, {"sizes": "64,4096"})
    assert view.error == "" and view.policy == "list:64,4096"


def test_tuner_apply_sets_the_policy_on_the_bucketed_callable() -> None:
    compiler = compiler_with("bucketed", "BucketPolicy", "tune", "shape_log")
    compiler.shape_log.reset()
    target = compiler.bucketed(
        lambda input_ids: input_ids + 1, dims={"input_ids": 1}, policy=compiler.BucketPolicy.pow2(8, 256)
    )
    for n in (5, 9, 9, 30, 100, 130):
        target(torch.ones(1, n, device="neuron"))
    view = ShapeTuner(target)
    assert view.name == target.name and not view.can_apply  # the candidate is the policy in force
    assert view.applied == "pow2:8-256" == view.policy
    assert view.hist["samples"] == 6
    front_end_update(view, {"kind": "list", "sizes": "16,128,256"})
    assert view.can_apply
    assert str(target.policy) == "pow2:8-256"  # moving controls alone changes nothing
    front_end_custom(view, {"type": "apply"})
    assert view.error == ""
    assert str(target.policy) == "list:16,128,256" == view.applied
    by_name = ShapeTuner(name=target.name)  # as `%trn shapes <name>` builds it: reads the shape log
    assert by_name.source == f"shape log: {target.name}" and by_name.hist["samples"] == 6
    assert by_name.dim == "input_ids[1]"  # the bucketed dimension, not the batch
    assert by_name.can_apply is False  # no IPython shell here to find the callable in


def test_tuner_by_name_finds_the_callable_in_the_notebook_and_applies() -> None:
    from IPython.testing import globalipapp

    compiler = compiler_with("bucketed", "BucketPolicy", "tune", "shape_log")
    shell = globalipapp.get_ipython()
    target = compiler.bucketed(lambda input_ids: input_ids - 1, dims={"input_ids": 1}, policy="pow2:8-64")
    shell.user_ns["tuned_fn"] = target
    try:
        for n in (3, 20, 40):
            target(torch.ones(2, n, device="neuron"))
        view = ShapeTuner(name=target.name)
        assert not view.can_apply and view.applied == "pow2:8-64"  # found; nothing new to apply yet
        front_end_update(view, {"kind": "list", "sizes": "64"})
        assert view.readouts["compiles"] == 1 and view.can_apply
        front_end_custom(view, {"type": "apply"})
        assert str(target.policy) == "list:64" == view.applied
    finally:
        del shell.user_ns["tuned_fn"]


def test_tuner_without_target_follows_the_shape_log_and_lets_the_view_choose() -> None:
    compiler = compiler_with("bucketed", "BucketPolicy", "tune", "shape_log")
    compiler.shape_log.reset()
    view = ShapeTuner()  # as the dashboard builds it, before any bucketed callable ran
    assert view.hist["samples"] == 0 and view.callables == []
    first = compiler.bucketed(lambda input_ids: input_ids * 3, dims={"input_ids": 1}, policy="pow2:8-128")
    second = compiler.bucketed(lambda input_ids: input_ids * 4, dims={"input_ids": 1}, policy="list:64,256")
    for n in (5, 50, 100):
        first(torch.ones(1, n, device="neuron"))
    for n in (60, 200):
        second(torch.ones(1, n, device="neuron"))
    assert view.refresh_if_changed()
    assert view.callables == sorted([first.name, second.name])
    shown = first if view.name == first.name else second
    assert view.policy == str(shown.policy)  # controls start from the policy in force, not the empty default
    other = second if shown is first else first
    front_end_update(view, {"name": other.name})
    assert view.hist["samples"] == (2 if other is second else 3)
    assert view.policy == str(other.policy) and view.error == ""


def test_tuner_apply_without_a_callable_is_an_error_as_data(given_lengths: Any) -> None:
    compiler_with("tune", "BucketPolicy")
    view = ShapeTuner(lengths=given_lengths)
    front_end_custom(view, {"type": "apply"})
    assert "apply needs a BucketedCallable" in view.error


def test_tuner_suggest_uses_the_suggested_policy(given_lengths: Any) -> None:
    compiler = compiler_with("tune", "BucketPolicy", "suggest_policy")
    view = ShapeTuner(lengths=given_lengths)
    before = compiler.tune(view.policy, given_lengths)  # Suggest prices a compile as the read-outs do
    front_end_custom(view, {"type": "suggest", "max_compiles": 4})
    assert view.error == ""
    expected = compiler.suggest_policy(
        given_lengths, 4, compile_s=before.compile_s_per_graph, position_s=before.position_s
    )
    assert view.policy == str(expected)


def test_tuner_fallback_has_histogram_and_readouts(given_lengths: Any) -> None:
    compiler_with("tune", "BucketPolicy")
    view = ShapeTuner(target=HOSTILE, lengths=given_lengths)
    data, _ = view._repr_mimebundle_()
    assert "<svg" in data["text/html"] and "padding waste" in data["text/html"]
    assert f"{view.readouts['compiles']} compiles" in data["text/plain"]
    assert_no_raw_markup(data["text/html"])


@pytest.fixture
def compile_cache(tmp_path: Any) -> Any:
    """The compiler with a throwaway persistent cache and an empty compile log."""
    compiler = compiler_with("compile", "compile_log", "disk_cache")
    from trn_notebook.compiler import config

    with config.override(cache_dir=str(tmp_path / "neff-cache")):
        compiler.compile_log.reset()
        yield compiler
        compiler.compile_log.reset()


class _Hostile(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2).relu() + 1


_Hostile.__name__ = _Hostile.__qualname__ = HOSTILE


def test_cache_view_rows_follow_the_compile_log(compile_cache: Any) -> None:
    model = compile_cache.compile(_Hostile())
    model(torch.ones(4, 8, device="neuron"))
    model(torch.ones(4, 8, device="neuron"))
    model(torch.ones(6, 8, device="neuron"))  # a new shape: a recompile
    view = CacheView()
    log = compile_cache.compile_log.snapshot()
    assert [g["graph_id"] for g in view.graphs] == [e.graph_id for e in log]
    assert view.totals["graphs"] == len(log) >= 2
    assert view.totals["cold_s"] == pytest.approx(sum(e.compile_s for e in log))
    assert view.totals["results"].get("miss", 0) == sum(e.cache_result == "miss" for e in log)
    assert view.graphs[0]["stage_us"] == {k: pytest.approx(v) for k, v in log[0].stage_us.items()}
    assert any(g["recompile_reasons"] for g in view.graphs)
    assert view.disk_entries == len(compile_cache.disk_cache.cache_entries()) > 0


def test_cache_view_says_one_graph_in_the_singular(compile_cache: Any) -> None:
    model = compile_cache.compile(_Hostile())
    model(torch.ones(4, 8, device="neuron"))
    view = CacheView()
    assert view.totals["graphs"] == 1
    assert view.fallback_text().startswith("Compile cache: 1 graph (") and "<p>1 graph; cold" in view.fallback_html()


def test_cache_view_escapes_hostile_model_and_function_names(compile_cache: Any) -> None:
    model = compile_cache.compile(_Hostile())
    model(torch.ones(2, 3, device="neuron"))

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.sin() * 3

    fn.__name__ = fn.__qualname__ = "<img src=x onerror=alert(1)>"
    compile_cache.compile(fn)(torch.ones(5, device="neuron"))
    view = CacheView()
    assert any(HOSTILE in g["model_name"] or HOSTILE in g["graph_name"] for g in view.graphs)
    assert any("<img" in g["graph_name"] or "<img" in g["model_name"] for g in view.graphs)
    data, _ = view._repr_mimebundle_()
    assert_no_raw_markup(data["text/html"])
    assert "<img" not in data["text/html"]
    assert "&lt;script&gt;" in data["text/html"] and "&lt;img src=x" in data["text/html"]


def test_cache_clear_needs_confirmation_then_clears(compile_cache: Any) -> None:
    model = compile_cache.compile(_Hostile())
    model(torch.ones(3, 3, device="neuron"))
    view = CacheView()
    entries = view.disk_entries
    assert entries > 0
    front_end_custom(view, {"type": "clear_cache"})
    assert "needs confirmation" in view.error
    assert len(compile_cache.disk_cache.cache_entries()) == entries
    front_end_custom(view, {"type": "clear_cache", "confirm": True})
    assert compile_cache.disk_cache.cache_entries() == []
    assert view.disk_entries == 0
    assert view.status.startswith(f"removed {entries} cache entries")


def test_cache_view_without_compiler_state_shows_empty_totals(compile_cache: Any) -> None:
    view = CacheView()
    assert view.graphs == [] and view.totals["graphs"] == 0
    assert view.fallback_text().startswith("Compile cache: 0 graphs (none)")
