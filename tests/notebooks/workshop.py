"""What a workshop run must show, checked on the executed notebook (nbformat JSON) whoever ran it.

The same rules hold for the browser run (``test_workshop_browser.py``: JupyterLab + Chromium) and
the nbclient runs (``test_repeat_runs.py``: Run All, re-runs, restart), so a check cell's assertion means the same
either way:

* no cell ends in an error output;
* the check cell printed ``all checks passed`` (its asserts ran and held);
* **every stderr block is explained** (the rule): a code cell that is expected to write to stderr
  names the expected text in its metadata, ``"expected_stderr": ["<substring>", ...]``;

  - each stderr block of the cell must contain one of the listed substrings;
  - each listed substring must be quoted in the markdown cell right before or right after the
    code cell (the reader is told what the block says and why, in the notebook itself);
  - a listed substring is **allowed, never required** (issue 49): it explains a block when one appears
    and is silent when none does. Some C++ library lines (Kineto's ``USDT ... profiler_start``, DDP's
    "Time stats" warning) reach the cell's output with one ipykernel and only the kernel's own stderr
    with another (7.4), so requiring them would fail on a newcomer's machine;
  - a block may also be the **late output of the code cell before it**: a C++ library's stderr is
    forwarded by the kernel asynchronously, so a profiler's ``profiler_stop`` line can land under the next
    cell (seen once in a browser run of 10_profiling). It is explained by that cell's ``expected_stderr``
    only, which its own markdown quotes already;
  - a cell without ``expected_stderr`` (and no such cell before it) writes nothing to stderr.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOTEBOOKS = sorted(p.name for p in EXAMPLES.glob("*.ipynb"))
PASSED = "all checks passed"


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _cells(nb: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    return list(nb.get("cells", []))


def stderr_blocks(cell: Mapping[str, Any]) -> list[str]:
    """The text of each stderr block of a code cell: consecutive stderr stream outputs joined, as
    JupyterLab shows (and stores) them, so nbclient's and the browser's runs read the same blocks."""
    blocks: list[str] = []
    previous_was_stderr = False
    for out in cell.get("outputs", []):
        is_stderr = out.get("output_type") == "stream" and out.get("name") == "stderr"
        if is_stderr and previous_was_stderr:
            blocks[-1] += _text(out.get("text"))
        elif is_stderr:
            blocks.append(_text(out.get("text")))
        previous_was_stderr = is_stderr
    return blocks


def stdout_text(nb: Mapping[str, Any]) -> str:
    """Every stdout stream and text/plain result of the notebook, joined."""
    parts = []
    for cell in _cells(nb):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stdout":
                parts.append(_text(out.get("text")))
            elif "data" in out:
                parts.append(_text(out["data"].get("text/plain")))
    return "\n".join(parts)


def _failing_line(traceback: list[str]) -> str:
    """The ``---->`` line of an IPython traceback (ANSI colours removed), or ''."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(traceback or []))
    arrows = [line.strip() for line in text.splitlines() if re.match(r"-+> ", line.lstrip())]  # "---> 31", "----> 3"
    return arrows[-1] if arrows else ""


def cell_errors(nb: Mapping[str, Any]) -> list[str]:
    """``cell [n]: Name: value (at: the failing line)`` for each error output (n: the cell's index)."""
    return [
        f"cell [{i}]: {out.get('ename')}: {out.get('evalue')} (at: {_failing_line(out.get('traceback', []))})"
        for i, cell in enumerate(_cells(nb))
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]


def unexplained_stderr(nb: Mapping[str, Any]) -> list[str]:
    """Violations of the stderr rule (module docstring); an empty list when every block is explained."""
    cells = _cells(nb)
    problems = []
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        blocks = stderr_blocks(cell)
        expected = [str(s) for s in cell.get("metadata", {}).get("expected_stderr", [])]
        before = next((c for c in reversed(cells[:i]) if c.get("cell_type") == "code"), None)
        late = [str(s) for s in (before or {}).get("metadata", {}).get("expected_stderr", [])]
        around = [
            _text(cells[j].get("source"))
            for j in (i - 1, i + 1)
            if 0 <= j < len(cells) and cells[j].get("cell_type") == "markdown"
        ]
        for block in blocks:
            if not any(s in block for s in [*expected, *late]):
                problems.append(f"cell [{i}]: stderr not explained (no expected_stderr entry in it): {block[:300]!r}")
        for s in expected:
            if not any(s in md for md in around):
                problems.append(f"cell [{i}]: expected_stderr {s!r} is not quoted in the markdown next to the cell")
    return problems


def workshop_problems(nb: Mapping[str, Any]) -> list[str]:
    """Everything that fails a workshop notebook's run: errors, unexplained stderr, a missing pass line."""
    problems = cell_errors(nb) + unexplained_stderr(nb)
    if PASSED not in stdout_text(nb):
        problems.append(f"the check cell never printed {PASSED!r}")
    return problems
