"""One typed event record (``device/trace/events.py``): the clock's ring and the profiler's recorder both hold
:class:`Event` s, with the modeled host time, the bytes moved and (in a profile) the user's source line."""

from __future__ import annotations

import torch

import trn_notebook  # noqa: F401 - registers the device
from trn_notebook.device.clocks import clocks
from trn_notebook.device.trace.events import Event
from trn_notebook.profiling.adapter import session_of
from trn_notebook.profiling.recorder import Record


def test_the_clock_ring_returns_typed_events_with_host_time_and_bytes():
    clocks.reset()
    x = torch.ones(256).to("neuron")  # a host-to-device transfer of 1 KiB
    y = (x * 2).sum()
    y.item()  # a device-to-host transfer and a sync
    events = clocks.state.events.snapshot()
    assert events and all(isinstance(e, Event) for e in events)
    kinds = [e.kind for e in events]
    assert "op" in kinds and "sync" in kinds and "host" in kinds
    assert all(e.lane.key == e.kind for e in events)
    assert sum(e.nbytes for e in events if e.kind == "host") >= 256 * 4  # the upload at least
    ops = [e for e in events if e.kind == "op"]
    assert all(e.host_s > 0 for e in ops)  # issued after its modeled dispatch
    assert [e for e in events if e.end_s >= ops[-1].start_s] == clocks.state.events.snapshot(ops[-1].start_s)
    trace = [e for e in clocks.chrome_trace()["traceEvents"] if e.get("ph") == "X"]
    assert len(trace) == sum(1 for e in events if e.kind != "sync")
    assert all("modeled_host_us" in e["args"] for e in trace)


def test_a_profile_records_events_with_the_users_source_line():
    x = torch.randn(32, 32).to("neuron")
    with torch.profiler.profile() as prof:
        (x @ x).sum().item()  # the line each event names
    session = session_of(prof)
    assert session is not None and session.records
    assert all(isinstance(r, Record) and isinstance(r.event, Event) for r in session.records)
    ops = [r.event for r in session.records if r.event.kind == "op"]
    assert [e.name for e in ops] == ["mm", "sum"]
    assert all(
        e.source is not None and e.source.code.strip() == "(x @ x).sum().item()  # the line each event names"
        for e in ops
    )
    assert len({id(e.source) for e in ops}) == 1  # looked up once per distinct line, then shared
