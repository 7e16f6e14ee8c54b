"""Result objects shown by the magics: each renders as HTML (``_repr_html_``) and as plain text.

Library functions (``trn_notebook.session``, ``trn_notebook.facts.status``) return these; the magics only
display them. Every piece of user-supplied text is escaped with :func:`html.escape`. The building
blocks are :class:`Table`, :class:`Card`, :class:`Message` and :class:`Sections` (a vertical stack);
richer results subclass :class:`Result` and compose them in :meth:`Result.parts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .format import esc, fmt_bytes, fmt_s

__all__ = ["Card", "Message", "Preformatted", "Result", "Sections", "Table", "esc", "fmt_bytes", "fmt_s"]

_STYLE = "font-family:var(--jp-code-font-family,monospace);font-size:12px;border-collapse:collapse;margin:2px 0"
_CELL = "padding:1px 8px;border-bottom:1px solid #ddd;text-align:left"


class Result:
    """Base of every displayed result: subclasses implement :meth:`parts` (or both renderers)."""

    def parts(self) -> list[Result]:
        """The building blocks this result is made of, top to bottom."""
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return "".join(p._repr_html_() for p in self.parts())

    def text(self) -> str:
        """The plain-text rendering (what ``repr`` and ``text/plain`` show)."""
        return "\n".join(p.text() for p in self.parts())

    def __repr__(self) -> str:
        return self.text()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text())


@dataclass(repr=False)
class Message(Result):
    """One line of information, a warning or an error (``level`` styles the HTML)."""

    message: str
    level: str = "info"  # info | warning | error

    def _repr_html_(self) -> str:
        color = {"warning": "#b26b00", "error": "#b00020"}.get(self.level, "inherit")
        return f'<div style="color:{color};white-space:pre-wrap;{_STYLE}">{esc(self.message)}</div>'

    def text(self) -> str:
        prefix = {"warning": "warning: ", "error": "error: "}.get(self.level, "")
        return prefix + self.message


@dataclass(repr=False)
class Card(Result):
    """A titled list of ``label: value`` fields (a device card, a status line)."""

    title: str
    fields: list[tuple[str, object]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def _repr_html_(self) -> str:
        rows = "".join(
            f'<tr><th style="{_CELL};font-weight:600">{esc(k)}</th><td style="{_CELL}">{esc(v)}</td></tr>'
            for k, v in self.fields
        )
        notes = "".join(f'<div style="color:#666;{_STYLE}">{esc(n)}</div>' for n in self.notes)
        return f'<div><b style="{_STYLE}">{esc(self.title)}</b><table style="{_STYLE}">{rows}</table>{notes}</div>'

    def text(self) -> str:
        width = max((len(k) for k, _ in self.fields), default=0)
        lines = [self.title] + [f"  {k:<{width}}  {v}" for k, v in self.fields]
        return "\n".join(lines + [f"  {n}" for n in self.notes])


@dataclass(repr=False)
class Table(Result):
    """A titled table; rows beyond ``max_rows`` are summarised in a note, not rendered."""

    title: str
    columns: Sequence[str]
    rows: Sequence[Sequence[object]]
    notes: list[str] = field(default_factory=list)
    max_rows: int = 50
    empty: str = "(nothing recorded)"

    def _shown(self) -> tuple[Sequence[Sequence[object]], list[str]]:
        notes = list(self.notes)
        if len(self.rows) > self.max_rows:
            notes.insert(0, f"… {len(self.rows) - self.max_rows} more rows not shown")
            return self.rows[: self.max_rows], notes
        return self.rows, notes

    def _repr_html_(self) -> str:
        rows, notes = self._shown()
        head = "".join(f'<th style="{_CELL};font-weight:600">{esc(c)}</th>' for c in self.columns)
        cell = f'<td style="{_CELL}">'
        body = "".join("<tr>" + "".join(f"{cell}{esc(v)}</td>" for v in r) + "</tr>" for r in rows)
        if not rows:
            body = f'<tr><td colspan="{len(self.columns)}" style="{_CELL};color:#666">{esc(self.empty)}</td></tr>'
        foot = "".join(f'<div style="color:#666;{_STYLE}">{esc(n)}</div>' for n in notes)
        return (
            f'<div><b style="{_STYLE}">{esc(self.title)}</b>'
            f'<table style="{_STYLE}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{foot}</div>'
        )

    def text(self) -> str:
        rows, notes = self._shown()
        cells = [[str(c) for c in self.columns]] + [[str(v) for v in r] for r in rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(self.columns))]
        lines = [self.title]
        lines += ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
        if not rows:
            lines.append(f"  {self.empty}")
        return "\n".join(lines + [f"  {n}" for n in notes])


@dataclass(repr=False)
class Preformatted(Result):
    """A titled block of monospaced text (IR listings, help, summaries)."""

    title: str
    body: str

    def _repr_html_(self) -> str:
        return f'<div><b style="{_STYLE}">{esc(self.title)}</b><pre style="{_STYLE}">{esc(self.body)}</pre></div>'

    def text(self) -> str:
        return f"{self.title}\n{self.body}" if self.title else self.body


@dataclass(repr=False)
class Sections(Result):
    """Several results stacked vertically."""

    items: list[Result] = field(default_factory=list)

    def parts(self) -> list[Result]:
        return list(self.items)
