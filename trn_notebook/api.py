"""Public functions over the device's single sources of truth (placement log, memory, clocks)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .device.allocator import allocator_timeline_columns
from .device.clocks import clocks
from .device.placement import CALLS, CATEGORY, DEVICE_S, placement_log
from .device.runtime import allocator

if TYPE_CHECKING:
    import pandas as pd


def get_fallback_ops() -> list[str]:
    """Names (``aten::op``) of the ops that fell back to the CPU since the last clear."""
    return sorted(f"aten::{n}" for n, e in placement_log.snapshot().items() if e[CATEGORY] == "cpu_fallback")


def get_executed_ops() -> dict[str, int]:
    """Calls per op (``aten::op``) executed on the device since the last clear, all categories."""
    return {f"aten::{n}": e[CALLS] for n, e in sorted(placement_log.snapshot().items())}


def clear_op_tracking() -> None:
    """Forget the placement log (ops, calls, costs, source lines)."""
    placement_log.reset()


def op_table(snapshot: dict[str, tuple[Any, ...]] | None = None) -> pd.DataFrame:
    """The placement log (or a snapshot of it) as a DataFrame sorted by modeled device time."""
    return placement_log.frame(snapshot)


def placement_summary(snapshot: dict[str, tuple[Any, ...]] | None = None) -> dict[str, Any]:
    """Calls and modeled device time by category, and the share of device time spent in fallbacks."""
    snap = placement_log.snapshot() if snapshot is None else snapshot
    calls = {"native": 0, "cpu_fallback": 0, "unsupported": 0, "host_only": 0}
    ops = dict.fromkeys(calls, 0)
    for e in snap.values():
        calls[e[CATEGORY]] = calls.get(e[CATEGORY], 0) + e[CALLS]
        ops[e[CATEGORY]] = ops.get(e[CATEGORY], 0) + 1
    device_s = sum(e[DEVICE_S] for e in snap.values())
    return {"calls": calls, "ops": ops, "device_s": device_s, "clocks": clocks.snapshot()}


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Attribute device memory peaks inside the block to the named phase (``load``, ``warmup`` …)."""
    with allocator.phase_scope(name):
        yield


def save_trace(path: str | Path) -> Path:
    """Write the simulator's timeline (device ops, host work, sync points) as Chrome/Perfetto trace JSON.

    Open the file in https://ui.perfetto.dev or chrome://tracing. Times are the *modeled* clocks.
    Raises ``OSError`` if the file cannot be written.
    """
    path = Path(path)
    path.write_text(json.dumps(clocks.chrome_trace()), encoding="utf-8")
    return path


def memory_timeline() -> pd.DataFrame:
    """The bounded memory timeline (seconds since start, allocated, active, reserved, phase)."""
    import pandas as pd

    with allocator.lock:
        rows = list(allocator.timeline)
    return pd.DataFrame(rows, columns=allocator_timeline_columns())
