"""Widgets without a browser: state after construction and updates, front-end messages, escaping, fallbacks."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

import trn_notebook
from trn_notebook.device.placement import diff_snapshots, placement_log
from trn_notebook.device.runtime import allocator
from trn_notebook.widgets import MemoryView, PlacementView

HOSTILE = "<script>alert('x')</script>"


def front_end_custom(widget: Any, content: dict[str, Any]) -> None:
    """Play the front end sending a custom message."""
    widget._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def front_end_update(widget: Any, state: dict[str, Any]) -> None:
    """Play the front end changing synced state."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state}}, "buffers": []})


def assert_no_raw_markup(html: str, needle: str = HOSTILE) -> None:
    assert needle not in html
    assert "<script" not in html.lower()


@pytest.fixture
def ops() -> dict[str, tuple[Any, ...]]:
    """A fresh placement log with matmuls (native) and sorts (CPU fallback)."""
    placement_log.reset()
    x = torch.randn(32, 32, device="neuron")
    for _ in range(3):
        y = (x @ x).relu()
    torch.sort(y, dim=1)
    return placement_log.snapshot()


# -- PlacementView -----------------------------------------------------------------------------


def test_placement_rows_and_totals_match_the_placement_log(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    by_op = {r["op"]: r for r in view.rows}
    assert set(by_op) == set(ops)
    assert by_op["mm"]["calls"] == 3 and by_op["mm"]["category"] == "native"
    assert by_op["sort"]["category"] == "cpu_fallback"
    assert by_op["mm"]["modeled_ms"] == pytest.approx(ops["mm"][3] * 1e3)
    assert view.totals["calls"] == sum(e[1] for e in ops.values())
    assert view.totals["calls_by_category"]["cpu_fallback"] == sum(e[1] for e in ops.values() if e[0] == "cpu_fallback")
    fallback = sum(r["modeled_ms"] for r in view.rows if r["category"] == "cpu_fallback")
    assert view.totals["fallback_pct"] == pytest.approx(100 * fallback / view.totals["modeled_ms"])
    assert 0 < view.totals["fallback_pct"] < 100
    assert view.scope == "session"
    assert view.categories == sorted({e[0] for e in ops.values()})


def test_placement_fallback_row_charges_copies_and_host_compute(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    sort = next(r for r in view.rows if r["op"] == "sort")
    assert sort["bytes"] == ops["sort"][4] + ops["sort"][5] > 0
    assert sort["modeled_ms"] > sort["host_ms"]  # host compute plus both copies


def test_placement_default_sort_is_by_modeled_time_descending(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    times = [r["modeled_ms"] for r in view.rows]
    assert times == sorted(times, reverse=True)


def test_placement_sort_and_filter_from_the_front_end(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    front_end_update(view, {"sort_by": "calls", "sort_desc": False})
    calls = [r["calls"] for r in view.rows]
    assert calls == sorted(calls)
    front_end_update(view, {"category_filter": "cpu_fallback"})
    assert {r["category"] for r in view.rows} == {"cpu_fallback"}
    assert "sort" in {r["op"] for r in view.rows}
    # The totals still cover every op, whatever the filter.
    assert view.totals["calls"] == sum(e[1] for e in ops.values())


def test_placement_bad_sort_key_is_reported_as_data(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    front_end_update(view, {"sort_by": "nope"})
    assert "cannot sort by 'nope'" in view.error
    assert view.sort_by == "modeled_ms"


def test_placement_refresh_rereads_the_log(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    before = next(r["calls"] for r in view.rows if r["op"] == "mm")
    x = torch.randn(8, 8, device="neuron")
    x @ x
    assert next(r["calls"] for r in view.rows if r["op"] == "mm") == before
    front_end_custom(view, {"type": "refresh"})
    assert next(r["calls"] for r in view.rows if r["op"] == "mm") == before + 1


def test_placement_window_shows_only_the_cell(ops: dict[str, tuple[Any, ...]]) -> None:
    before = placement_log.snapshot()
    x = torch.randn(4, 4, device="neuron")
    torch.sort(x)
    window = diff_snapshots(before, placement_log.snapshot())
    view = PlacementView(window=window)
    assert view.scope == "cell"
    assert next(r["calls"] for r in view.rows if r["op"] == "sort") == 1
    assert "mm" not in {r["op"] for r in view.rows}
    view.refresh()  # a window stays fixed
    assert "mm" not in {r["op"] for r in view.rows}


def test_placement_unknown_message_is_reported_not_raised(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    front_end_custom(view, {"type": "explode"})
    assert "unknown message" in view.error


def test_placement_fallback_mimebundle_has_table_and_share(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    data, _ = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    pct = f"{view.totals['fallback_pct']:.1f}% of modeled device time spent in fallbacks"
    assert pct in data["text/html"] and pct in data["text/plain"]
    assert "<td>sort</td>" in data["text/html"] and "<td>cpu_fallback</td>" in data["text/html"]
    assert "sort" in data["text/plain"]


def test_placement_escapes_hostile_op_names_and_source_lines() -> None:
    placement_log.reset()
    trn_notebook.set_op_category("<script>x", "cpu_fallback")
    placement_log.record(HOSTILE, "cpu_fallback", 1e-3, 0.0, h2d=8, d2h=8)
    # A notebook "file" with a hostile name: its source lines carry it.
    code = compile("import torch\ny = torch.ones(3, device='neuron') * 2\n", "<img src=x onerror=alert(1)>", "exec")
    exec(code, {})
    view = PlacementView()
    assert HOSTILE in {r["op"] for r in view.rows}  # the data stays raw; the view uses textContent
    assert any("<img src=x onerror=alert(1)>" in r["source"] for r in view.rows)
    html = view.fallback_html()
    assert_no_raw_markup(html)
    assert "<img" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


# -- MemoryView --------------------------------------------------------------------------------


def test_memory_counters_match_the_allocator() -> None:
    keep = torch.empty(1024, 1024, device="neuron")
    view = MemoryView()
    c = allocator.counters
    assert view.counters["allocated"] == c.allocated >= keep.nbytes
    assert view.counters["peak_reserved"] == c.peak_reserved
    assert view.counters["capacity"] == allocator.capacity
    assert len(view.timeline) == len(allocator.timeline)
    assert view.timeline[-1] == list(allocator.timeline[-1])
    assert view.live is False and not view.sampling


def test_memory_phase_peaks_and_hostile_phase_names_are_escaped() -> None:
    with trn_notebook.phase(HOSTILE):
        t = torch.empty(256, 1024, device="neuron")
    view = MemoryView()
    assert view.phase_peaks[HOSTILE]["allocated"] >= t.nbytes
    html = view.fallback_html()
    assert_no_raw_markup(html)
    assert "&lt;script&gt;" in html
    assert "peak allocated" in html


def test_memory_poll_sends_only_new_samples() -> None:
    view = MemoryView()
    assert view.poll() == []
    last = view.timeline[-1][0] if view.timeline else float("-inf")
    with trn_notebook.phase("poll-test"):  # a phase change forces a sample
        t = torch.empty(2048, 1024, device="neuron")
    points = view.poll()
    assert points and all(p[0] > last for p in points)
    assert points[-1] == list(allocator.timeline[-1])
    assert view.counters["allocated"] == allocator.counters.allocated
    assert view.phase_peaks["poll-test"]["allocated"] >= t.nbytes
    assert view.poll() == []


def test_memory_oom_markers_come_from_the_allocator() -> None:
    view = MemoryView()
    before = len(view.ooms)
    capacity = allocator.capacity
    trn_notebook.set_memory_capacity(allocator.counters.reserved + (64 << 20))
    try:
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(1 << 30, dtype=torch.uint8, device="neuron")
    finally:
        trn_notebook.set_memory_capacity(capacity)
    view.refresh()
    assert len(view.ooms) == before + 1
    assert view.ooms[-1][1] == 1 << 30
    assert view.counters["num_ooms"] == allocator.counters.num_ooms
    assert re.search(r'stroke="#c62828"', view.fallback_html())


def test_memory_live_toggle_from_the_front_end_starts_and_stops_sampling() -> None:
    view = MemoryView()
    front_end_update(view, {"live": True})
    assert view.sampling
    front_end_update(view, {"live": False})
    assert not view.sampling
    view.live = True
    view.close()
    assert not view.sampling


def test_memory_fallback_text_names_current_and_peak() -> None:
    view = MemoryView()
    data, _ = view._repr_mimebundle_()
    assert data["text/plain"].startswith("Device memory: allocated ")
    assert "capacity" in data["text/plain"]
    assert "<svg" in data["text/html"] or not view.timeline
