"""Recording the simulator's events while ``torch.profiler`` runs, and attaching them to the profile.

The device's clocks call :meth:`Recorder.observe` for every op, graph, transfer, host-side fallback
and sync point while a profile is recording (the observer is unset otherwise, so an unprofiled
program pays nothing). Each record keeps the wall time (``perf_counter_ns``, the clock Kineto's
timestamps are converted from), the thread, the modeled start/duration, the modeled host time, HBM
counters and the user's source frame. The profile object (``torch.autograd.profiler.profile``) gets
the finished :class:`Session` as ``_trn_session`` when it stops; :mod:`.merge` turns it into lanes of
the exported trace, and :mod:`.adapter` hooks these steps into torch's profiler.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .. import locks as _locks
from .. import state as _state
from ..device.clocks import clocks
from ..device.memory.runtime import allocator, state
from ..device.source_lines import SourceLine, source_line, user_frame
from ..device.trace.events import Event, moved_bytes

MAX_EVENTS = 1_000_000
"""Records kept per profile; beyond this the oldest are dropped, a warning and the trace say how many."""


class EventsDroppedWarning(UserWarning):
    """A profile recorded more simulator events than :data:`MAX_EVENTS`; the earliest were dropped."""


_perf_ns = time.perf_counter_ns
_native_id = threading.get_native_id
_getframe = sys._getframe


@dataclass
class Session:
    """The simulator's events of one profiling window, with what is needed to place them in time."""

    records: list[Record] = field(default_factory=list)
    wall_offset_ns: int = 0  # add to perf_counter_ns to get Unix ns (Kineto's time base)
    start_perf_ns: int = 0
    stop_perf_ns: int = 0
    model_start_s: float = 0.0  # modeled host clock when recording started
    dropped: int = 0
    chip: str = ""
    frames: dict[tuple[str, int], SourceLine] = field(default_factory=dict)  # (file, line) -> its line, named once
    # (perf_ns start, measured s, graph, cache, modeled Neuron compile s or None)
    compiles: list[tuple[int, float, str, str, float | None]] = field(default_factory=list)
    raised: str = ""  # set when the profiled code raised: the trace is partial


class Record(NamedTuple):
    """One recorded simulator event: the timeline's :class:`~trn_notebook.device.trace.events.Event` (with its user
    source line) plus what places it among torch's own events: the wall time, the OS thread, the clock's
    detail (a compiled graph's executable, a transfer's byte counts) and the HBM counters after it."""

    event: Event
    wall_ns: int  # perf_counter_ns when it was recorded
    thread: int  # OS thread id
    detail: Any
    allocated: int
    reserved: int


class Recorder:
    """Collects events of the active profiling session (one at a time; nested profiles share it)."""

    def __init__(self) -> None:
        self.lock = _locks.make("profiler", "profiler session")
        self.session: Session | None = None
        self.depth = 0

    def start(self) -> Session:
        """Open (or join) the recording session and install the clock observer."""
        with self.lock:
            self.depth += 1
            if self.session is None:
                a = time.time_ns()
                b = _perf_ns()
                c = time.time_ns()
                self.session = Session(
                    wall_offset_ns=(a + c) // 2 - b,
                    start_perf_ns=b,
                    model_start_s=clocks.state.sim_host_s,
                    chip=getattr(state.chip, "name", ""),
                )
                clocks.observer = self.observe
            return self.session

    def stop(self) -> Session | None:
        """Leave the session; the last one out removes the observer and returns the finished session."""
        with self.lock:
            if self.depth == 0:
                return None
            self.depth -= 1
            session = self.session
            if self.depth > 0 or session is None:
                return session
            clocks.observer = None
            self.session = None
        session.stop_perf_ns = _perf_ns()
        _add_compiles(session)
        if session.dropped:
            kept = len(session.records)
            warnings.warn(
                f"the profile kept the last {kept:,} of {kept + session.dropped:,} simulator events (at most "
                f"{MAX_EVENTS:,} are held); the trace's lanes start later than its CPU events. Profile fewer steps, "
                "or record a window with torch.profiler.schedule(wait=..., active=...)",
                EventsDroppedWarning,
                stacklevel=3,
            )
        return session

    def snapshot(self) -> int:
        """Events held by the open session (0 when not recording)."""
        with self.lock:
            return len(self.session.records) if self.session is not None else 0

    def reset(self) -> None:
        """Drop the open session's events so far (recording, if on, continues from now)."""
        with self.lock:
            if self.session is not None:
                self.session.records.clear()
                self.session.compiles.clear()
                self.session.dropped = 0

    def observe(self, kind: str, name: str, start: float, dur: float, host: float, detail: Any) -> None:
        """Clock observer: one record per simulator event (called with the clocks' lock held)."""
        session = self.session
        if session is None:
            return
        records = session.records
        if len(records) >= MAX_EVENTS:
            cut = max(1, MAX_EVENTS // 10)
            del records[:cut]
            session.dropped += cut
        counters = allocator.counters
        event = Event(kind, name, start, dur, host, moved_bytes(detail), _user_line(session.frames))
        records.append(Record(event, _perf_ns(), _native_id(), detail, counters.allocated, counters.reserved))


def _user_line(frames: dict[tuple[str, int], SourceLine]) -> SourceLine | None:
    """The innermost user frame's source line; looked up once per distinct ``(filename, line)``."""
    key = user_frame(_getframe(2))
    if key is None:
        return None
    src = frames.get(key)
    if src is None:
        src = frames[key] = source_line(*key, code=True)
    return src


def _add_compiles(session: Session) -> None:
    """Graphs compiled inside the window (from the compile log, if the compiler was used)."""
    log = sys.modules.get("trn_notebook.compiler.compile_log")
    if log is None:
        return
    from ..compiler.compile_time import record_compile_s

    start_unix = (session.start_perf_ns + session.wall_offset_ns) / 1e9
    stop_unix = (_perf_ns() + session.wall_offset_ns) / 1e9
    for rec in log.compile_log.snapshot():
        stages = rec.stage_us
        # the record is stamped after capture and AOT tracing: its compile started that much earlier
        ts = rec.timestamp - (stages.get("capture", 0.0) + stages.get("aot", 0.0)) / 1e6
        if start_unix <= ts <= stop_unix:
            t_perf = int(ts * 1e9) - session.wall_offset_ns
            session.compiles.append((t_perf, rec.compile_s, rec.graph_name, rec.cache_result, record_compile_s(rec)))


recorder = Recorder()
_state.register("profiler_recorder", recorder)
