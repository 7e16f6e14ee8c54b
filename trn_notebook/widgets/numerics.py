"""NumericsView: the per-layer AWS ratio curve of a three-way comparison, its threshold line, and a heat map.

Reads one :class:`trn_notebook.numerics_compare.NumericsComparison` (facts computed once there); clicking a
point selects that module call (trait ``selected``) and the view receives its ``|neuron − FP32|`` heat map.
Ratios are drawn on a log axis clamped to [:data:`Y_MIN`, :data:`Y_MAX`] (0 and inf drawn at the ends,
their labels say which). Every string reaches the page through ``textContent`` or :func:`~trn_notebook.display.fallback.esc`.
"""

from __future__ import annotations

import math
from typing import Any

import traitlets

from ..display import fallback
from ..display.format import fmt_ratio
from ._base import TrnWidget, esm

Y_MIN, Y_MAX = 1e-3, 1e3
Y_TICKS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3)  # the log axis' grid lines, labelled by fmt_ratio


def _y(value: float) -> float:
    if math.isnan(value):
        return Y_MIN
    return min(max(value, Y_MIN), Y_MAX)


class NumericsView(TrnWidget):
    """Per-layer error curve (max of the L-inf and L2 ratios) with the threshold line; click for the heat map."""

    _esm = esm("numerics.js")

    points = traitlets.List().tag(sync=True)  # [index, module, class, y, "ratio L-inf", "ratio L2", passed]
    threshold = traitlets.Float(1.5).tag(sync=True)
    threshold_text = traitlets.Unicode("").tag(sync=True)  # fmt_ratio of the threshold
    ticks = traitlets.List([[v, fmt_ratio(v)] for v in Y_TICKS]).tag(sync=True)  # [ratio, label] of the y axis
    first = traitlets.Int(-1).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    verdict = traitlets.Unicode("").tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    heatmap = traitlets.Dict().tag(sync=True)

    def __init__(self, result: Any, **kwargs: Any) -> None:
        self._result = result
        super().__init__(**kwargs)
        self.observe(self._on_selected, names="selected")
        self.guarded("reading the comparison", self.refresh)

    def refresh(self) -> None:
        """Read the comparison's rows into the curve (and select the first crossing, else the last row)."""
        r = self._result
        rows = r.rows
        with self.hold_sync():
            self.points = [
                [
                    row.index,
                    row.module,
                    row.cls,
                    _y(max(row.ratio_linf, row.ratio_l2)),
                    fmt_ratio(row.ratio_linf),
                    fmt_ratio(row.ratio_l2),
                    not row.crosses(r.threshold),
                ]
                for row in rows
            ]
            self.threshold = r.threshold
            self.threshold_text = fmt_ratio(r.threshold)
            self.first = r.first.index if r.first is not None else -1
            self.title = f"{r.model} under {r.policy.label()}"
            self.verdict = r.verdict()
            self.error = ""
        self.selected = self.first if self.first >= 0 else len(rows) - 1

    def _on_selected(self, change: dict[str, Any]) -> None:
        self.guarded("selecting a module", self.select, change["new"])

    def select(self, index: int) -> None:
        """Show the heat map of module call ``index``; raises ``IndexError`` for an index with no row."""
        rows = self._result.rows
        if not 0 <= index < len(rows):
            if index == -1:
                self.heatmap = {}
                return
            raise IndexError(f"no module call {index}; the comparison has {len(rows)}")
        row = rows[index]
        h = self._result.heatmaps[row.key]
        self.heatmap = {
            "index": index,
            "label": f"{row.module} ({row.cls}) |neuron - FP32|, max {fmt_ratio(h.max)}, shape {'x'.join(map(str, h.shape))}",
            "rows": h.rows,
            "cols": h.cols,
            "values": list(h.values),
            "max": h.max,
        }

    def fallback_html(self) -> str:
        """The curve as a static SVG with the threshold line, and the verdict (escaped)."""
        pts = [(float(p[0]), math.log10(p[3] / Y_MIN)) for p in self.points]
        line = math.log10(self.threshold / Y_MIN)
        svg = fallback.polyline_svg(
            [("#1565c0", pts)], hlines=[("#c62828", line)], vmarks=[self.first] if self.first >= 0 else []
        )
        names = ", ".join(f"{p[0]}: {p[1]}" for p in self.points[:40])
        body = f"<p>{fallback.esc(self.verdict)}</p>{svg}<p style='color:#666'>{fallback.esc(names)}</p>"
        return fallback.section(f"Numerics ratio per module: {self.title}", body)

    def fallback_text(self) -> str:
        """The verdict and one line per module."""
        lines = [f"Numerics ratio per module: {self.title}", f"  {self.verdict}"]
        lines += [f"  {p[0]:>4} {p[1]:<40} L-inf {p[4]:>8} L2 {p[5]:>8}" for p in self.points[:60]]
        return "\n".join(lines)
