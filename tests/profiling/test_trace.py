"""torch.profiler on neuron: the merged trace (lanes, flows, counters, labels) and key_averages columns."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import trn_notebook
from trn_notebook.profiling import load_trace, profile_table, validate_chrome_trace
from trn_notebook.profiling.merge import PID

pytestmark = pytest.mark.usefixtures("fresh_device")


def _step(x, w):
    y = (x @ w).relu().sum()  # LINE_FWD
    y.backward()
    return y.item()  # LINE_ITEM


def _run(tmp_path, activities=(ProfilerActivity.CPU, ProfilerActivity.PrivateUse1)):
    torch.manual_seed(0)
    xc, wc = torch.randn(32, 32), torch.randn(32, 32)
    x = xc.to("neuron")
    w = wc.to("neuron").requires_grad_()
    with profile(activities=list(activities), record_shapes=True, with_stack=True) as prof:
        value = _step(x, w)
        q = torch.linalg.qr(x)[0].cpu()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return prof, json.loads(path.read_text()), value, q, (xc, wc)


def _lanes(trace):
    return {
        e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("pid") == PID and e["name"] == "thread_name"
    }


def _line_of(marker: str) -> int:
    import inspect

    src, start = inspect.getsourcelines(_step)
    return start + next(i for i, line in enumerate(src) if marker in line)


def test_merged_trace_has_modeled_lanes_flows_counters_and_sources(tmp_path):
    _prof, trace, value, q, (xc, wc) = _run(tmp_path)
    # numbers are unchanged by profiling (compared with CPU PyTorch)
    wcc = wc.clone().requires_grad_()
    ref = (xc @ wcc).relu().sum()
    assert value == pytest.approx(ref.item(), rel=1e-5)
    assert torch.allclose(q.abs(), torch.linalg.qr(xc)[0].abs(), atol=1e-4)

    assert validate_chrome_trace(trace) == []
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("ph") == "M" and e["name"] == "process_name"}
    assert "neuron:0 (modeled)" in names
    lanes = _lanes(trace)
    assert {"device: eager ops", "transfers (DMA)", "syncs", "CPU fallbacks", "host (modeled)"} <= set(lanes.values())
    mine = [e for e in trace["traceEvents"] if e.get("pid") == PID and e.get("ph") != "M"]
    by_lane = Counter(lanes.get(e.get("tid"), "counter") for e in mine if e["ph"] == "X")
    assert by_lane["device: eager ops"] >= 6  # mm relu sum fill threshold_backward mm (+ qr's neighbours)
    ops = [e for e in mine if e["ph"] == "X" and lanes[e["tid"]] == "device: eager ops"]
    mm = next(e for e in ops if e["name"] == "aten::mm")
    assert mm["args"]["shapes"] == [[32, 32], [32, 32]]
    assert mm["args"]["source"].endswith(f":{_line_of('LINE_FWD')}")
    assert "relu" in mm["args"]["code"] and mm["args"]["modeled_us"] > 0
    transfers = [e for e in mine if e["ph"] == "X" and lanes[e["tid"]] == "transfers (DMA)"]
    assert any(e["args"]["bytes"] == 32 * 32 * 4 for e in transfers)  # the .cpu() of the Q factor
    syncs = [e for e in mine if e["ph"] == "i"]
    item = next(e for e in syncs if e["args"]["reason"] == ".item()")
    assert item["args"]["source"].endswith(f":{_line_of('LINE_ITEM')}")
    fallbacks = [e for e in mine if e["ph"] == "X" and lanes[e["tid"]] == "CPU fallbacks"]
    assert [e["args"]["op"] for e in fallbacks] == ["aten::linalg_qr"]
    assert fallbacks[0]["args"]["fallback"] and fallbacks[0]["args"]["copy_us"] > 0
    counters = [e for e in mine if e["ph"] == "C"]
    assert counters and all(e["args"]["allocated"] >= 0 for e in counters)
    # every flow starts on a CPU op of the host process and ends on a modeled event
    flows = [e for e in trace["traceEvents"] if e.get("cat") == "neuron_flow"]
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    ends = {e["id"]: e for e in flows if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and len(starts) >= len(ops)
    assert all(e["pid"] != PID for e in starts.values()) and all(e["pid"] == PID for e in ends.values())
    load_trace(trace)  # accepted by the reader


def test_simulator_kernels_are_labelled_not_double_counted(tmp_path):
    prof, trace, *_ = _run(tmp_path, activities=(ProfilerActivity.CPU,))
    cpu_ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
    # forward mm + two backward mms: each appears once as a host op, its CPU kernel is labelled
    assert sum(e["name"] == "aten::mm" for e in cpu_ops) == 2  # (w's grad only: x needs none) fwd + 1 bwd
    sim = [e for e in trace["traceEvents"] if e.get("cat") == "neuron_sim_kernel"]
    assert any(e["name"] == "[neuron sim] aten::mm" for e in sim)
    assert not any(e.get("pid") == PID for e in trace["traceEvents"])  # no device lanes without PrivateUse1
    keys = {a.key: a for a in prof.key_averages()}
    assert keys["aten::mm"].count == 2 and "[neuron sim] aten::mm" in keys


def test_key_averages_and_profile_table_carry_modeled_device_time(tmp_path):
    prof, trace, *_ = _run(tmp_path)
    lanes = _lanes(trace)
    modeled_mm = sum(
        e["dur"] for e in trace["traceEvents"]
        if e.get("pid") == PID and e["ph"] == "X" and lanes[e["tid"]] == "device: eager ops" and e["name"] == "aten::mm"
    )  # fmt: skip
    keys = {a.key: a for a in prof.key_averages()}
    assert keys["aten::mm"].self_device_time_total == pytest.approx(modeled_mm, rel=1e-6)
    assert "NEURON" in prof.key_averages().table(row_limit=5).upper()
    df = profile_table(prof)
    row = df[df.op == "aten::mm"].iloc[0]
    assert row.device_ms == pytest.approx(modeled_mm / 1e3, rel=1e-6) and not row.simulator_kernel
    assert df[df.simulator_kernel].device_ms.sum() == 0


def test_profile_table_rejects_other_objects():
    with pytest.raises(ValueError, match="torch.profiler.profile"):
        profile_table(object())


def test_gz_export_is_merged_too(tmp_path):
    x = torch.ones(8, 8, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        (x * 2).sum().item()
    path = tmp_path / "t.json.gz"
    prof.export_chrome_trace(str(path))
    trace = load_trace(path)
    assert trace["trnNotebook"]["records"] >= 2


def test_profiler_unaffected_when_device_idle(tmp_path):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch.ones(4).sum()
    assert trn_notebook.profiling.session_of(prof) is not None
    assert trn_notebook.device.clocks.observer is None  # the hook is off outside a profile


def test_the_streamed_merge_of_a_file_equals_the_merge_of_the_parsed_trace(tmp_path):
    # The export streams Kineto's file (its events copied as text, issue 57: memory within 1.5x of plain
    # torch.profiler); it must say exactly what merging the parsed trace says.
    from trn_notebook.profiling import adapter
    from trn_notebook.profiling.merge import SIM_KERNEL_CAT, merge_stream, merge_trace

    x = torch.randn(32, 32, device="neuron")
    w = torch.randn(32, 32, device="neuron").requires_grad_()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], record_shapes=True) as prof:
        _step(x, w)
    inner = prof.profiler  # torch.autograd.profiler.profile, which the adapter wraps
    raw = tmp_path / "kineto.json"
    adapter._originals["export_chrome_trace"](inner, str(raw))  # torch's own export: Kineto's file, unmerged
    text, session = raw.read_text(), inner._trn_session
    for lanes in (True, False):
        streamed = json.loads(b"".join(merge_stream(text, session, lanes)))
        assert streamed == merge_trace(json.loads(text), session, lanes)
    merged = json.loads(b"".join(merge_stream(text, session, True)))
    assert validate_chrome_trace(merged) == []
    labelled = [e for e in merged["traceEvents"] if e.get("cat") == SIM_KERNEL_CAT]
    assert labelled and all("trn_note" not in e.get("args", {}) for e in labelled)  # said once, not per event
    assert "do not add it" in merged["trnNotebook"]["categories"][SIM_KERNEL_CAT]


def test_a_recording_past_the_cap_says_what_it_dropped(tmp_path, monkeypatch):
    from trn_notebook.profiling import recorder

    monkeypatch.setattr(recorder, "MAX_EVENTS", 100)
    x = torch.ones(4, device="neuron")
    dropped = pytest.warns(recorder.EventsDroppedWarning, match=r"kept the last \d+ of 30\d simulator events")
    with dropped, profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(300):
            x.add_(1)
    path = tmp_path / "capped.json"
    prof.export_chrome_trace(str(path))
    meta = json.loads(path.read_text())["trnNotebook"]
    assert meta["dropped_records"] + meta["records"] >= 300 and meta["records"] <= 100  # 300 ops and the exit sync
