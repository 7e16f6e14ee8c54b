"""Small helpers for the widgets' static HTML/text fallbacks: escaping, units, tables, inline SVG."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .format import esc, fmt_bytes, fmt_s

__all__ = ["CATEGORY_COLOURS", "OTHER_COLOUR", "esc", "fmt_bytes", "fmt_s", "polyline_svg", "section", "table"]

# Category colours, shared by the fallbacks and widgets.css (keep them in step).
CATEGORY_COLOURS = {
    "native": "#2e7d32",
    "cpu_fallback": "#e65100",
    "unsupported": "#c62828",
    "host_only": "#546e7a",
}
OTHER_COLOUR = "#6a1b9a"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, row_styles: Sequence[str] = ()) -> str:
    """An HTML table; every header and cell is escaped; ``row_styles[i]`` is a trusted inline style."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        style = f' style="{row_styles[i]}"' if i < len(row_styles) and row_styles[i] else ""
        body.append(f"<tr{style}>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
    return (
        '<table class="trn-fallback" style="border-collapse:collapse;font-size:12px">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def section(title: str, body: str) -> str:
    """A titled block (``title`` is escaped, ``body`` is trusted HTML built by these helpers)."""
    return f'<div class="trn-widget-fallback"><h4 style="margin:4px 0">{esc(title)}</h4>{body}</div>'


def polyline_svg(
    series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
    *,
    width: int = 480,
    height: int = 120,
    hlines: Sequence[tuple[str, float]] = (),
    vmarks: Sequence[float] = (),
) -> str:
    """A small static line chart: ``series`` of (colour, points), horizontal lines, vertical marks."""
    xs = [x for _, pts in series for x, _ in pts] + list(vmarks)
    ys = [y for _, pts in series for _, y in pts] + [y for _, y in hlines]
    if not xs or not ys:
        return ""
    x0, x1 = min(xs), max(xs)
    y1 = max(ys) or 1.0
    sx = (width - 10) / ((x1 - x0) or 1.0)
    sy = (height - 10) / y1

    def pt(x: float, y: float) -> str:
        return f"{5 + (x - x0) * sx:.1f},{height - 5 - y * sy:.1f}"

    parts = [f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">']
    for colour, y in hlines:
        parts.append(
            f'<line x1="0" x2="{width}" y1="{height - 5 - y * sy:.1f}" y2="{height - 5 - y * sy:.1f}" '
            f'stroke="{colour}" stroke-dasharray="4 3"/>'
        )
    for x in vmarks:
        xp = 5 + (x - x0) * sx
        parts.append(f'<line x1="{xp:.1f}" x2="{xp:.1f}" y1="0" y2="{height}" stroke="#c62828"/>')
    for colour, pts in series:
        if pts:
            path = " ".join(pt(x, y) for x, y in pts)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{path}"/>')
    parts.append("</svg>")
    return "".join(parts)


def bars_svg(
    bars: Sequence[tuple[float, float, float]],
    *,
    width: int = 480,
    height: int = 120,
    marks: Sequence[float] = (),
) -> str:
    """A static histogram: ``bars`` of (left, right, count) and vertical ``marks`` (bucket edges)."""
    if not bars:
        return ""
    x0 = min(b[0] for b in bars)
    x1 = max([b[1] for b in bars] + [m for m in marks if m <= max(b[1] for b in bars)])
    top = max(b[2] for b in bars) or 1.0
    sx = width / ((x1 - x0) or 1.0)
    parts = [f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">']
    for left, right, count in bars:
        h = (height - 4) * count / top
        parts.append(
            f'<rect x="{(left - x0) * sx:.1f}" y="{height - h:.1f}" width="{max((right - left) * sx - 0.5, 0.5):.1f}" '
            f'height="{h:.1f}" fill="#1565c0"/>'
        )
    for m in marks:
        if x0 <= m <= x1:
            xp = (m - x0) * sx
            parts.append(f'<line x1="{xp:.1f}" x2="{xp:.1f}" y1="0" y2="{height}" stroke="#e65100"/>')
    parts.append("</svg>")
    return "".join(parts)
