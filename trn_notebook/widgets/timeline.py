"""TimelineWidget: the ``neuron:0 (modeled)`` lanes of a merged trace, zoomable, linked to source.

Python keeps every event; the front end gets, for the visible window, at most :data:`MAX_EVENTS`
individual events (the longest) plus per-lane occupancy bins (:data:`BINS` per lane) for the rest,
and the HBM counter downsampled to :data:`MAX_POINTS`. Zoom and pan send the new window; clicking
an event asks for its details (op, shapes, category, modeled and wall time, source line and code,
IR nodes of a compiled kernel). Saved notebooks show :meth:`fallback_html`: the slowest events.
"""

from __future__ import annotations

import html
import json
from typing import Any

import numpy as np
import traitlets

from ..device.trace.lanes import LANES
from ..display.format import fmt_bytes, fmt_s
from ..display.views import register_view
from ..profiling.run import ProfileResult
from ..profiling.summary import _modeled_process
from ..profiling.traceio import load_trace
from ._base import TrnWidget, esm
from .memory import downsample

MAX_EVENTS = 3_000
BINS = 400
MAX_POINTS = 1_000
LANE_ORDER = [ln.label for ln in LANES]  # the widget's lane rows, in declaration (tid) order
_ROW = {ln.key: i for i, ln in enumerate(LANES)}
DETAIL_KEYS = ("op", "shapes", "modeled_us", "wall_us", "source", "code", "host_op", "bytes", "reason", "engine",
               "ir_nodes", "sources", "copy_us", "wait_us", "graph", "cache")  # fmt: skip


def us_text(us: float) -> str:
    """Microseconds as the view shows them (``fmt_s``)."""
    return fmt_s(us * 1e-6)


def detail_rows(detail: dict[str, Any]) -> list[list[str]]:
    """The click panel's ``[key, text]`` rows: times (``*_us``) and bytes formatted here, lists and dicts as JSON."""
    rows = []
    for k, v in detail.items():
        if isinstance(v, list | dict):
            text = json.dumps(v, separators=(",", ":"))
        elif isinstance(v, int | float) and not isinstance(v, bool) and k.endswith("_us"):
            text = us_text(v)
        elif isinstance(v, int | float) and not isinstance(v, bool) and k == "bytes":
            text = fmt_bytes(v)
        else:
            text = str(v)
        rows.append([k, text])
    return rows


