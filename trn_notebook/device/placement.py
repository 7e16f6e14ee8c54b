"""The placement log: per ATen base op, where it ran and what it cost (single source of truth).

Each entry holds: category, calls, host wall seconds, modeled seconds, bytes moved host->device and
device->host, and the first user source line that issued it. The modeled seconds are the device
kernel time for native ops and, for CPU fallbacks, the modeled copies both ways plus the measured
host compute (what the fallback adds to the critical path). Views and magics
read :meth:`PlacementLog.snapshot`; nothing else counts ops.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    import pandas as pd

# Entry layout (a list for cheap in-place updates on the hot path).
CATEGORY, CALLS, HOST_S, DEVICE_S, H2D, D2H, SOURCE = range(7)
COLUMNS = ("op", "category", "calls", "host_ms", "device_ms", "bytes_h2d", "bytes_d2h", "source")


def _package_dir(name: str) -> str | None:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "")


# Frames in these folders are never "the user's line": torch, us, the standard library, and the
# notebook machinery that calls user code (IPython, ipykernel, widgets, traitlets, tornado).
_SKIP_DIRS = tuple(
    d
    for d in (
        os.path.join(os.path.dirname(torch.__file__), ""),
        os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ""),  # trn_notebook
        os.path.join(os.path.dirname(threading.__file__), ""),  # the standard library (its top level)
        *(_package_dir(n) for n in ("IPython", "ipykernel", "ipywidgets", "anywidget", "traitlets", "tornado", "comm")),
    )
    if d
)

SourceFormatter = Callable[[str, int], str]


def _default_formatter(filename: str, lineno: int) -> str:
    return f"{filename}:{lineno}"


class PlacementLog:
    """Per-op counters keyed by base op name; thread-safe (backward runs on the autograd thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: dict[str, list[Any]] = {}
        self.total_calls = 0
        self.version = 0
        self.source_formatter: SourceFormatter = _default_formatter

    def record(self, name: str, category: str, host_s: float, device_s: float, h2d: int = 0, d2h: int = 0) -> None:
        """Add one call of op ``name``; captures the user's source line on the op's first call."""
        entry = self.entries.get(name)
        with self.lock:
            if entry is None:
                entry = self.entries.get(name)
                if entry is None:
                    entry = self.entries[name] = [category, 0, 0.0, 0.0, 0, 0, self.user_source()]
            entry[CALLS] += 1
            entry[HOST_S] += host_s
            entry[DEVICE_S] += device_s
            entry[H2D] += h2d
            entry[D2H] += d2h
            entry[CATEGORY] = category
            self.total_calls += 1
            self.version += 1

    def user_source(self) -> str:
        """The first frame outside torch, trn_notebook, the standard library and Jupyter, formatted."""
        where = user_frame()
        if where is None:
            return "<no user frame: autograd engine or notebook machinery>"
        try:
            return self.source_formatter(*where)
        except Exception:
            return _default_formatter(*where)

    def snapshot(self) -> dict[str, tuple[Any, ...]]:
        """A copy of every entry: ``{op: (category, calls, host_s, device_s, h2d, d2h, source)}``."""
        with self.lock:
            return {name: tuple(e) for name, e in self.entries.items()}

    def frame(self, snapshot: dict[str, tuple[Any, ...]] | None = None) -> pd.DataFrame:
        """The log (or a snapshot/difference of snapshots) as a DataFrame sorted by modeled device time."""
        import pandas as pd

        snap = self.snapshot() if snapshot is None else snapshot
        rows = [
            (name, e[CATEGORY], e[CALLS], e[HOST_S] * 1e3, e[DEVICE_S] * 1e3, e[H2D], e[D2H], e[SOURCE])
            for name, e in snap.items()
        ]
        df = pd.DataFrame(rows, columns=list(COLUMNS))
        return df.sort_values(["device_ms", "calls"], ascending=False, ignore_index=True)

    def reset(self) -> None:
        """Forget every entry."""
        with self.lock:
            self.entries = {}
            self.total_calls = 0
            self.version += 1


def user_frame() -> tuple[str, int] | None:
    """``(filename, lineno)`` of the innermost frame that belongs to user code, or ``None``."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_SKIP_DIRS) and not filename.startswith("<frozen"):
            return filename, frame.f_lineno
        frame = frame.f_back
    return None


def diff_snapshots(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
    """Entries of ``after`` minus ``before`` (a per-cell window); ops with no new calls are dropped."""
    out: dict[str, tuple[Any, ...]] = {}
    for name, e in after.items():
        b = before.get(name)
        if b is None:
            out[name] = e
        elif e[CALLS] != b[CALLS]:
            out[name] = (
                e[CATEGORY],
                e[CALLS] - b[CALLS],
                e[HOST_S] - b[HOST_S],
                e[DEVICE_S] - b[DEVICE_S],
                e[H2D] - b[H2D],
                e[D2H] - b[D2H],
                e[SOURCE],
            )
    return out


placement_log = PlacementLog()
