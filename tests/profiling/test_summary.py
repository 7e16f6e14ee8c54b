"""The "why is it slow" summary, trn_notebook.profile(), saved traces and bad input."""

from __future__ import annotations

import gzip
import json

import pytest
import torch

import trn_notebook
from trn_notebook.device.trace.lanes import BY_KEY
from trn_notebook.profiling import NeuronConfig, NoDeviceActivity, ProfileMode, TraceFormatError, why_slow
from trn_notebook.profiling.merge import PID

pytestmark = pytest.mark.usefixtures("fresh_device")


def _loop(x, w, item: bool):
    total = 0.0
    for _ in range(4):
        y = torch.tanh(x @ w) @ w
        s = y.sum()
        if item:
            total += s.item()  # SYNC_LINE
    return total


def _profiled(item: bool, tmp_path=None):
    x = torch.randn(256, 256).to("neuron")
    w = torch.randn(256, 256).to("neuron")
    save = None if tmp_path is None else tmp_path / "t.json"
    with trn_notebook.profile(save=save) as result:
        _loop(x, w, item)
    return result


def test_item_in_loop_is_named_with_its_line_and_removing_it_shrinks_sync_idle(tmp_path):
    with_item = _profiled(True, tmp_path).summary()
    row = with_item.syncs[with_item.syncs.reason == ".item()"].iloc[0]
    assert row["count"] == 4 and "s.item()" in row["code"] and row["host_wait_ms"] > 0
    assert any(".item()" in f and "SYNC_LINE" in f for f in with_item.findings)
    without = _profiled(False).summary()
    assert ".item()" not in set(without.syncs.reason)
    assert without.idle_ms["after_sync"] < with_item.idle_ms["after_sync"]
    assert without.window_ms < with_item.window_ms  # the host no longer waits 4 times
    # the saved file gives the same summary (works on a trace of an earlier run)
    again = why_slow(tmp_path / "t.json")
    assert again.busy_ms == pytest.approx(with_item.busy_ms) and again.idle_ms == pytest.approx(with_item.idle_ms)
    assert again.top_lines.iloc[0].device_ms > 0 and "x @ w" in again.top_lines.iloc[0].code


def test_busy_and_idle_add_up_to_the_window():
    s = _profiled(True).summary()
    assert s.busy_ms + s.idle_total_ms == pytest.approx(s.window_ms, rel=1e-6)
    assert s.busy_ms > 0


def test_fallback_found_with_copy_cost():
    x = torch.randn(64, 64).to("neuron")
    with trn_notebook.profile() as result:
        q = torch.linalg.qr(x)[0]
        (q @ x).sum()
    s = result.summary()
    row = s.fallbacks.iloc[0]
    assert row.op == "aten::linalg_qr" and row.copy_ms > 0 and row.bytes >= 2 * 64 * 64 * 4
    assert s.idle_ms["fallback"] > 0


def test_raising_block_keeps_partial_trace_and_says_so():
    x = torch.randn(16, 16).to("neuron")
    with pytest.raises(ZeroDivisionError), trn_notebook.profile() as result:
        (x @ x).sum()
        1 / 0  # noqa: B018
    assert result.partial and "ZeroDivisionError" in result.error
    s = result.summary()
    assert s.partial and s.findings[0].startswith("PARTIAL") and s.busy_ms > 0


def test_no_device_activity_says_what_to_do():
    with trn_notebook.profile() as result:
        torch.ones(4).sum()
    with pytest.raises(NoDeviceActivity, match=r"to\('neuron'\)"):
        result.summary()


def test_corrupt_and_foreign_traces_get_clear_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TraceFormatError, match="not a readable JSON trace"):
        why_slow(bad)
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "k", "ts": 0, "dur": 1, "pid": 0, "tid": 0}]}))
    with pytest.raises(TraceFormatError, match="not recorded on the neuron device"):
        why_slow(foreign)
    notrace = tmp_path / "list.json"
    notrace.write_text("[1, 2]")
    with pytest.raises(TraceFormatError, match="not a Chrome trace"):
        why_slow(notrace)
    gz = tmp_path / "x.json.gz"
    gz.write_bytes(gzip.compress(b"garbage"))
    with pytest.raises(TraceFormatError):
        why_slow(gz)
    with pytest.raises(FileNotFoundError):
        why_slow(tmp_path / "missing.json")


def test_neuron_config_modes_select_lanes():
    x = torch.randn(16, 16).to("neuron")
    with trn_notebook.profile(config=NeuronConfig(modes=(ProfileMode.DEVICE,))) as result:
        (x @ x).sum().item()
    tids = {e.get("tid") for e in result.trace["traceEvents"] if e.get("pid") == PID and e["ph"] != "M"}
    assert BY_KEY["op"].tid in tids and BY_KEY["sync"].tid not in tids
    assert not any(e["ph"] == "C" for e in result.trace["traceEvents"] if e.get("pid") == PID)
    with pytest.raises(TypeError, match="ProfileMode"):
        NeuronConfig(modes=("device",))  # type: ignore[arg-type]


def test_a_compile_inside_the_window_carries_the_modeled_neuron_compile_beside_its_wall_time(tmp_path, fresh_compiler):
    # Issue 26: every place a compile appears shows the modeled Neuron compile beside our measured one. A cache of
    # its own (fresh_compiler): the same graph cached by an earlier test of this worker made it a hit, no compile.
    from trn_notebook.compiler.compile_log import compile_log
    from trn_notebook.compiler.compile_time import record_compile_s

    fn = torch.compile(lambda a: torch.tanh(a @ a) + 1, backend="neuron")
    x = torch.randn(16, 16).to("neuron")
    with trn_notebook.profile(save=tmp_path / "c.json") as result:
        fn(x)
    record = compile_log.snapshot()[-1]
    modeled = record_compile_s(record)
    assert modeled is not None and modeled > 0
    s = why_slow(tmp_path / "c.json")
    row = s.compiles.iloc[-1]
    assert row.graph == record.graph_name and row.modeled_neuron_compile_s == pytest.approx(modeled)
    line = next(f for f in result.summary().findings if f.startswith("Compile: "))
    assert "measured (simulator)" in line and "modeled Neuron compile" in line and "n/a" not in line
