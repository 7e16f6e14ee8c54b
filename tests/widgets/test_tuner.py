"""ShapeTuner controls, as a class would use them: kinds, bad input, min/max, Apply, empty state, staleness."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import trn_notebook
import trn_notebook.compiler as compiler
from trn_notebook.session.events import cell_finished
from trn_notebook.widgets import ShapeTuner
from trn_notebook.widgets.tuner import EMPTY


def update(widget: Any, state: dict[str, Any]) -> None:
    """Apply ``state`` as the front end does (a comm ``update`` message)."""
    widget.set_state(state)


@pytest.fixture
def target(fresh_compiler):
    bucketed = compiler.bucketed(
        lambda input_ids: input_ids + 1, dims={"input_ids": 1}, policy=compiler.BucketPolicy.pow2(8, 256)
    )
    for n in (5, 9, 30, 100):
        bucketed(torch.ones(1, n, device="neuron"))
    return bucketed


def test_choosing_explicit_list_starts_from_the_current_buckets_without_an_error(target):
    view = ShapeTuner(target)
    update(view, {"kind": "list"})
    assert view.error == "" and view.valid
    assert view.sizes == "8,16,32,64,128,256" and view.policy == "list:8,16,32,64,128,256"


def test_min_above_max_is_refused_and_apply_is_disabled(target):
    view = ShapeTuner(target)
    update(view, {"kind": "pow2", "min_len": 512, "max_len": 64})
    assert "min 512 is above max 64" in view.error
    assert not view.valid and not view.can_apply and view.policy == ""
    with pytest.raises(ValueError, match="valid policy"):
        view.apply()
    assert str(target.policy) == "pow2:8-256"  # the wrong policy was never set


def test_apply_enables_only_for_a_new_valid_candidate_and_disables_once_in_force(target):
    view = ShapeTuner(target)
    assert not view.can_apply
    update(view, {"kind": "step", "min_len": 8, "max_len": 256, "count": 4})
    assert view.can_apply
    view.apply()
    assert str(target.policy) == view.applied == view.policy and not view.can_apply


def test_in_force_follows_a_policy_set_by_another_cell_after_the_cell_finishes(target):
    view = ShapeTuner(target)
    target.policy = compiler.BucketPolicy.parse("list:64,256")
    cell_finished.emit()  # what IPython does after the cell that changed the policy
    assert view.applied == "list:64,256"


def test_an_empty_tuner_says_what_will_appear_instead_of_a_fake_policy(fresh_compiler):
    view = ShapeTuner()
    assert view.notice == EMPTY and view.hist["samples"] == 0
    assert "bucketed" in view.notice and "lengths=" in view.notice


def test_suggest_uses_the_bucket_count_in_every_kind(target):
    view = ShapeTuner(target, lengths=np.arange(10, 250))
    view._on_suggest({"max_compiles": 3})
    assert len(view.buckets) <= 3 and view.valid


def test_latency_and_cold_compile_come_from_this_sessions_compiles_and_say_so(target):
    """The tuner is given measured=: latency from the compiled schedules, cold compile the modeled Neuron
    compile of those graphs (never the laptop's compile wall time)."""
    records = [r for r in compiler.compile_log.snapshot() if r.model_name == target.name and r.error is None]
    assert records and all(r.cache_result == "miss" for r in records)  # a fresh cache: every bucket compiled cold
    compile_s = {
        b: sum(compiler.compile_time.record_compile_s(g) for g in graphs)
        for b, graphs in target.compiled_buckets.items()
    }
    assert sorted(compile_s) == [8, 16, 32, 128]  # lengths 5, 9, 30, 100 under pow2:8-256
    assert sum(compile_s.values()) == pytest.approx(compiler.compile_time.records_compile_s(records))

    view = ShapeTuner(target)  # the shape log's lengths: the same four buckets
    r = view.readouts
    assert r["compile_from"] == "modeled" and r["compile_source"].startswith("modeled Neuron compile")
    assert r["cold_compile_s"] == pytest.approx(sum(compile_s.values()))
    assert (
        r["latency_from"] == "compiled schedule"
        and "compiled schedule for buckets 8, 16, 32, 128" in r["latency_source"]
    )
    launch = trn_notebook.device.costmodel.get_cost_constants().graph_launch_s
    device_s = {b: sum(g.modeled_device_s for g in graphs) for b, graphs in target.compiled_buckets.items()}
    # p99 of four requests, one per bucket: the slowest bucket's own graph, launch included
    assert r["p99_s"] == pytest.approx(launch + max(device_s.values()))
    assert "cold compile from: modeled Neuron compile" in view.fallback_text()

    # A bucket not compiled yet: one graph (as each compiled bucket has), its instructions in proportion to its
    # length from the compiled ones; the fixed part per graph does not scale. It says so.
    update(view, {"kind": "list", "sizes": "12,32,128"})  # 5 and 9 land in 12, never compiled
    ct = compiler.compile_time
    instructions = {b: sum(g.extra["neuron_instructions"] for g in gs) for b, gs in target.compiled_buckets.items()}
    per_position = sum(instructions.values()) / sum(instructions)
    assert "other buckets in proportion to their length" in view.readouts["compile_source"]
    assert view.readouts["cold_compile_s"] == pytest.approx(
        ct.modeled_compile_s(12 * per_position, 1) + compile_s[32] + compile_s[128]
    )
    assert compile_s[8] >= ct.NEURON_COMPILE_FIXED_S  # seconds per graph, not milliseconds (issue 58)


def test_without_a_callable_the_figures_are_stated_assumptions(fresh_compiler):
    view = ShapeTuner(lengths=[100, 200, 300])
    r = view.readouts
    assert r["compile_from"] == "assumed" and "150 s per graph" in r["compile_source"]
    assert r["latency_from"] == "assumption" and "µs per padded position" in r["latency_source"]
    assert r["cold_compile_s"] == pytest.approx(150.0 * r["compiles"])


def test_lengths_above_the_largest_bucket_are_counted(fresh_compiler):
    view = ShapeTuner(lengths=[10, 20, 300, 400])
    update(view, {"kind": "list", "sizes": "16,32"})
    assert view.readouts["overflow"] == 2 and view.readouts["compiles"] == 2
