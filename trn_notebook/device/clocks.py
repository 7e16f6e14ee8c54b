"""The three clocks of the simulator, never mixed, and the bounded event timeline.

* **wall** — real seconds the simulator spent here (``time.perf_counter``);
* **sim-host** — modeled host time of a real Trn host driving the device (dispatch, waiting at syncs);
* **sim-device** — modeled device time; the device runs as a queue that starts a kernel at
  ``max(device_free_at, host_now)``.

Events (op, graph, transfer, sync) land in a bounded timeline usable as Chrome/Perfetto trace JSON.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import locks as _locks
from .. import state as _state
from .trace.events import Event, moved_bytes
from .trace.lanes import BY_KEY, thread_names

TIMELINE_CAPACITY = 20_000

Observer = Callable[[str, str, float, float, float, Any], None]
"""``fn(kind, name, start_s, duration_s, sim_host_s, detail)``: called for every event while set."""


class EventRing:
    """A bounded timeline of :class:`~.events.Event` s without per-event objects.

    A deque of tuples would keep up to 20,000 GC-tracked tuples alive and make the garbage
    collector's full passes cost ~4 µs per op; names and kinds are shared strings and the times go
    into preallocated float arrays, so recording allocates nothing the collector tracks.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.kinds: list[str | None] = [None] * capacity
        self.names: list[str | None] = [None] * capacity
        self.starts = array("d", bytes(8 * capacity))
        self.durations = array("d", bytes(8 * capacity))
        self.hosts = array("d", bytes(8 * capacity))
        self.nbytes = array("q", bytes(8 * capacity))
        self.count = 0

    def append(self, kind: str, name: str, start: float, duration: float, host: float, nbytes: int = 0) -> None:
        """Record one event, overwriting the oldest when full."""
        i = self.count % self.capacity
        self.kinds[i] = kind
        self.names[i] = name
        self.starts[i] = start
        self.durations[i] = duration
        self.hosts[i] = host
        self.nbytes[i] = nbytes
        self.count += 1

    def __len__(self) -> int:
        return min(self.count, self.capacity)

    def snapshot(self, since_s: float = 0.0) -> list[Event]:
        """The retained events, oldest first (``since_s``: only those ending at or after it; no source lines:
        the placement log has each op's)."""
        n = len(self)
        first = self.count - n
        out = []
        for k in range(first, self.count):
            i = k % self.capacity
            ev = Event(self.kinds[i], self.names[i], self.starts[i], self.durations[i], self.hosts[i], self.nbytes[i])  # type: ignore[arg-type]
            if not since_s or ev.start_s + ev.duration_s >= since_s:
                out.append(ev)
        return out


@dataclass
class ClockState:
    """Modeled host and device clocks plus event counters (one per process, guarded by a lock)."""

    sim_host_s: float = 0.0
    device_free_at_s: float = 0.0
    comm_free_at_s: float = 0.0  # the collectives' queue (a second stream), see :meth:`Clocks.collective`
    device_busy_s: float = 0.0
    wall_s: float = 0.0
    sync_points: int = 0
    launches: int = 0
    fused_groups: int = 0
    in_group: int = 0  # ops in the current adaptive-fusion group (0 = no open group)
    events: EventRing = field(default_factory=lambda: EventRing(TIMELINE_CAPACITY))
    sync_log: deque[tuple[str, str, float]] = field(default_factory=lambda: deque(maxlen=2_000))


@dataclass(frozen=True)
class ClockSnapshot:
    """The clocks at one moment (seconds and counts: ``snap.launches``)."""

    wall_s: float = 0.0
    sim_host_s: float = 0.0
    sim_device_s: float = 0.0
    device_free_at_s: float = 0.0
    sync_points: int = 0
    launches: int = 0
    fused_groups: int = 0

    def since(self, before: ClockSnapshot) -> ClockSnapshot:
        """Every figure minus ``before``'s (a window)."""
        return ClockSnapshot(*(getattr(self, k) - getattr(before, k) for k in _CLOCK_KEYS))


_CLOCK_KEYS = tuple(f.name for f in dataclasses.fields(ClockSnapshot))


CLOCK_LANES = tuple(BY_KEY[k] for k in ("host", "op", "graph", "sync", "comm"))  # the kinds the clocks record


