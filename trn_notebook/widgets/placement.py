"""PlacementView: the placement log as a sortable, filterable table coloured by category.

Reads the live backend's placement (``facts.current().placement()``: the simulator's placement log, or
TorchNeuron's executed/fallback ops with costs "not measured"), or a given window (a per-cell ``diff_snapshots``). The
"modeled ms" column is the placement log's modeled time: device kernel time for device ops; for a
CPU fallback, both host<->device copies plus the modeled host compute (a roofline on the host CPU) — so
the totals row can say how much of the modeled time went to fallbacks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

import traitlets

from .. import facts
from ..display import fallback
from ..display.format import WALL_MS, fmt_bytes, fmt_ms, fmt_share
from ..facts.base import NOT_MEASURED, Placement, shown
from ..facts.simulator import placement_of
from ._base import TrnWidget, esm

if TYPE_CHECKING:
    from ..device.placement import PlacementEntry

SORT_KEYS = ("op", "category", "calls", "host_ms", "modeled_ms", "bytes", "source")
MAX_ROWS = 500  # rows sent to the view; the totals always cover every op


class PlacementRow(TypedDict):
    """One op of the table, as the view receives it ("not measured" for figures the backend lacks)."""

    op: str
    category: str
    calls: int | str
    host_ms: float | str
    modeled_ms: float | str
    bytes: int | str
    source: str
    text: dict[str, str]  # the figures as shown (calls, host_ms, modeled_ms, bytes), formatted once (figure_texts)


def ms_text(value: Any) -> str:
    """A milliseconds column's cell (``fmt_ms``: three decimals), or the backend's word for a missing figure."""
    return fmt_ms(value / 1e3) if isinstance(value, int | float) else str(value)


def bytes_text(value: Any) -> str:
    """A bytes column's cell (``fmt_bytes``), or the backend's word for a missing figure."""
    return fmt_bytes(value) if isinstance(value, int | float) else str(value)


def figure_texts(calls: Any, host_ms: Any, modeled_ms: Any, moved: Any) -> dict[str, str]:
    """The strings the view shows for a row's (or the totals') figures, keyed by column."""
    return {
        "calls": str(calls),
        "host_ms": ms_text(host_ms),
        "modeled_ms": ms_text(modeled_ms),
        "bytes": bytes_text(moved),
    }


def rows_of(placement: Placement) -> list[PlacementRow]:
    """Table rows of a placement (unsorted); op names without the ``aten::`` prefix."""
    return [
        PlacementRow(
            op=op.removeprefix("aten::"),
            category=r.category,
            calls=shown(r.calls),
            host_ms=shown(r.host_ms),
            modeled_ms=shown(r.device_ms),
            bytes=shown(r.bytes_moved),
            source=str(shown(r.source)),
            text=figure_texts(shown(r.calls), shown(r.host_ms), shown(r.device_ms), shown(r.bytes_moved)),
        )
        for op, r in placement.items()
    ]


def totals_of(placement: Placement) -> dict[str, Any]:
    """Totals of a placement (its aggregations): calls, wall ms, modeled ms, fallback ms and share, bytes."""
    share = placement.fallback_share
    host, modeled, moved = shown(placement.host_ms), shown(placement.device_ms), shown(placement.bytes_moved)
    return {
        "ops": len(placement),
        "calls": placement.total_calls,
        "host_ms": shown(placement.host_ms),
        "modeled_ms": shown(placement.device_ms),
        "fallback_ms": shown(placement.fallback_ms),
        "fallback_pct": NOT_MEASURED if share is None else 100.0 * share,
        "bytes": shown(placement.bytes_moved),
        "calls_by_category": {k: v for k, v in placement.calls_by_category.items() if v},
        "text": {**figure_texts(placement.total_calls, host, modeled, moved), "ops": f"{len(placement)} ops"},
    }


def share_text(placement: Placement) -> str:
    """The fallback share of modeled time (``fmt_share``), or "not measured"."""
    share = placement.fallback_share
    return NOT_MEASURED if share is None else fmt_share(share)


def _sort_key(value: Any) -> Any:
    return (0, value) if isinstance(value, int | float) else (1, str(value))


class PlacementView(TrnWidget):
    """Where each ATen op ran and what it cost: a sortable table, filter and colour by category.

    Reads the live backend's placement (``facts.current().placement()``; on hardware the cost columns say
    "not measured"). ``window`` is a placement-log snapshot or a difference of two (``diff_snapshots``), or a
    :class:`~trn_notebook.facts.base.Placement`, for a per-cell view; ``None`` shows the whole session and
    :meth:`refresh` re-reads it.
    """

    _esm = esm("placement.js")

    rows = traitlets.List().tag(sync=True)
    totals = traitlets.Dict().tag(sync=True)
    categories = traitlets.List().tag(sync=True)
    scope = traitlets.Unicode("session").tag(sync=True)
    sort_by = traitlets.Unicode("modeled_ms").tag(sync=True)
    sort_desc = traitlets.Bool(True).tag(sync=True)
    category_filter = traitlets.Unicode("").tag(sync=True)
    hidden_rows = traitlets.Int(0).tag(sync=True)
    measured = traitlets.Bool(True).tag(sync=True)  # False: costs are "not measured" (hardware)
    backend = traitlets.Unicode("").tag(sync=True)

    def __init__(self, window: Mapping[str, PlacementEntry] | Placement | None = None, **kwargs: Any) -> None:
        if window is None or isinstance(window, Placement):
            self._window = window
        else:
            self._window = placement_of(window)
        self._placement = Placement()
        self._all: list[PlacementRow] = []
        super().__init__(scope="session" if window is None else "cell", **kwargs)
        self.refresh()

    def refresh(self) -> None:
        """Re-read the placement (or keep the fixed window) and rebuild rows and totals."""
        backend = facts.current()
        self._placement = backend.placement() if self._window is None else self._window
        self._all = rows_of(self._placement)
        self.backend = backend.name
        self.measured = self._placement.measured
        self.categories = sorted({r["category"] for r in self._all})
        self._update_rows()

    def source_version(self) -> Any:
        """The backend's placement version (a fixed window never changes; None: unknown, refresh)."""
        return "window" if self._window is not None else facts.current().placement_version()

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
        rows.sort(key=lambda r: (_sort_key(r[key]), r["op"]), reverse=self.sort_desc)  # type: ignore[literal-required]
        return rows

    def _summary(self) -> str:
        if not self._placement.measured:
            return f"{len(self._placement.fallback_ops)} ops fell back to the CPU; their cost is not measured"
        return f"{share_text(self._placement)} of modeled time spent in CPU fallbacks"

    def _update_rows(self) -> None:
        rows = self.sorted_rows()
        totals = totals_of(self._placement.only(self.category_filter))  # the totals row covers what is shown
        totals["summary"] = (
            self._summary()
            + (" (copies both ways + modeled host compute)" if self._placement.measured else "")
            + (f"; showing {self.category_filter} only" if self.category_filter else "")
        )
        self.totals = totals
        self.hidden_rows = max(len(rows) - MAX_ROWS, 0)
        self.rows = rows[:MAX_ROWS]

    def fallback_html(self) -> str:
        """The table (sorted by modeled time) and the totals, escaped, for saved notebooks."""
        rows = sorted(self._all, key=lambda r: (_sort_key(r["modeled_ms"]), r["op"]), reverse=True)
        t = totals_of(self._placement)
        shown_rows = rows[:MAX_ROWS]
        body = fallback.table(
            ["op", "category", "calls", WALL_MS, "modeled ms", "bytes moved", "source"],
            [
                [
                    r["op"],
                    r["category"],
                    r["calls"],
                    r["text"]["host_ms"],
                    r["text"]["modeled_ms"],
                    r["text"]["bytes"],
                    r["source"],
                ]
                for r in shown_rows
            ],
            row_styles=[
                f"color:{fallback.CATEGORY_COLOURS.get(r['category'], fallback.OTHER_COLOUR)}" for r in shown_rows
            ],
        )
        more = f"<p>… {len(rows) - len(shown_rows)} more ops</p>" if len(rows) > len(shown_rows) else ""
        moved = t["text"]["bytes"]
        summary = (
            f"<p><b>{fallback.esc(self._summary())}</b> ({t['ops']} ops, {t['calls']} calls, "
            f"{fallback.esc(t['text']['modeled_ms'])} ms modeled, {fallback.esc(moved)} moved; {fallback.esc(self.backend)})</p>"
        )
        return fallback.section(f"Op placement ({self.scope})", body + more + summary)

    def fallback_text(self) -> str:
        """A few lines: totals, fallback share and the top ops."""
        t = totals_of(self._placement)
        lines = [f"Op placement ({self.scope}): {t['ops']} ops, {t['calls']} calls, {self._summary()}"]
        rows = sorted(self._all, key=lambda r: (_sort_key(r["modeled_ms"]), r["op"]), reverse=True)
        for r in rows[:10]:
            lines.append(
                f"  {r['op']:<28} {r['category']:<13} {r['calls']!s:>7} calls {r['text']['modeled_ms']:>10} ms"
            )
        return "\n".join(lines)
