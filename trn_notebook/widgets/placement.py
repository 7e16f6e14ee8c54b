"""PlacementView: the placement log as a sortable, filterable table coloured by category.

Reads ``placement_log.snapshot()`` (or a given window, e.g. a per-cell ``diff_snapshots``). The
"modeled ms" column is the placement log's modeled time: device kernel time for device ops; for a
CPU fallback, both host<->device copies plus the modeled host compute (a roofline on the host CPU) — so
the totals row can say how much of the modeled time went to fallbacks.
"""

from __future__ import annotations

from typing import Any, TypedDict

import traitlets

from ..device.placement import CALLS, CATEGORY, D2H, DEVICE_S, H2D, HOST_S, SOURCE, placement_log
from . import _html
from ._base import STATIC, TrnWidget

Snapshot = dict[str, tuple[Any, ...]]
SORT_KEYS = ("op", "category", "calls", "host_ms", "modeled_ms", "bytes", "source")
MAX_ROWS = 500  # rows sent to the view; the totals always cover every op


class PlacementRow(TypedDict):
    """One op of the table, as the view receives it."""

    op: str
    category: str
    calls: int
    host_ms: float
    modeled_ms: float
    bytes: int
    source: str


def modeled_seconds(entry: tuple[Any, ...]) -> float:
    """Modeled time of one placement-log entry (for a fallback the device already charges copies + host compute)."""
    return float(entry[DEVICE_S])


def rows_of(snapshot: Snapshot) -> list[PlacementRow]:
    """Table rows of a snapshot (unsorted)."""
    return [
        PlacementRow(
            op=str(name),
            category=str(e[CATEGORY]),
            calls=int(e[CALLS]),
            host_ms=float(e[HOST_S]) * 1e3,
            modeled_ms=modeled_seconds(e) * 1e3,
            bytes=int(e[H2D]) + int(e[D2H]),
            source=str(e[SOURCE]),
        )
        for name, e in snapshot.items()
    ]


def totals_of(rows: list[PlacementRow]) -> dict[str, Any]:
    """Totals over ``rows``: calls, host ms, modeled ms, fallback ms and share, bytes, per-category calls."""
    modeled = sum(r["modeled_ms"] for r in rows)
    fallback = sum(r["modeled_ms"] for r in rows if r["category"] == "cpu_fallback")
    by_category: dict[str, int] = {}
    for r in rows:
        by_category[r["category"]] = by_category.get(r["category"], 0) + r["calls"]
    return {
        "ops": len(rows),
        "calls": sum(r["calls"] for r in rows),
        "host_ms": sum(r["host_ms"] for r in rows),
        "modeled_ms": modeled,
        "fallback_ms": fallback,
        "fallback_pct": 100.0 * fallback / modeled if modeled > 0 else 0.0,
        "bytes": sum(r["bytes"] for r in rows),
        "calls_by_category": by_category,
    }


