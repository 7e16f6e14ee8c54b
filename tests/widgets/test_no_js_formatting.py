"""No widget's JavaScript formats a number (issue 29 item 6): every figure string comes from the one Python
formatter (``trn_notebook.display.format``) and reaches the page beside the number the drawing uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trn_notebook.widgets._base import STATIC

# What number formatting looks like in JavaScript: the Number/Intl formatting calls, a function of its own
# (fmtS, formatBytes, gib-style helpers are named fmt*/format*), or a unit glued onto a computed figure.
FORMATTING = {
    "Number formatting call": re.compile(
        r"\.(toFixed|toPrecision|toExponential|toLocaleString)\s*\(|Intl\.NumberFormat"
    ),
    "formatter function": re.compile(
        r"\bfunction\s+(fmt|format)\w*\s*\(|\b(const|let|var)\s+(fmt|format)\w*\s*=|\b(fmt|format)[A-Z]\w*\s*\("
    ),
    "unit suffix on a figure": re.compile(
        r"""\+\s*["'`]\s*(ms|s|µs|us|ns|B|KiB|MiB|GiB|TiB|%|min|h)\b\s*["'`]|\}\s*(ms|µs|ns|KiB|MiB|GiB|TiB)\b"""
    ),
}


def formatting_in(source: str) -> list[str]:
    """``kind: line`` for each line of ``source`` that formats a number (CSS sizes such as ``.style.width = … + "%"``
    and comments are geometry and prose, not displayed figures)."""
    found = []
    for line in source.splitlines():
        code = line.split("//", 1)[0]
        if ".style." in code:
            continue
        found += [f"{kind}: {line.strip()}" for kind, rx in FORMATTING.items() if rx.search(code)]
    return found


WIDGET_JS = sorted(STATIC.glob("*.js"))
STATUS_BAR = sorted((Path(__file__).resolve().parents[2] / "labextension" / "src").glob("*.ts"))


def test_every_widget_has_a_front_end_file_to_check() -> None:
    names = {p.stem for p in WIDGET_JS}
    assert {"cache", "memory", "memory_snapshot", "numerics", "placement", "plan", "timeline", "tuner"} <= names
    assert [p.name for p in STATUS_BAR] == ["index.ts"]  # the status bar shows the kernel's strings too


@pytest.mark.parametrize("path", WIDGET_JS + STATUS_BAR, ids=lambda p: p.name)
def test_widget_javascript_formats_no_number(path: Path) -> None:
    found = formatting_in(path.read_text(encoding="utf-8"))
    assert not found, (
        f"{path.name} formats numbers; send a string from trn_notebook.display.format instead:\n" + "\n".join(found)
    )


@pytest.mark.parametrize(
    "snippet",
    [
        'function fmtS(s) { return (s * 1e3).toFixed(2) + " ms"; }',  # the cache/tuner formatter this replaced
        "const gib = (b) => (b / 2 ** 30).toFixed(2);",
        'label.textContent = Math.round(n) + " B";',
        "tip.textContent = `${name} ${us / 1e3} ms`;",
        "cell.textContent = formatBytes(v);",
        "x.toLocaleString()",
    ],
)
def test_the_check_catches_the_formatters_it_forbids(snippet: str) -> None:
    assert formatting_in(snippet)


def test_the_check_lets_geometry_and_names_through() -> None:
    ok = 'bar.style.width = Math.max(4, (total / biggest) * 100) + "%";\nel("td", null, row.text.modeled_ms); // 3 ms'
    assert formatting_in(ok) == []
