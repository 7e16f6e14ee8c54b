"""PlanView: a :class:`~trn_notebook.planner.PlanResult` drawn — stacked memory bars per layout against the
capacity line of one logical core, and the modeled step time split into compute and exposed communication.

Every figure comes from the plan's table (its DataFrame); nothing is computed here but the drawing's
shares. Every figure is modeled (a dry run), and the view says so.
"""

from __future__ import annotations

from typing import Any

import traitlets

from ..device.dry.memory import CATEGORIES
from ..display import fallback
from ..display.format import fmt_bytes, fmt_s
from ..display.views import register_view
from ..planner import PlanResult
from ._base import TrnWidget, esm


class PlanView(TrnWidget):
    """The plan as bars: one row per layout (memory by category at the peak vs capacity; step time)."""

    _esm = esm("plan.js")
    rows = traitlets.List().tag(sync=True)
    capacity = traitlets.Int(0).tag(sync=True)
    categories = traitlets.List(list(CATEGORIES)).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)

    def __init__(self, result: Any, **kwargs: Any) -> None:
        self._result = result
        super().__init__(**kwargs)
        self.refresh()

    def refresh(self) -> None:
        """Copy the plan's table into the synced state."""
        r = self._result
        cap = int(r.capacity)
        self.capacity = cap
        self.title = f"plan: {r.model} on {r.chip} (LNC={r.lnc}) — DRY RUN, every figure modeled"
        self.rows = [
            {
                "layout": str(name),
                "fits": bool(row["fits"]),
                "best": str(name) == r.best,
                "peak": int(row["peak_allocated"]),
                "phase": str(row["peak_phase"]),
                "bytes": {c: int(row[c]) for c in CATEGORIES},
                "step_s": float(row["step_s"]),
                "exposed_s": float(row["exposed_comm_s"]),
                # the figures as shown, formatted once (display.format)
                "memory_text": f"{fmt_bytes(int(row['peak_allocated']))} / {fmt_bytes(cap)} ({row['peak_phase']})",
                "time_text": f"{fmt_s(float(row['step_s']))} step, {fmt_s(float(row['exposed_comm_s']))} exposed comm",
            }
            for name, row in r.table.iterrows()
        ]

    def fallback_html(self) -> str:
        """The plan's own table (escaped)."""
        return fallback.section(self.title, self._result._repr_html_())

    def fallback_text(self) -> str:
        """The plan's own text."""
        return str(self._result.text())


register_view(PlanResult, PlanView)  # PlanResult.widget()
