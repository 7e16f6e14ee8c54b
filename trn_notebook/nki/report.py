"""The modeled execution of one kernel run: time, per-engine utilisation and the engine lanes."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from ..display.format import fmt_bytes, fmt_s, fmt_share
from .costmodel import ENGINES, Record

LANES = (*ENGINES, "DMA")
_COLORS = {"TensorE": "#4e79a7", "VectorE": "#59a14f", "ScalarE": "#f28e2b", "GpSimdE": "#b07aa1", "DMA": "#9c755f"}


@dataclass
class KernelReport:
    """Modeled (not measured) figures of one kernel launch on one NeuronCore per program."""

    kernel: str
    core: str
    modeled_s: float
    busy_s: dict[str, float]
    instructions: dict[str, int]
    flops: float
    dma_bytes: float
    sbuf_peak_bytes: int
    sbuf_capacity_bytes: int
    psum_peak_banks: int
    programs: int = 1
    records: list[Record] = field(default_factory=list)

    @property
    def utilisation(self) -> dict[str, float]:
        """Busy fraction of each engine and of the DMA queues over the modeled time."""
        t = self.modeled_s
        return {k: (v / t if t > 0 else 0.0) for k, v in self.busy_s.items()}

    @property
    def bottleneck(self) -> str:
        """The busiest lane."""
        return max(self.busy_s, key=self.busy_s.__getitem__)

    def text(self) -> str:
        """A short plain-text summary."""
        util = ", ".join(f"{k} {fmt_share(v)}" for k, v in self.utilisation.items())
        count = sum(self.instructions.values())
        return (
            f"{self.kernel} on {self.core}: modeled {fmt_s(self.modeled_s)} ({count} instructions"
            f"{f', {self.programs} programs' if self.programs > 1 else ''}); utilisation {util}; "
            f"SBUF peak {fmt_bytes(self.sbuf_peak_bytes)} of {fmt_bytes(self.sbuf_capacity_bytes)} per partition, "
            f"PSUM peak {self.psum_peak_banks}/8 banks"
        )

    def __repr__(self) -> str:
        return f"KernelReport({self.text()})"

    def rows(self) -> list[dict[str, object]]:
        """One row per lane: instructions, busy time and utilisation (modeled)."""
        util = self.utilisation
        return [
            {
                "lane": k,
                "instructions": self.instructions.get(k, 0),
                "busy_us": self.busy_s[k] * 1e6,
                "utilisation": util[k],
            }
            for k in LANES
        ]

    def lanes_html(self, width: int = 640, max_bars: int = 400) -> str:
        """Engine lanes as a static HTML/SVG picture (which engine is busy when), labelled *modeled*."""
        total = self.modeled_s or 1.0
        rows = []
        for i, lane in enumerate(LANES):
            recs = [r for r in self.records if r.lane == lane][:max_bars]
            bars = "".join(
                f'<rect x="{90 + r.start / total * width:.1f}" y="{i * 22 + 4}" '
                f'width="{max(0.5, (r.end - r.start) / total * width):.1f}" height="14" fill="{_COLORS[lane]}">'
                f"<title>{html.escape(r.name)} {html.escape(r.line)} {fmt_s(r.end - r.start)}</title></rect>"
                for r in recs
            )
            label = f'<text x="0" y="{i * 22 + 15}" font-size="11">{lane} {fmt_share(self.utilisation[lane])}</text>'
            rows.append(label + bars)
        h = len(LANES) * 22 + 20
        axis = f'<text x="90" y="{h - 2}" font-size="10">0</text><text x="{90 + width - 60}" y="{h - 2}" font-size="10">{fmt_s(total)}</text>'
        svg = f'<svg width="{width + 100}" height="{h}" role="img" aria-label="modeled engine lanes">{"".join(rows)}{axis}</svg>'
        return (
            f"<div><b>{html.escape(self.kernel)}</b> — modeled engine lanes on {html.escape(self.core)}<br>{svg}</div>"
        )

    def _repr_html_(self) -> str:
        util = self.utilisation
        table = "".join(
            f"<tr><td>{k}</td><td>{self.instructions.get(k, 0)}</td><td>{fmt_s(self.busy_s[k])}</td>"
            f"<td>{fmt_share(util[k])}</td></tr>"
            for k in LANES
        )
        return (
            f"<p>{html.escape(self.text())}</p><table><tr><th>lane</th><th>instructions</th><th>busy (modeled)</th>"
            f"<th>utilisation</th></tr>{table}</table>{self.lanes_html()}"
        )


def combine(reports: list[KernelReport]) -> KernelReport:
    """Programs of a launch grid run on separate cores: time is the slowest, work adds up."""
    first = reports[0]
    if len(reports) == 1:
        return first
    slow = max(reports, key=lambda r: r.modeled_s)
    busy = {k: sum(r.busy_s[k] for r in reports) / len(reports) for k in first.busy_s}
    return KernelReport(
        first.kernel,
        first.core,
        slow.modeled_s,
        busy,
        {k: sum(r.instructions[k] for r in reports) for k in first.instructions},
        sum(r.flops for r in reports),
        sum(r.dma_bytes for r in reports),
        max(r.sbuf_peak_bytes for r in reports),
        first.sbuf_capacity_bytes,
        max(r.psum_peak_banks for r in reports),
        len(reports),
        slow.records,
    )
