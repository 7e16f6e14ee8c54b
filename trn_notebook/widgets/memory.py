"""MemoryView: device memory counters (current and peak), per-phase peaks and a live timeline.

Everything comes from the live backend's memory snapshot (``facts.current().memory_snapshot()``, a
:class:`~trn_notebook.device.allocator.MemorySnapshot`: counters, capacity, phase peaks, timeline and OOM
events; on hardware from ``torch.neuron.memory_stats()``, with no phases, timeline or OOMs — the view says
so). A live view runs one daemon thread
that wakes every ``interval_s`` (200 ms), and when the allocator has new timeline samples sends only
those (plus the counters) to the front end, so the chart moves while a cell runs. After each cell a
full :meth:`MemoryView.refresh` puts the whole timeline into the synced state for saved notebooks.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import weakref
from typing import Any, Literal, TypedDict

import traitlets

from .. import facts
from .. import locks as _locks
from ..device.memory.allocator import MemoryCounters, MemorySnapshot
from ..display import fallback
from ..display.format import fmt_bytes, fmt_s
from ..session.events import CellFinished, cell_finished
from ._base import TrnWidget, esm

Point = list[Any]  # [t_s, allocated, active, reserved, phase]
Oom = list[Any]  # [t_s, asked bytes, phase, asked text, time text]: the texts formatted here (display.format)
_COUNTER_FIELDS = dataclasses.fields(MemoryCounters)
MAX_STATE_POINTS = 1_200  # timeline points kept in the synced state (and saved notebooks); live points append


class PointsMessage(TypedDict):
    """New timeline samples (and the counters) for a live view."""

    type: Literal["points"]
    points: list[Point]
    ooms: list[Oom]


def downsample(points: list[Point], limit: int) -> list[Point]:
    """At most ``limit`` points: from each run of consecutive samples, the one with the most allocated
    bytes (peaks survive), plus the newest sample."""
    if len(points) <= limit:
        return points
    k = -(-len(points) // (limit - 1))
    out = [max(points[i : i + k], key=lambda p: p[1]) for i in range(0, len(points) - 1, k)]
    out.append(points[-1])
    return out


def read_counters(snapshot: MemorySnapshot | None = None) -> dict[str, int]:
    """The counters and capacity of ``snapshot`` (default: the live backend's memory snapshot)."""
    snap = facts.current().memory_snapshot() if snapshot is None else snapshot
    counters = {f.name: int(getattr(snap.counters, f.name)) for f in _COUNTER_FIELDS}
    counters["capacity"] = int(snap.capacity)
    return counters


def counter_texts(counters: dict[str, int]) -> dict[str, str]:
    """Each byte counter (and the capacity) as the view shows it (``fmt_bytes``); the OOM and retry counts are not bytes."""
    return {k: fmt_bytes(v) for k, v in counters.items() if not k.startswith("num_")}


def oom_row(event: Any) -> Oom:
    """An OOM event ``(t_s, asked, phase)`` with its figures formatted for the view."""
    t, asked, phase = event[0], event[1], event[2]
    return [t, asked, phase, fmt_bytes(asked), fmt_s(t)]


def chart_axis(scale: tuple[float, float, float], capacity: int) -> dict[str, list[list[Any]]]:
    """The timeline chart's ticks, formatted here: ``y`` of ``[bytes, text]`` at 0, half and the top (the highest
    reserved sample, or the capacity when it is on the scale: at most 4x that), ``x`` of ``[t_s, text, anchor]``
    at the first sample, the middle and the last sample or OOM. ``scale`` is ``(t0, t1, highest reserved)``."""
    t0, t1, top = scale
    if not math.isfinite(t0):
        return {"y": [], "x": []}
    top = max(top, 1.0)
    if 0 < capacity <= 4 * top:
        top = max(top, float(capacity))
    y = [[top * f, fmt_bytes(top * f)] for f in (0.0, 0.5, 1.0)]
    x = [[t0 + (t1 - t0) * f, fmt_s(t0 + (t1 - t0) * f), a] for f, a in ((0.0, "start"), (0.5, "middle"), (1.0, "end"))]
    return {"y": y, "x": x}


def _extend(scale: tuple[float, float, float], points: list[Point], ooms: list[Oom]) -> tuple[float, float, float]:
    """``scale`` (t0, t1, highest reserved) grown by new samples and OOM events (what the front end holds)."""
    t0, t1, top = scale
    if points and not math.isfinite(t0):
        t0 = points[0][0]
    for p in points:
        t1, top = max(t1, p[0]), max(top, p[3])
    for o in ooms:
        t1 = max(t1, o[0])
    return t0, t1, top


HARDWARE_NOTE = (
    "timeline, peaks by phase and OOM marks: n/a (simulator-only); counters from torch.neuron.memory_stats()"
)
MIN_INTERVAL_S = 0.05
MAX_INTERVAL_S = 60.0


class MemoryView(TrnWidget):
    """Allocated / active / reserved bytes, current and peak, per-phase peaks, timeline with capacity and OOMs.

    ``live=True`` starts a daemon thread sampling the allocator at most every ``interval_s`` seconds
    while the view is open; :meth:`close` (or ``live = False``) stops it.
    """

    _esm = esm("memory.js")

    counters = traitlets.Dict().tag(sync=True)
    counter_text = traitlets.Dict().tag(sync=True)  # the byte counters formatted once (display.format)
    phase_peaks = traitlets.Dict().tag(sync=True)
    phase_text = traitlets.Dict().tag(sync=True)  # phase -> counter -> formatted bytes
    axis = traitlets.Dict().tag(sync=True)  # the chart's ticks, formatted (chart_axis)
    timeline = traitlets.List().tag(sync=True)
    ooms = traitlets.List().tag(sync=True)
    live = traitlets.Bool(False).tag(sync=True)
    backend = traitlets.Unicode("").tag(sync=True)
    simulated = traitlets.Bool(True).tag(sync=True)  # False: no phases, timeline or OOM events (hardware)
    interval_s = traitlets.Float(0.2).tag(sync=True)

    @traitlets.validate("interval_s")
    def _valid_interval(self, proposal: dict[str, Any]) -> float:
        value = proposal["value"]
        if not math.isfinite(value) or not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
            raise traitlets.TraitError(
                f"interval_s must be a number of seconds from {MIN_INTERVAL_S} to {MAX_INTERVAL_S}, got {value}"
            )
        return float(value)

    def __init__(self, live: bool = False, **kwargs: Any) -> None:
        self._last_t = float("-inf")
        self._last_oom_t = float("-inf")
        self._scale = (float("inf"), float("-inf"), 0.0)
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._hook: Any = None
        self._sync = _locks.make("widget", "memory widget refresh")
        super().__init__(**kwargs)
        self.refresh()
        self.live = live

    # -- reading the allocator -----------------------------------------------------------------
    def refresh(self) -> None:
        """Re-read every counter, the phase peaks, the whole timeline and the OOM events."""
        with self._sync:  # the live thread and a refresh never interleave
            backend = facts.current()
            snap = backend.memory_snapshot()
            timeline = downsample([list(p) for p in snap.timeline], MAX_STATE_POINTS)
            ooms: list[Oom] = [oom_row(o) for o in snap.oom_events]
            self._last_t = timeline[-1][0] if timeline else float("-inf")
            self._last_oom_t = ooms[-1][0] if ooms else float("-inf")
            self.backend = backend.name
            self.simulated = backend.is_simulator
            self._set_counters(read_counters(snap))
            self._set_phases({name: dict(p) for name, p in snap.phase_peaks.items()})
            self._scale = _extend((float("inf"), float("-inf"), 0.0), timeline, ooms)
            self.axis = chart_axis(self._scale, self.counters["capacity"])
            self.timeline = timeline
            self.ooms = ooms

    def _set_counters(self, counters: dict[str, int]) -> None:
        self.counters = counters
        self.counter_text = counter_texts(counters)

    def _set_phases(self, peaks: dict[str, dict[str, int]]) -> None:
        self.phase_peaks = peaks
        self.phase_text = {name: {k: fmt_bytes(v) for k, v in p.items()} for name, p in peaks.items()}

    def source_version(self) -> Any:
        """The backend's memory version (allocations, frees, OOMs, capacity, newest sample, phases; None: unknown)."""
        return facts.current().memory_version()

    def poll(self) -> list[Point]:
        """Send the timeline samples newer than the last ones sent (and fresh counters); return them."""
        backend = facts.current()
        version = backend.memory_version()
        if version is not None and version == getattr(self, "_polled", None):
            return []  # nothing new: the common case between allocations costs no lock and no message
        self._polled = version
        with self._sync:
            snap = backend.memory_snapshot()
            points: list[Point] = [list(p) for p in snap.timeline if p[0] > self._last_t]
            ooms: list[Oom] = [oom_row(o) for o in snap.oom_events if o[0] > self._last_oom_t]
            if not points and not ooms:
                return []
            if points:
                self._last_t = points[-1][0]
            if ooms:
                self._last_oom_t = ooms[-1][0]
            self._set_counters(read_counters(snap))
            peaks = {name: dict(p) for name, p in snap.phase_peaks.items()}
            if peaks != self.phase_peaks:
                self._set_phases(peaks)
            self._scale = _extend(self._scale, points, ooms)
            self.axis = chart_axis(self._scale, self.counters["capacity"])
            self.send(PointsMessage(type="points", points=points, ooms=ooms))
            return points

    # -- live sampling -------------------------------------------------------------------------
    @traitlets.observe("live")
    def _live_changed(self, change: dict[str, Any]) -> None:
        if change["new"]:
            self._start()
        else:
            self._stop_thread()

    def _start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        stop = threading.Event()
        ref = weakref.ref(self)

        def run() -> None:
            while not stop.wait(_interval_of(ref)):
                view = ref()
                if view is None or view.comm is None:
                    return
                view.guarded("live update", view.poll)
                del view

        self._stop = stop
        self._thread = threading.Thread(target=run, name="trn-memory-view", daemon=True)
        self._thread.start()
        if self._hook is None:
            self._hook = cell_finished.subscribe(self.on_cell_finished)

    def on_cell_finished(self, event: CellFinished) -> None:
        """Subscriber of the cell-finished event: redraw if the allocator moved."""
        self.refresh_if_changed()

    def _stop_thread(self) -> None:
        if self._stop is not None:
            self._stop.set()
        self._stop = None
        self._thread = None
        if self._hook is not None:
            self._hook()  # unsubscribe from the cell-finished event
        self._hook = None

    @property
    def sampling(self) -> bool:
        """Whether the live sampling thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def close(self) -> None:
        """Stop live sampling and close the widget."""
        self._stop_thread()
        super().close()

    # -- fallbacks ------------------------------------------------------------------------------
    def fallback_html(self) -> str:
        """Counters, per-phase peaks and a static timeline chart with capacity line and OOM marks."""
        c = self.counters
        cards = fallback.table(
            ["", "current", "peak"],
            [
                [k, fallback.fmt_bytes(c.get(k, 0)), fallback.fmt_bytes(c.get(f"peak_{k}", 0))]
                for k in ("allocated", "active", "reserved")
            ],
        )
        extra = (
            f"<p>capacity {fallback.esc(fallback.fmt_bytes(c.get('capacity', 0)))}; "
            f"{int(c.get('num_ooms', 0))} OOMs, {int(c.get('num_alloc_retries', 0))} allocation retries</p>"
        )
        phases = fallback.table(
            ["phase", "peak allocated", "peak active", "peak reserved"],
            [
                [
                    name,
                    fallback.fmt_bytes(p.get("allocated", 0)),
                    fallback.fmt_bytes(p.get("active", 0)),
                    fallback.fmt_bytes(p.get("reserved", 0)),
                ]
                for name, p in self.phase_peaks.items()
            ],
        )
        tl = downsample(self.timeline, 400)  # a static picture: 400 points are plenty
        top = max([p[3] for p in tl] + [1])
        hlines = [("#c62828", c["capacity"])] if c.get("capacity", 0) <= 4 * top else []
        chart = fallback.polyline_svg(
            [
                ("#1565c0", [(p[0], p[1]) for p in tl]),
                ("#2e7d32", [(p[0], p[2]) for p in tl]),
                ("#8e24aa", [(p[0], p[3]) for p in tl]),
            ],
            hlines=hlines,
            vmarks=[o[0] for o in self.ooms],
        )
        legend = "<p>blue: allocated, green: active, purple: reserved, red: capacity / OOM</p>" if chart else ""
        if not self.simulated:
            legend += f"<p>{fallback.esc(HARDWARE_NOTE)} ({fallback.esc(self.backend)})</p>"
        return fallback.section("Device memory", cards + extra + phases + chart + legend)

    def fallback_text(self) -> str:
        """Current and peak counters, capacity and OOMs on a few lines."""
        c = self.counters
        lines = [
            "Device memory: "
            + ", ".join(
                f"{k} {fallback.fmt_bytes(c.get(k, 0))} (peak {fallback.fmt_bytes(c.get(f'peak_{k}', 0))})"
                for k in ("allocated", "active", "reserved")
            ),
            f"  capacity {fallback.fmt_bytes(c.get('capacity', 0))}, {int(c.get('num_ooms', 0))} OOMs",
        ]
        for name, p in self.phase_peaks.items():
            lines.append(f"  phase {name}: peak allocated {fallback.fmt_bytes(p.get('allocated', 0))}")
        if not self.simulated:
            lines.append(f"  {HARDWARE_NOTE} ({self.backend})")
        return "\n".join(lines)


def _interval_of(ref: weakref.ref[MemoryView]) -> float:
    """The sampling interval of the referenced view (0.2 s once it is gone)."""
    view = ref()
    value = 0.2 if view is None else float(view.interval_s)
    return min(max(value, MIN_INTERVAL_S), MAX_INTERVAL_S) if math.isfinite(value) else 0.2
