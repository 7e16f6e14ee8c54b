"""Errors of the kernel simulator, each naming the kernel source line that caused it."""

from __future__ import annotations

import linecache
import os
import sys
from types import FrameType

_PACKAGE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")


class NkiError(ValueError):
    """A kernel broke a hardware rule (shape, dtype, buffer, capacity); the message names the kernel line."""


class NkiCapacityError(NkiError, MemoryError):
    """An on-chip buffer (SBUF or PSUM) cannot hold the live tiles: the message gives asked/used/capacity."""


def kernel_line() -> tuple[str, int, str] | None:
    """``(filename, lineno, source)`` of the innermost frame outside ``trn_notebook/nki`` (the kernel's line)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PACKAGE_DIR):
            text = linecache.getline(filename, frame.f_lineno).strip()
            return filename, frame.f_lineno, text
        frame = frame.f_back
    return None


def describe(filename: str, lineno: int) -> str:
    """``cell [N] line L`` for a notebook cell (IPython's compiled-cell names), else ``file.py:L``."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    count = getattr(getattr(shell, "compile", None), "_filename_map", {}).get(filename) if shell is not None else None
    return f"cell [{count}] line {lineno}" if count is not None else f"{os.path.basename(filename)}:{lineno}"


def where() -> str:
    """``file:line`` of the kernel line being executed (``"<unknown>"`` outside a kernel)."""
    loc = kernel_line()
    return "<unknown>" if loc is None else describe(loc[0], loc[1])


def fail(message: str, cls: type[NkiError] = NkiError) -> NkiError:
    """Build an error whose text ends with the kernel line (``raise fail(...)``)."""
    loc = kernel_line()
    if loc is not None:
        filename, lineno, text = loc
        message = f"{message}\n  at {describe(filename, lineno)}: {text}"
    return cls(message)
