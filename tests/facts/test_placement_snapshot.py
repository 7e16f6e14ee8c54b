"""The backend-neutral Placement: aggregations computed once on the snapshot, "not measured" kept as such."""

from __future__ import annotations

import pytest
import torch

from trn_notebook import facts
from trn_notebook.device.placement import placement_log
from trn_notebook.facts.base import NOT_MEASURED, OpPlacement, Placement
from trn_notebook.facts.simulator import placement_of


def test_hardware_placement_aggregates_counts_and_leaves_costs_unmeasured():
    p = Placement({"aten::mm": OpPlacement("native", 4), "aten::svd": OpPlacement("cpu_fallback", 1)}, measured=False)
    assert p.calls_by_category == {"native": 4, "cpu_fallback": 1} and p.total_calls == 5
    assert p.ops_by_category == {"native": 1, "cpu_fallback": 1} and p.fallback_ops == ["aten::svd"]
    assert p.device_ms is None and p.host_ms is None and p.bytes_moved is None and p.fallback_share is None
    assert p["aten::mm"].calls == 4 and p["aten::mm"].bytes_moved is None
    named_only = Placement({"aten::mm": OpPlacement("native", None)}, measured=False)
    assert named_only.calls_by_category["native"] == NOT_MEASURED and named_only.total_calls == NOT_MEASURED
    later = Placement({"aten::mm": OpPlacement("native", 6), "aten::add": OpPlacement("native", 2)}, measured=False)
    window = later.since(p)
    assert {op: r.calls for op, r in window.items()} == {"aten::mm": 2, "aten::add": 2}
    assert window.only("native").calls_by_category["native"] == 4 and len(window.only("cpu_fallback")) == 0
    with pytest.raises(TypeError):  # a typed row: no dict-style access (issue 29 retired the shim)
        p["aten::mm"]["calls"]  # type: ignore[index]


def test_simulator_placement_is_the_placement_log_with_every_figure(fresh_device):
    x = torch.ones(8, 8, device="neuron")
    x @ x
    with pytest.warns(UserWarning):
        torch.sort(x)  # a documented CPU fallback
    snap = placement_log.snapshot()
    p = facts.current().placement()
    assert list(p) == list(placement_of(snap)) == [f"aten::{n}" for n in sorted(snap)]
    assert p.measured and set(p.calls_by_category) == {"native", "cpu_fallback", "unsupported", "host_only"}
    assert p.calls_by_category["native"] == sum(e.calls for e in snap.values() if e.category == "native")
    assert p.device_ms == pytest.approx(sum(e.device_s for e in snap.values()) * 1e3)
    assert p.bytes_moved == sum(e.h2d + e.d2h for e in snap.values())
    assert p.fallback_share == pytest.approx(p.fallback_ms / p.device_ms) and 0 < p.fallback_share < 1
    assert [op for op, _ in p.fallbacks] == ["aten::sort"]
    assert p["aten::sort"].category == "cpu_fallback" and p["aten::sort"].source
    x @ x
    window = facts.current().placement().since(p)
    assert list(window) == ["aten::mm"] and window["aten::mm"].calls == 1 and window["aten::mm"].device_ms > 0
