"""The timeline's lanes are declared once (``device/trace/lanes.py``) and matched by thread id, never by label."""

from __future__ import annotations

import copy

import pytest
import torch

import trn_notebook
from trn_notebook.device.clocks import clocks
from trn_notebook.device.trace.lanes import BY_KEY, LANES, lane
from trn_notebook.profiling.merge import PID
from trn_notebook.profiling.summary import summarize


def test_the_clock_trace_puts_each_kind_on_its_declared_lane_and_names_it():
    clocks.reset()
    x = torch.ones(8, device="neuron")
    (x * 2).sum().item()  # an eager op, a sync
    trace = clocks.chrome_trace()["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in trace if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert names == {BY_KEY[k].tid: BY_KEY[k].label for k in ("host", "op", "graph", "sync", "comm")}
    kinds = {(e.get("cat", "sync"), e["tid"]) for e in trace if e.get("ph") != "M"}
    assert ("op", BY_KEY["op"].tid) in kinds and ("sync", BY_KEY["sync"].tid) in kinds
    assert all(BY_KEY[cat].tid == tid for cat, tid in kinds)


def test_a_summary_reads_lanes_by_id_whatever_their_labels_say():
    x = torch.randn(64, 64).to("neuron")
    with trn_notebook.profile() as result:
        (x @ x).sum().item()
    relabelled = copy.deepcopy(result.trace)
    for e in relabelled["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == PID:
            e["args"]["name"] = f"lane {e['tid']}"  # a viewer's or a translator's labels
    before, after = summarize(result.trace), summarize(relabelled)
    assert before.busy_ms > 0 and after.busy_ms == pytest.approx(before.busy_ms)
    assert after.idle_ms == pytest.approx(before.idle_ms)
    assert list(after.syncs.reason) == list(before.syncs.reason)


def test_lane_ids_are_unique_and_an_unknown_lane_is_named():
    assert len({ln.tid for ln in LANES}) == len(LANES) == len({ln.key for ln in LANES})
    with pytest.raises(KeyError, match="no timeline lane 'gpu'.*host"):
        lane("gpu")
