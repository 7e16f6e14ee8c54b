"""Which line of code is the user's, and how it is named: one rule for every view.

A frame is the user's unless its file lies in torch, trn_notebook, the standard library or the
notebook machinery that calls user code (IPython, ipykernel, widgets, traitlets, tornado, comm).
A line in a notebook cell is named ``cell [N] line L`` (N the cell's execution count, read from
IPython's own map of cell file names, whether or not the magics are loaded); any other line
``file:line``. :class:`SourceLine` carries the parts; :func:`parse_source` reads a name back
(compile records and IR nodes store the name as text).

The placement log, the profiler, the memory history, the numerics checks, the compiler's lowering
errors and the magics' warnings all call these functions: none keeps its own rule.
"""

from __future__ import annotations

import functools
import importlib.util
import linecache
import os
import re
import sys
import sysconfig
from dataclasses import dataclass
from types import FrameType
from typing import Any

import torch

NO_USER_FRAME = "<no user frame: autograd engine or notebook machinery>"


def _package_dir(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "")


# Frames in these folders are never "the user's line".
SKIP_DIRS = tuple(
    d
    for d in (
        os.path.join(os.path.dirname(torch.__file__), ""),
        os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ""),  # trn_notebook
        *(_package_dir(n) for n in ("IPython", "ipykernel", "ipywidgets", "anywidget", "traitlets", "tornado", "comm")),
    )
    if d
)


def library_dirs(paths: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(standard library folders, installed-package folders)`` from ``sysconfig.get_paths()``-shaped
    ``paths``. Without a virtual environment (conda, the official Python image, pyenv) site-packages sits
    inside the standard library's folder, so a file is the standard library's only outside the second."""
    stdlib = tuple(sorted({os.path.join(paths[k], "") for k in ("stdlib", "platstdlib") if paths.get(k)}))
    site = tuple(sorted({os.path.join(paths[k], "") for k in ("purelib", "platlib") if paths.get(k)}))
    return stdlib, site


STDLIB_DIRS, SITE_DIRS = library_dirs(sysconfig.get_paths())


def is_stdlib_file(filename: str, dirs: tuple[tuple[str, ...], tuple[str, ...]] = (STDLIB_DIRS, SITE_DIRS)) -> bool:
    """Whether ``filename`` is in the standard library (not in an installed package that lives under it)."""
    stdlib, site = dirs
    if not filename.startswith(stdlib) or filename.startswith(site):
        return False
    return "/site-packages/" not in filename and "/dist-packages/" not in filename


_CELL_RE = re.compile(r"^cell \[(\d+)\] line (\d+)")
_FILE_RE = re.compile(r"^(.*?):(\d+)(?:\s|$)")


@dataclass(frozen=True)
class SourceLine:
    """One line of user code: its file, line number, notebook cell (``None`` outside a cell) and text."""

    file: str
    line: int
    cell: int | None = None
    code: str = ""

    def __str__(self) -> str:
        return (
            f"cell [{self.cell}] line {self.line}"
            if self.cell is not None
            else f"{package_path(self.file)}:{self.line}"
        )


def package_path(filename: str) -> str:
    """An installed package's file from its package directory (``transformers/generation/utils.py``), so a
    source column shows the part that names it rather than a venv prefix clipped at the column's width;
    any other path unchanged."""
    for marker in ("site-packages/", "dist-packages/"):
        _, sep, tail = filename.rpartition(marker)
        if sep and tail:
            return tail
    return filename


def _installed_file(name: str) -> str:
    """The file a :func:`package_path` name came from (searched on ``sys.path``), else ``name`` itself."""
    if os.path.isabs(name) or os.path.exists(name):
        return name
    for root in sys.path:
        candidate = os.path.join(root, name)
        if root and os.path.isfile(candidate):
            return candidate
    return name


@functools.lru_cache(maxsize=4096)  # a frame's file is asked about on every op: a few hundred files in all
def is_user_file(filename: str) -> bool:
    """Whether a frame in ``filename`` is user code (not torch, us, the standard library or Jupyter)."""
    return not filename.startswith(SKIP_DIRS) and not filename.startswith("<frozen") and not is_stdlib_file(filename)


def user_frame(frame: FrameType | None = None) -> tuple[str, int] | None:
    """``(filename, lineno)`` of the innermost user frame from ``frame`` (default: the caller's) outward,
    or ``None`` when every frame is library code (the autograd engine's thread, a widget callback)."""
    f: FrameType | None = frame if frame is not None else sys._getframe(1)
    while f is not None:
        filename = f.f_code.co_filename
        if is_user_file(filename):
            return filename, f.f_lineno
        f = f.f_back
    return None


def _cell_map() -> dict[str, int]:
    """IPython's map of cell file names to execution counts ({} outside IPython)."""
    mod = sys.modules.get("IPython")
    if mod is None:
        return {}
    try:
        shell = mod.get_ipython()
    except Exception:
        return {}
    found: Any = getattr(getattr(shell, "compile", None), "_filename_map", None)
    return found if isinstance(found, dict) else {}


def source_line(filename: str, lineno: int, *, code: bool = False) -> SourceLine:
    """The :class:`SourceLine` of ``filename:lineno`` (with its text when ``code``)."""
    text = linecache.getline(filename, lineno).strip() if code else ""
    return SourceLine(filename, lineno, _cell_map().get(filename), text)


def format_source(filename: str, lineno: int) -> str:
    """``cell [N] line L`` for a line of a notebook cell, else ``file:line``."""
    return str(source_line(filename, lineno))


def user_source() -> str:
    """The caller's innermost user line, named (or :data:`NO_USER_FRAME`)."""
    where = user_frame(sys._getframe(1))
    return NO_USER_FRAME if where is None else format_source(*where)


def parse_source(text: str) -> SourceLine | None:
    """A :class:`SourceLine` back from its name (``cell [N] line L`` or ``file:line``), ``None`` if neither.

    A cell's file is found through IPython's map when the cell is still known (the latest cell of that
    number: cells run without history share one), else it is ``cell [N]``.
    """
    m = _CELL_RE.match(text)
    if m:
        cell, line = int(m.group(1)), int(m.group(2))
        file = next((f for f, n in reversed(_cell_map().items()) if n == cell), f"cell [{cell}]")
        return SourceLine(file, line, cell)
    m = _FILE_RE.match(text)
    if not m:
        return None
    file = _installed_file(m.group(1))
    return SourceLine(file, int(m.group(2)), _cell_map().get(file))


__all__ = [
    "NO_USER_FRAME",
    "SKIP_DIRS",
    "SourceLine",
    "format_source",
    "is_user_file",
    "parse_source",
    "source_line",
    "user_frame",
    "user_source",
]