class PlacementView(TrnWidget):
    """Where each ATen op ran and what it cost: a sortable table, filter and colour by category.

    ``window`` is a placement-log snapshot or a difference of two (``diff_snapshots``) for a
    per-cell view; ``None`` shows the whole session and :meth:`refresh` re-reads the log.
    """

    _esm = STATIC / "placement.js"

    rows = traitlets.List().tag(sync=True)
    totals = traitlets.Dict().tag(sync=True)
    categories = traitlets.List().tag(sync=True)
    scope = traitlets.Unicode("session").tag(sync=True)
    sort_by = traitlets.Unicode("modeled_ms").tag(sync=True)
    sort_desc = traitlets.Bool(True).tag(sync=True)
    category_filter = traitlets.Unicode("").tag(sync=True)
    hidden_rows = traitlets.Int(0).tag(sync=True)

    def __init__(self, window: Snapshot | None = None, **kwargs: Any) -> None:
        self._window = None if window is None else dict(window)
        self._all: list[PlacementRow] = []
        super().__init__(scope="session" if window is None else "cell", **kwargs)
        self.refresh()

    def refresh(self) -> None:
        """Re-read the placement log (or keep the fixed window) and rebuild rows and totals."""
        snap = placement_log.snapshot() if self._window is None else self._window
        self._all = rows_of(snap)
        self.categories = sorted({r["category"] for r in self._all})
        self._update_rows()

    def source_version(self) -> Any:
        """The placement log's version (a fixed window never changes)."""
        return "window" if self._window is not None else placement_log.version

    @traitlets.observe("sort_by", "sort_desc", "category_filter")
    def _view_changed(self, change: dict[str, Any]) -> None:
        if change["name"] == "sort_by" and change["new"] not in SORT_KEYS:
            self.report_error(f"cannot sort by {change['new']!r}; valid: {', '.join(SORT_KEYS)}")
            self.sort_by = change["old"] if change["old"] in SORT_KEYS else "modeled_ms"
            return
        self._update_rows()

    def sorted_rows(self) -> list[PlacementRow]:
        """Every row after the category filter, in the current sort order."""
        rows = [r for r in self._all if not self.category_filter or r["category"] == self.category_filter]
        key = self.sort_by if self.sort_by in SORT_KEYS else "modeled_ms"
        rows.sort(key=lambda r: (r[key], r["op"]), reverse=self.sort_desc)  # type: ignore[literal-required]
        return rows

    def _update_rows(self) -> None:
        rows = self.sorted_rows()
        totals = totals_of(rows)  # the totals row covers what the filter shows
        share = totals_of(self._all)["fallback_pct"]
        totals["summary"] = (
            f"{share:.1f}% of modeled time spent in CPU fallbacks (copies both ways + modeled host compute)"
            + (f"; showing {self.category_filter} only" if self.category_filter else "")
        )
        self.totals = totals
        self.hidden_rows = max(len(rows) - MAX_ROWS, 0)
        self.rows = rows[:MAX_ROWS]

    def fallback_html(self) -> str:
        """The table (sorted by modeled time) and the totals, escaped, for saved notebooks."""
        rows = sorted(self._all, key=lambda r: (-r["modeled_ms"], r["op"]))
        t = totals_of(self._all)
        shown = rows[:MAX_ROWS]
        body = _html.table(
            ["op", "category", "calls", "host ms", "modeled ms", "bytes moved", "source"],
            [
                [
                    r["op"],
                    r["category"],
                    r["calls"],
                    f"{r['host_ms']:.3f}",
                    f"{r['modeled_ms']:.3f}",
                    _html.fmt_bytes(r["bytes"]),
                    r["source"],
                ]
                for r in shown
            ],
            row_styles=[f"color:{_html.CATEGORY_COLOURS.get(r['category'], _html.OTHER_COLOUR)}" for r in shown],
        )
        more = f"<p>… {len(rows) - len(shown)} more ops</p>" if len(rows) > len(shown) else ""
        summary = (
            f"<p><b>{t.get('fallback_pct', 0.0):.1f}% of modeled time spent in CPU fallbacks</b> "
            f"({t.get('ops', 0)} ops, {t.get('calls', 0)} calls, {t.get('modeled_ms', 0.0):.3f} ms modeled, "
            f"{_html.fmt_bytes(t.get('bytes', 0))} moved)</p>"
        )
        return _html.section(f"Op placement ({self.scope})", body + more + summary)

    def fallback_text(self) -> str:
        """A few lines: totals, fallback share and the top ops."""
        t = totals_of(self._all)
        lines = [
            f"Op placement ({self.scope}): {t.get('ops', 0)} ops, {t.get('calls', 0)} calls, "
            f"{t.get('fallback_pct', 0.0):.1f}% of modeled time spent in CPU fallbacks",
        ]
        for r in sorted(self._all, key=lambda r: (-r["modeled_ms"], r["op"]))[:10]:
            lines.append(f"  {r['op']:<28} {r['category']:<13} {r['calls']:>7} calls {r['modeled_ms']:>10.3f} ms")
        return "\n".join(lines)
