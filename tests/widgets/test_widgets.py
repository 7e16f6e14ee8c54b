"""Widgets without a browser: state after construction and updates, front-end messages, escaping, fallbacks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

import trn_notebook
from tests.widgets.helpers import HOSTILE, assert_no_raw_markup, front_end_custom, front_end_update
from trn_notebook.device.memory.runtime import allocator
from trn_notebook.device.placement import diff_snapshots, placement_log
from trn_notebook.widgets import CacheView, Dashboard, MemoryView, PlacementView, ShapeTuner
from trn_notebook.widgets._base import STATIC
from trn_notebook.widgets.tuner import as_counts, controls_spec, histogram, spec_controls

# -- the shipped front-end files -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("widget", "filename"),
    [(PlacementView, "placement.js"), (MemoryView, "memory.js"), (CacheView, "cache.js"), (ShapeTuner, "tuner.js")],
)
def test_esm_files_ship_beside_the_module_with_no_network_and_no_innerhtml(widget: type, filename: str) -> None:
    text = (STATIC / "_dom.js").read_text() + "\n" + (STATIC / filename).read_text()
    assert str(widget._esm) == text  # anywidget loads the shared DOM helpers and the widget's file, nothing else
    assert "function el(" not in (STATIC / filename).read_text()  # the helpers are written once, in _dom.js
    assert "export default { render }" in text
    assert not re.search(r"^\s*import\b", text, re.M)  # no imports at all, so no CDN
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text)  # only the SVG namespace
    assert "innerHTML" not in text and "insertAdjacentHTML" not in text


# -- PlacementView -----------------------------------------------------------------------------


def test_placement_rows_and_totals_match_the_placement_log(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    by_op = {r["op"]: r for r in view.rows}
    assert set(by_op) == set(ops)
    assert by_op["mm"]["calls"] == 3 and by_op["mm"]["category"] == "native"
    assert by_op["sort"]["category"] == "cpu_fallback"
    assert by_op["mm"]["modeled_ms"] == pytest.approx(ops["mm"].device_s * 1e3)
    assert view.totals["calls"] == sum(e.calls for e in ops.values())
    assert view.totals["calls_by_category"]["cpu_fallback"] == sum(
        e.calls for e in ops.values() if e.category == "cpu_fallback"
    )
    fallback = sum(r["modeled_ms"] for r in view.rows if r["category"] == "cpu_fallback")
    assert view.totals["fallback_pct"] == pytest.approx(100 * fallback / view.totals["modeled_ms"])
    assert 0 < view.totals["fallback_pct"] < 100
    assert view.scope == "session"
    assert view.categories == sorted({e.category for e in ops.values()})


def test_placement_fallback_row_charges_copies_and_host_compute(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    sort = next(r for r in view.rows if r["op"] == "sort")
    assert sort["bytes"] == ops["sort"].h2d + ops["sort"].d2h > 0
    # the device charges a fallback its copies both ways plus the host compute; the view shows that figure
    from trn_notebook.device.costmodel import transfer_seconds

    assert sort["modeled_ms"] == pytest.approx(ops["sort"].device_s * 1e3)
    assert sort["modeled_ms"] > (transfer_seconds(ops["sort"].h2d) + transfer_seconds(ops["sort"].d2h)) * 1e3


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
    # The totals row covers what the filter shows; the summary keeps the session's fallback share.
    assert view.totals["calls"] == sum(e.calls for e in ops.values() if e.category == "cpu_fallback")
    assert "showing cpu_fallback only" in view.totals["summary"]
    front_end_update(view, {"category_filter": ""})
    assert view.totals["calls"] == sum(e.calls for e in ops.values())


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
    pct = f"{view.totals['fallback_pct']:.1f}% of modeled time spent in CPU fallbacks"
    assert pct in data["text/html"] and pct in data["text/plain"]
    assert "<td>sort</td>" in data["text/html"] and "<td>cpu_fallback</td>" in data["text/html"]
    assert "sort" in data["text/plain"]
    # the host_ms column is this machine's wall time, never read as the modeled host clock (issue 30)
    assert "<th>wall ms (this machine)</th>" in data["text/html"] and "host ms" not in data["text/html"]
    assert '["host_ms", "wall ms (this machine)"]' in (STATIC / "placement.js").read_text()


def test_placement_escapes_hostile_op_names_and_source_lines() -> None:
    placement_log.reset()
    trn_notebook.device.policy.set("<script>x", "cpu_fallback")  # an override only the table shows
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


def test_placement_refresh_after_a_cell_only_when_the_log_moved(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    assert view.refresh_if_changed() is True  # first time: nothing seen yet
    rows = view.rows
    assert view.refresh_if_changed() is False
    assert view.rows is rows
    x = torch.randn(4, 4, device="neuron")
    x @ x
    assert view.refresh_if_changed() is True
    assert next(r["calls"] for r in view.rows if r["op"] == "mm") == ops["mm"].calls + 1


def test_front_end_state_of_the_wrong_type_is_reported_as_data(ops: dict[str, tuple[Any, ...]]) -> None:
    view = PlacementView()
    front_end_update(view, {"category_filter": 5})
    assert "TraitError" in view.error and "category_filter" in view.error
    assert view.category_filter == ""


# -- MemoryView --------------------------------------------------------------------------------


def test_memory_counters_match_the_allocator() -> None:
    keep = torch.empty(1024, 1024, device="neuron")
    view = MemoryView()
    c = allocator.counters
    assert view.counters["allocated"] == c.allocated >= keep.nbytes
    assert view.counters["peak_reserved"] == c.peak_reserved
    assert view.counters["capacity"] == allocator.capacity
    # the synced timeline is the allocator's, downsampled to at most 1,200 points (all of them when fewer)
    if len(allocator.timeline) <= 1_200:
        assert len(view.timeline) == len(allocator.timeline)
    else:
        assert 0 < len(view.timeline) <= 1_200
    assert view.timeline[-1] == list(allocator.timeline[-1])
    assert view.live is False and not view.sampling


def test_memory_timeline_downsampling_keeps_peaks_and_the_newest_sample() -> None:
    from trn_notebook.widgets.memory import downsample

    points = [[i * 0.01, 100 + (i % 50), 0, 200, "p"] for i in range(4_000)]
    points[1234][1] = 10_000  # a spike
    out = downsample(points, 1_200)
    assert len(out) <= 1_200
    assert out[-1] == points[-1]
    assert points[1234] in out
    assert [p[0] for p in out] == sorted(p[0] for p in out)
    assert downsample(points[:10], 1_200) == points[:10]


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


# -- ShapeTuner: the Python side that needs no compiler ------------------------------------------


def test_tuner_counts_from_sequences_arrays_series_and_dicts() -> None:
    import numpy as np
    import pandas as pd

    expected = ([3, 5, 9], [2, 1, 1])
    for given in ([5, 3, 9, 3], np.array([5, 3, 9, 3]), pd.Series([5, 3, 9, 3]), {3: 2, 5: 1, 9: 1, 11: 0}):
        values, counts = as_counts(given)
        assert (values.tolist(), counts.tolist()) == expected
    assert as_counts([3.0, 3.0])[1].tolist() == [2]
    with pytest.raises(ValueError, match=">= 0"):
        as_counts([-1, 4])
    with pytest.raises(ValueError, match="whole numbers"):
        as_counts([1.5])


def test_tuner_histogram_bins_every_sample_on_integer_edges() -> None:
    import numpy as np

    lengths = np.random.default_rng(1).integers(1, 4096, size=100_000)
    h = histogram(*as_counts(lengths))
    assert h["samples"] == 100_000 == sum(h["counts"])
    assert len(h["counts"]) <= 80 and len(h["edges"]) == len(h["counts"]) + 1
    assert h["edges"][0] == h["min"] == int(lengths.min()) and h["edges"][-1] > h["max"] == int(lengths.max())
    widths = {b - a for a, b in zip(h["edges"], h["edges"][1:])}
    assert len(widths) == 1 and all(isinstance(e, int) for e in h["edges"])
    assert histogram(*as_counts([])) == {"edges": [], "counts": [], "samples": 0, "min": 0, "max": 0}


@pytest.mark.parametrize("spec", ["pow2:128-2048", "step:256:256-2048", "list:128,512,2048"])
def test_tuner_controls_round_trip_policy_specs(spec: str) -> None:
    c = spec_controls(spec)
    assert controls_spec(c["kind"], c["min_len"], c["max_len"], c.get("count", 4), c.get("sizes", "")) == spec
    with pytest.raises(ValueError, match="cannot parse bucket policy"):  # BucketPolicy's own grammar
        spec_controls("pow2:abc")


# -- Dashboard ---------------------------------------------------------------------------------


def test_dashboard_holds_the_four_views_and_refreshes_them(ops: dict[str, tuple[Any, ...]]) -> None:
    dash = Dashboard()
    try:
        assert [type(v).__name__ for v in dash.children] == ["PlacementView", "CacheView", "ShapeTuner", "MemoryView"]
        assert dash.titles == ("Placement", "Compile cache", "Shapes", "Memory")
        assert dash.memory.live and dash.memory.sampling
        x = torch.randn(4, 4, device="neuron")
        torch.sort(x)
        before = next(r["calls"] for r in dash.placement.rows if r["op"] == "sort")
        assert "Placement" in dash.refresh_if_changed()
        assert next(r["calls"] for r in dash.placement.rows if r["op"] == "sort") == before + 1
        assert dash.refresh_if_changed() == []  # nothing moved since
        data, _ = dash._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in data
        for title in ("Op placement", "Compile cache", "Shape buckets", "Device memory"):
            assert title in data["text/html"] and title in data["text/plain"]
    finally:
        dash.close()
    assert not dash.memory.sampling


# -- a saved notebook ---------------------------------------------------------------------------


@pytest.mark.slow
def test_executed_notebook_keeps_static_figures_and_widget_state(tmp_path: Any) -> None:
    import nbformat
    from nbclient import NotebookClient

    repo = Path(__file__).resolve().parents[2]
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import torch, trn_notebook\n"
            "from trn_notebook.widgets import Dashboard, PlacementView\n"
            "x = torch.randn(16, 16, device='neuron')\n"
            "s = torch.sort(x @ x, dim=1)"
        ),
        nbformat.v4.new_code_cell("PlacementView()"),
        nbformat.v4.new_code_cell("dash = Dashboard()\ndash"),
        nbformat.v4.new_code_cell("dash.close()"),
    ]
    NotebookClient(nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(repo)}}).execute()
    nbformat.write(nb, tmp_path / "saved.ipynb")
    saved = nbformat.read(tmp_path / "saved.ipynb", as_version=4)
    placement = next(o for o in saved.cells[1].outputs if o.get("output_type") == "execute_result")
    assert "application/vnd.jupyter.widget-view+json" in placement.data
    assert "% of modeled time spent in CPU fallbacks" in placement.data["text/html"]
    assert "<td>sort</td>" in placement.data["text/html"]
    assert "sort" in placement.data["text/plain"]
    dash = next(o for o in saved.cells[2].outputs if o.get("output_type") == "execute_result")
    for title in ("Op placement", "Compile cache", "Shape buckets", "Device memory"):
        assert title in dash.data["text/html"]
    # The widget state is saved with the notebook, so a viewer with the widget manager can redraw it.
    state = saved.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    models = [m["state"] for m in state.values() if m["state"].get("_anywidget_id", "").endswith("PlacementView")]
    assert models and any(r["op"] == "sort" for r in models[0]["rows"])