class TimelineWidget(TrnWidget):
    """Lanes host / device ops / graphs / kernels / transfers / syncs / fallbacks / compile + HBM track."""

    _esm = esm("timeline.js")

    lanes = traitlets.List().tag(sync=True)
    span = traitlets.List([0.0, 1.0]).tag(sync=True)  # whole trace [t0, t1] µs (relative)
    window = traitlets.List([0.0, 1.0]).tag(sync=True)  # visible [a, b] µs
    events = traitlets.List().tag(sync=True)  # [id, lane, ts, dur, name, duration text]
    bins = traitlets.List().tag(sync=True)  # per lane: list of [start, end, busy_fraction, count]
    memory = traitlets.List().tag(sync=True)  # [ts, allocated, reserved]
    memory_peak = traitlets.List([1.0, ""]).tag(sync=True)  # [the HBM track's top in bytes, its label]
    # the window's figures as shown, formatted here for the window they describe (display.format):
    window_text = traitlets.Dict().tag(sync=True)  # {"window": [a, b], "start", "end", "width"}
    total_events = traitlets.Int(0).tag(sync=True)

    def __init__(self, trace: Any, **kwargs: Any) -> None:
        self._load(load_trace(trace))
        super().__init__(**kwargs)
        self.refresh()
        self.observe(self._on_window, names="window")

    def _load(self, trace: dict[str, Any]) -> None:
        pid, lane_keys = _modeled_process(trace["traceEvents"])
        lane_of = {tid: _ROW[key] for tid, key in lane_keys.items()}
        rows, mem = [], []
        for e in trace["traceEvents"]:
            if e.get("pid") != pid:
                continue
            ph = e.get("ph")
            if ph == "X" and e.get("tid") in lane_of:
                rows.append((lane_of[e["tid"]], float(e["ts"]), float(e["dur"]), e))
            elif ph in ("i", "I") and e.get("tid") in lane_of:
                rows.append((lane_of[e["tid"]], float(e["ts"]), 0.0, e))
            elif ph == "C":
                a = e.get("args") or {}
                mem.append((float(e["ts"]), float(a.get("allocated", 0)), float(a.get("reserved", 0))))
        rows.sort(key=lambda r: r[1])
        self._rows = rows
        self._lane = np.array([r[0] for r in rows], dtype=np.int16)
        self._ts = np.array([r[1] for r in rows], dtype=np.float64)
        self._dur = np.array([r[2] for r in rows], dtype=np.float64)
        t0 = float(self._ts.min()) if rows else 0.0
        t1 = float((self._ts + self._dur).max()) if rows else 1.0
        self._t0 = t0
        self._span = [0.0, max(t1 - t0, 1e-3)]
        mem.sort()
        self._mem = [[round(t - t0, 3), a, r] for t, a, r in mem]

    # -- state ------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Full view: lanes, span, window = span, memory track."""
        self.lanes = LANE_ORDER
        self.span = self._span
        self.total_events = len(self._rows)
        self.memory = downsample(self._mem, MAX_POINTS)
        peak = max([1.0] + [max(p[1], p[2]) for p in self.memory])
        self.memory_peak = [peak, fmt_bytes(peak)]
        self.window = list(self._span)
        self._fill(*self._span)

    def _on_window(self, change: dict[str, Any]) -> None:
        self.guarded("window", lambda: self._fill(*change["new"]))

    def _fill(self, a: float, b: float) -> None:
        self.window_text = {
            "window": [a, b],
            "start": us_text(a),
            "end": us_text(b),
            "width": us_text(b - a),
        }
        a, b = float(a) + self._t0, float(b) + self._t0
        if b <= a:
            b = a + 1e-3
        sel = np.nonzero((self._ts <= b) & (self._ts + self._dur >= a))[0]
        if len(sel) > MAX_EVENTS:
            keep = sel[np.argsort(-self._dur[sel], kind="stable")[:MAX_EVENTS]]
            keep.sort()
        else:
            keep = sel
        t0 = self._t0
        self.events = [
            [int(i), int(self._lane[i]), round(float(self._ts[i]) - t0, 3), round(float(self._dur[i]), 3),
             self._rows[i][3].get("name", ""), us_text(float(self._dur[i]))]
            for i in keep
        ]  # fmt: skip
        self.bins = self._bin(sel, a, b)

    def _bin(self, sel: np.ndarray, a: float, b: float) -> list[list[list[float]]]:
        width = (b - a) / BINS
        out: list[list[list[float]]] = []
        for lane in range(len(LANE_ORDER)):
            idx = sel[self._lane[sel] == lane]
            if len(idx) == 0:
                out.append([])
                continue
            start = np.clip(self._ts[idx], a, b)
            end = np.clip(self._ts[idx] + self._dur[idx], a, b)
            k = np.minimum(((start - a) / width).astype(np.int64), BINS - 1)
            busy = np.bincount(k, weights=end - start, minlength=BINS)
            count = np.bincount(k, minlength=BINS)
            out.append(
                [[round(float(a - self._t0 + j * width), 3), round(float(a - self._t0 + (j + 1) * width), 3),
                  round(min(1.0, float(busy[j]) / width), 4), int(count[j])] for j in np.nonzero(count)[0]]
            )  # fmt: skip
        return out

    # -- messages ---------------------------------------------------------------------------------
    def _on_select(self, content: dict[str, Any]) -> None:
        i = int(content.get("id", -1))
        if not 0 <= i < len(self._rows):
            raise ValueError(f"no event {i}")
        detail = self.detail(i)
        self.send({"type": "detail", "id": i, "detail": detail, "rows": detail_rows(detail)})

    def _on_reset(self, content: dict[str, Any]) -> None:
        self.window = list(self._span)

    def detail(self, i: int) -> dict[str, Any]:
        """What the click panel shows for event ``i``: name, lane, category and the event's args."""
        lane, ts, dur, e = self._rows[i]
        args = e.get("args") or {}
        out = {"name": e.get("name", ""), "lane": LANE_ORDER[lane], "category": e.get("cat", ""),
               "start_us": round(ts - self._t0, 3), "duration_us": round(dur, 3)}  # fmt: skip
        out.update({k: args[k] for k in DETAIL_KEYS if k in args})
        return out

    def slowest(self, n: int = 15) -> list[dict[str, Any]]:
        """The ``n`` longest events (device, transfer, fallback, compile, sync waits) with their details."""
        host = _ROW["host"]  # the host lane mirrors waits, fallbacks and copies
        order = np.argsort(-np.where(self._lane == host, -1.0, self._dur), kind="stable")[:n]
        return [self.detail(int(i)) for i in order if self._dur[i] > 0 and self._lane[i] != host]

    def fallback_html(self) -> str:
        """The slowest events with their source lines (for saved notebooks)."""
        rows = "".join(
            f"<tr><td>{html.escape(str(d['name']))}</td><td>{html.escape(d['lane'])}</td>"
            f"<td style='text-align:right'>{us_text(d['duration_us'])}</td>"
            f"<td>{html.escape(str(d.get('source', '')))}</td><td><code>{html.escape(str(d.get('code', '')))}</code></td></tr>"
            for d in self.slowest()
        )
        return (
            f"<div class='trn-widget'><b>Timeline (modeled)</b>: {len(self._rows)} events over "
            f"{us_text(self._span[1])}; slowest events:<table class='trn-table'><tr><th>event</th><th>lane</th>"
            f"<th>duration</th><th>source</th><th>code</th></tr>{rows}</table></div>"
        )

    def fallback_text(self) -> str:
        """The slowest events as text."""
        lines = [f"Timeline (modeled): {len(self._rows)} events over {us_text(self._span[1])}; slowest:"]
        for d in self.slowest():
            lines.append(f"  {us_text(d['duration_us']):>12}  {d['name']}  [{d['lane']}]  {d.get('source', '')}")
        return "\n".join(lines)


register_view(ProfileResult, lambda result: TimelineWidget(result.trace))  # ProfileResult.widget()
