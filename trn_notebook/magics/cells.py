"""Which notebook cell is running now, and cell names for the compiler's ``file:line`` sources.

The naming rule itself is :mod:`trn_notebook.device.source_lines` (one rule for every view)."""

from __future__ import annotations

import sys
from types import FrameType

from IPython.core.interactiveshell import InteractiveShell

from ..device.source_lines import parse_source


def current_cell_number(shell: InteractiveShell) -> int:
    """The execution count of the cell running now (the innermost IPython cell on the call stack).

    IPython 9 increments ``execution_count`` before a stored cell runs, so the counter alone is one
    ahead inside a magic; the cell's compiled filename maps to its number exactly.
    """
    filename_map: dict[str, int] = getattr(shell.compile, "_filename_map", {})
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        count = filename_map.get(frame.f_code.co_filename)
        if count is not None:
            return count
        frame = frame.f_back
    return shell.execution_count


def describe_source(source: str) -> str:
    """A ``filename:line`` string (as the compiler reports sources) named ``cell [N] line L`` when it is a
    cell's line (:mod:`trn_notebook.device.source_lines`' rule); any other text unchanged."""
    src = parse_source(source)
    return str(src) if src is not None else source
