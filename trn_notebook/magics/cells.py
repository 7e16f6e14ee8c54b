"""Which notebook cell a line of code is in: ``cell [N] line L`` names, and the cell running now.

Below the hooks, the parser and the magics, which all name cells (one rule, here)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType

from IPython.core.interactiveshell import InteractiveShell

from ..device.placement import package_path


def cell_source_formatter(shell: InteractiveShell) -> Callable[[str, int], str]:
    """``fn(filename, lineno)`` naming IPython cells ``cell [N] line L`` (else ``filename:line``, an installed
    package's file from its package directory)."""
    filename_map: dict[str, int] = getattr(shell.compile, "_filename_map", {})

    def fmt(filename: str, lineno: int) -> str:
        count = filename_map.get(filename)
        return f"{package_path(filename)}:{lineno}" if count is None else f"cell [{count}] line {lineno}"

    fmt.trn_shell = shell  # type: ignore[attr-defined]  # marks our formatter for unload
    return fmt


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


def describe_source(shell: InteractiveShell) -> Callable[[str], str]:
    """Map a ``filename:line`` string (as the compiler reports sources) to ``cell [N] line L``."""
    fmt = cell_source_formatter(shell)

    def describe(source: str) -> str:
        filename, sep, line = source.rpartition(":")
        return fmt(filename, int(line)) if sep and line.isdigit() else source

    return describe