class Clocks:
    """Owner of the clock state: advance on launches, transfers and sync points."""

    def __init__(self) -> None:
        self.lock = _locks.ACCOUNTING
        self._st = ClockState()
        self._observer: Observer | None = None
        # eager records not yet folded and their fold (set by .eager_records; every reader drains first)
        self.pending: list[Any] = []
        self.drain: Callable[[], None] = _no_drain

    @property
    def state(self) -> ClockState:
        """The clock state, with every pending eager record folded in."""
        if self.pending:
            self.drain()
        return self._st

    @state.setter
    def state(self, value: ClockState) -> None:
        if self.pending:
            self.drain()
        self._st = value

    @property
    def observer(self) -> Observer | None:
        """Called for every event while set (only while a profiler records: trn_notebook.profiling)."""
        return self._observer

    @observer.setter
    def observer(self, fn: Observer | None) -> None:
        if self.pending:
            self.drain()  # records made before the profiler started are not its events
        self._observer = fn

    def launch(
        self,
        name: str,
        device_s: float,
        host_s: float,
        wall_s: float,
        kind: str = "op",
        detail: Any = None,
        fused: bool = False,
        fold_pending: bool = True,
    ) -> None:
        """Charge one device launch: host dispatch, then the kernel on the device queue.

        ``fused=True``: the op joined an open fusion group, so it runs without a launch of its own.
        ``fold_pending=False``: the pending eager records are not folded first (the fold itself calls so).
        """
        if fold_pending and self.pending:
            self.drain()
        st = self._st
        with self.lock:
            st.sim_host_s += host_s
            start = st.device_free_at_s if st.device_free_at_s > st.sim_host_s else st.sim_host_s
            st.device_free_at_s = start + device_s
            st.device_busy_s += device_s
            st.wall_s += wall_s
            if not fused:
                st.launches += 1
            st.events.append(kind, name, start, device_s, st.sim_host_s)
            if self._observer is not None:
                self._observer(kind, name, start, device_s, st.sim_host_s, detail)

    def host_work(self, name: str, host_s: float, wall_s: float, detail: Any = None) -> None:
        """Charge host-only time (a CPU fallback's compute or a transfer the host waits for)."""
        st = self.state
        with self.lock:
            st.events.append("host", name, st.sim_host_s, host_s, st.sim_host_s + host_s, moved_bytes(detail))
            if self._observer is not None:
                self._observer("host", name, st.sim_host_s, host_s, st.sim_host_s + host_s, detail)
            st.sim_host_s += host_s
            st.wall_s += wall_s

    def collective(self, name: str, device_s: float, wall_s: float, *, blocking: bool) -> float:
        """Queue a collective on the communication queue after the compute queued so far; returns its start.

        ``blocking`` (a synchronous collective) makes the compute queue wait for its end; an async one
        overlaps later compute until the next sync point.
        """
        st = self.state
        with self.lock:
            start = max(st.comm_free_at_s, st.device_free_at_s, st.sim_host_s)
            st.comm_free_at_s = start + device_s
            st.wall_s += wall_s
            st.events.append("comm", name, start, device_s, st.sim_host_s)
            if blocking and st.device_free_at_s < st.comm_free_at_s:
                st.device_free_at_s = st.comm_free_at_s
            if self._observer is not None:
                self._observer("comm", name, start, device_s, st.sim_host_s, {"blocking": blocking})
            return start

    def wait_until(self, t_s: float) -> None:
        """The compute queue starts nothing before modeled time ``t_s`` (a stream waiting on an event)."""
        with self.lock:
            if self.state.device_free_at_s < t_s:
                self.state.device_free_at_s = t_s

    def sync(self, reason: str, where: str = "") -> float:
        """Make the host wait for the device and communication queues; returns the modeled wait in seconds."""
        st = self.state
        with self.lock:
            if st.device_free_at_s < st.comm_free_at_s:
                st.device_free_at_s = st.comm_free_at_s
            wait = st.device_free_at_s - st.sim_host_s
            if wait < 0:
                wait = 0.0
            st.sim_host_s += wait
            st.sync_points += 1
            st.in_group = 0
            st.sync_log.append((reason, where, st.sim_host_s))
            st.events.append("sync", reason, st.sim_host_s, 0.0, st.sim_host_s)
            if self._observer is not None:
                self._observer("sync", reason, st.sim_host_s - wait, wait, st.sim_host_s, where)
            return wait

    def snapshot(self) -> ClockSnapshot:
        """The clocks now (seconds and counts)."""
        st = self.state
        with self.lock:
            return ClockSnapshot(
                st.wall_s,
                st.sim_host_s,
                st.device_busy_s,
                st.device_free_at_s,
                st.sync_points,
                st.launches,
                st.fused_groups,
            )

    def sync_events(self) -> list[tuple[str, str, float]]:
        """The recent sync points as ``(reason, source, sim_host_s)``."""
        with self.lock:
            return list(self.state.sync_log)

    def chrome_trace(self, since_s: float = 0.0) -> dict[str, Any]:
        """The timeline as Chrome/Perfetto trace JSON (``traceEvents``; µs; pid 0), each event on the lane of
        its kind (:data:`~.trace.lanes.LANES`: eager ops, compiled graphs, host, collectives, syncs), the lanes
        named by ``thread_name`` metadata.

        ``since_s``: only events ending at or after that modeled time.
        """
        with self.lock:
            events = self.state.events.snapshot(since_s)
        trace: list[dict[str, Any]] = thread_names(0, CLOCK_LANES)
        for ev in events:
            tid = ev.lane.tid
            if ev.kind == "sync":
                trace.append(
                    {"name": f"sync: {ev.name}", "ph": "i", "ts": ev.start_s * 1e6, "pid": 0, "tid": tid, "s": "t"}
                )
            else:
                args = {"modeled_host_us": ev.host_s * 1e6} | ({"bytes": ev.nbytes} if ev.nbytes else {})
                trace.append({"name": ev.name, "cat": ev.kind, "ph": "X", "ts": ev.start_s * 1e6,
                              "dur": ev.duration_s * 1e6, "pid": 0, "tid": tid, "args": args})  # fmt: skip
        return {"traceEvents": trace, "displayTimeUnit": "ms"}

    def reset(self) -> None:
        """Zero every clock and counter and drop the timeline (pending eager records are folded first, so
        the placement log keeps them)."""
        with self.lock:
            self.state = ClockState()


def _no_drain() -> None:
    """The fold before :mod:`.eager.records` installs its own (nothing is pending then)."""


clocks = Clocks()
_state.register("clocks", clocks)
