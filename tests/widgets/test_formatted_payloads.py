"""Each widget's payload carries the figures as strings from the one formatter (``trn_notebook.display.format``)
beside the numbers its drawing uses, so the page reads exactly what Python writes (issue 29 item 6)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import trn_notebook
from trn_notebook.device.memory.runtime import allocator
from trn_notebook.display.format import fmt_bytes, fmt_duration, fmt_ms, fmt_ratio, fmt_s, fmt_share
from trn_notebook.widgets import CacheView, MemoryView, PlacementView, ShapeTuner
from trn_notebook.widgets.memory_snapshot import MemorySnapshotWidget
from trn_notebook.widgets.timeline import TimelineWidget, detail_rows


def test_placement_rows_and_totals_carry_python_formatted_figures(ops: dict[str, Any]) -> None:
    view = PlacementView()
    assert view.rows
    for r in view.rows:
        assert r["text"]["modeled_ms"] == fmt_ms(r["modeled_ms"] / 1e3)
        assert r["text"]["host_ms"] == fmt_ms(r["host_ms"] / 1e3)
        assert r["text"]["bytes"] == fmt_bytes(r["bytes"])
        assert r["text"]["calls"] == str(r["calls"])
    t = view.totals
    assert t["text"]["modeled_ms"] == fmt_ms(t["modeled_ms"] / 1e3)
    assert t["text"]["bytes"] == fmt_bytes(t["bytes"]) and t["text"]["ops"] == f"{t['ops']} ops"
    assert t["summary"].startswith(fmt_share(t["fallback_pct"] / 100) + " of modeled time")
    sort = next(r for r in view.rows if r["op"] == "sort")
    assert sort["bytes"] > 1024 and sort["text"]["bytes"].endswith("KiB")  # binary units, two decimals


def test_memory_counters_phases_ticks_and_ooms_are_formatted_in_python(fresh_device: None) -> None:
    keep = torch.empty(3 << 20, dtype=torch.uint8, device="neuron")
    with trn_notebook.phase("fmt-test"):
        more = torch.empty(1 << 20, dtype=torch.uint8, device="neuron")
    view = MemoryView()
    c, text = view.counters, view.counter_text
    assert text["allocated"] == fmt_bytes(c["allocated"]) and c["allocated"] >= keep.nbytes + more.nbytes
    assert text["peak_reserved"] == fmt_bytes(c["peak_reserved"]) and text["capacity"] == fmt_bytes(c["capacity"])
    assert "num_ooms" not in text  # a count, not bytes
    assert view.phase_text["fmt-test"]["allocated"] == fmt_bytes(view.phase_peaks["fmt-test"]["allocated"])
    top = max(p[3] for p in view.timeline)
    top = max(top, c["capacity"]) if c["capacity"] <= 4 * top else top
    assert view.axis["y"] == [[0.0, fmt_bytes(0)], [top / 2, fmt_bytes(top / 2)], [top, fmt_bytes(top)]]
    t0, t1 = view.timeline[0][0], view.timeline[-1][0]
    assert [x[:2] for x in view.axis["x"]] == [[t0, fmt_s(t0)], [(t0 + t1) / 2, fmt_s((t0 + t1) / 2)], [t1, fmt_s(t1)]]
    capacity = allocator.capacity
    trn_notebook.set_memory_capacity(c["reserved"] + (8 << 20))
    try:
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(64 << 20, dtype=torch.uint8, device="neuron")
    finally:
        trn_notebook.set_memory_capacity(capacity)
    oom_t = allocator.snapshot().oom_events[-1][0]
    view.poll()  # the live path: the chart's axis now ends at the OOM, labelled by Python
    assert view.axis["x"][-1] == [oom_t, fmt_s(oom_t), "end"]
    view.refresh()
    t, asked, _phase, asked_text, t_text = view.ooms[-1]
    assert (t, asked) == (oom_t, 64 << 20) and asked_text == fmt_bytes(asked) == "64.00 MiB" and t_text == fmt_s(t)


def test_memory_snapshot_texts_describe_the_lists_beside_them(fresh_device: None) -> None:
    torch.neuron.memory._record_memory_history(max_entries=1_000, clear_history=True)
    try:
        keep = torch.empty(5 << 20, dtype=torch.uint8, device="neuron")
        snap = torch.neuron.memory._snapshot()
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    view = MemorySnapshotWidget(snap)
    t = view.totals
    assert fmt_bytes(t["allocated"]) in view.summary and fmt_bytes(t["reserved"]) in view.summary
    assert t["allocated"] >= keep.nbytes
    assert [s[0] for s in view.segment_text] == [fmt_bytes(seg[1]) for seg in view.segments]
    assert view.site_text == [fmt_bytes(s[1]) for s in view.sites]
    assert view.owner_text == [[fmt_bytes(r[1]), *map(fmt_bytes, r[3:6])] for r in view.by_owner]
    blocks = view.segments[0][3]
    assert len(view.segment_text[0][1]) == len(blocks)
    assert fmt_bytes(blocks[0][1]) in view.segment_text[0][1][0]


def test_cache_view_stage_and_modeled_texts_are_fmt_s_and_fmt_ms(fresh_compiler: None) -> None:
    model = trn_notebook.compiler.compile(torch.nn.Linear(8, 8).to("neuron"))
    model(torch.ones(4, 8, device="neuron"))
    view = CacheView()
    g = view.graphs[0]
    assert g["stage_us"] and g["stage_text"] == {k: fmt_s(v * 1e-6) for k, v in g["stage_us"].items()}
    assert g["modeled_device_text"] == fmt_ms(g["modeled_device_ms"] / 1e3)
    assert view.totals["warm_text"] == fmt_s(view.totals["warm_s"])


def test_tuner_readout_texts_are_the_python_formatter_of_its_figures() -> None:
    view = ShapeTuner(lengths=[16, 40, 100, 100, 300, 1000])
    r = view.readouts
    assert r["text"]["p50_s"] == fmt_s(r["p50_s"]) and r["text"]["p99_s"] == fmt_s(r["p99_s"])
    assert r["text"]["cold_compile_s"] == fmt_duration(r["cold_compile_s"])  # as the modeled compile is shown
    assert r["text"]["padding_waste_pct"] == fmt_share(r["padding_waste_pct"] / 100)
    assert r["text"]["compute_s"] == fmt_s(r["compute_ms"] / 1e3)
    assert r["neuron_compile_text"].split(" (")[0] == r["text"]["neuron_compile_s"]  # the card's brief form
    # Suggest's price of one compile, as its button shows it: the cold compile over the compiles
    assert r["text"]["compile_per_graph_s"] == fmt_duration(r["cold_compile_s"] / r["compiles"])


def test_timeline_events_window_peak_and_details_are_formatted_in_python(fresh_device: None) -> None:
    x = torch.randn(16, 16).to("neuron")
    with trn_notebook.profile() as result:
        for _ in range(5):
            x = torch.tanh(x @ x)
        x.sum().item()
    view = TimelineWidget(result.trace)
    assert view.events and all(e[5] == fmt_s(e[3] * 1e-6) for e in view.events)
    a, b = view.window
    assert view.window_text == {
        "window": [a, b],
        "start": fmt_s(a * 1e-6),
        "end": fmt_s(b * 1e-6),
        "width": fmt_s((b - a) * 1e-6),
    }
    view.window = [a, a + (b - a) / 4]  # a zoom from the front end: Python labels the new window
    assert view.window_text["window"] == [a, a + (b - a) / 4] and view.window_text["width"] == fmt_s((b - a) / 4 * 1e-6)
    if view.memory:
        peak = max(1.0, *(max(p[1], p[2]) for p in view.memory))
        assert view.memory_peak == [peak, fmt_bytes(peak)]
    d = view.detail(int(view.events[-1][0]))
    rows = dict(detail_rows(d))
    assert rows["duration_us"] == fmt_s(d["duration_us"] * 1e-6) and rows["start_us"] == fmt_s(d["start_us"] * 1e-6)
    assert rows["name"] == d["name"]


def test_numerics_axis_and_threshold_labels_are_fmt_ratio() -> None:
    from trn_notebook.widgets.numerics import Y_TICKS, NumericsView

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    result = trn_notebook.compare_numerics(model, torch.randn(2, 8))
    view = NumericsView(result)
    assert view.ticks == [[v, fmt_ratio(v)] for v in Y_TICKS]
    assert view.threshold_text == fmt_ratio(view.threshold) and view.threshold_text
    rows = result.rows
    assert [p[4] for p in view.points] == [fmt_ratio(r.ratio_linf) for r in rows]


def test_plan_rows_carry_memory_and_step_texts(fresh_device: None) -> None:
    from trn_notebook.fidelity.configs import LLAMA_8B
    from trn_notebook.planner import Workload

    cfg = LLAMA_8B.config()
    cfg.num_hidden_layers, cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size = 1, 512, 512, 1024
    cfg.num_attention_heads, cfg.num_key_value_heads = 16, 2
    view = trn_notebook.plan(cfg, Workload(batch=1, seq=32), layouts="tp4").widget()
    r = view.rows[0]
    assert r["memory_text"] == f"{fmt_bytes(r['peak'])} / {fmt_bytes(view.capacity)} ({r['phase']})"
    assert r["time_text"] == f"{fmt_s(r['step_s'])} step, {fmt_s(r['exposed_s'])} exposed comm"
