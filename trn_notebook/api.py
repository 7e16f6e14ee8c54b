"""Public functions over the device's single sources of truth (placement log, memory, clocks).

Placement is read through the live :class:`~trn_notebook.facts.Backend` (the simulator, or TorchNeuron on a
Trn2, where cost columns say "not measured"); simulator-only features raise
:class:`~trn_notebook.facts.SimulatorOnlyError` on hardware.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import facts
from .device.clocks import clocks
from .device.memory.allocator import allocator_timeline_columns
from .device.memory.runtime import allocator
from .device.placement import PlacementEntry, placement_log
from .facts.base import NOT_MEASURED, shown
from .facts.simulator import placement_of
from .outfiles import check_writable, write_text_atomic

if TYPE_CHECKING:
    import pandas as pd


def get_fallback_ops() -> list[str]:
    """Names (``aten::op``) of the ops that fell back to the CPU since the last clear."""
    return facts.current().fallback_ops()


def get_executed_ops() -> dict[str, int | None]:
    """Calls per op (``aten::op``) executed on the device since the last clear (None: count not reported)."""
    return facts.current().executed_ops()


def clear_op_tracking() -> None:
    """Forget the placement log (ops, calls, costs, source lines)."""
    facts.current().clear_op_tracking()


def op_table(snapshot: Mapping[str, PlacementEntry] | None = None) -> pd.DataFrame:
    """The placement log (or a simulator snapshot of it) as a DataFrame sorted by modeled device time.

    On hardware the cost, transfer and source columns hold "not measured".
    """
    backend = facts.current()
    if snapshot is not None or backend.is_simulator:
        return placement_log.frame(snapshot)
    import pandas as pd

    from .device.placement import COLUMNS, aws_class_of

    rows = [[op.removeprefix("aten::")] + [shown(v) for v in row.values()] for op, row in backend.placement().items()]
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    df["class"] = [aws_class_of(op, str(category)) for op, category in zip(df["op"], df["category"], strict=True)]
    return df


def placement_summary(snapshot: Mapping[str, PlacementEntry] | None = None) -> dict[str, Any]:
    """Calls and distinct ops by category, modeled time, the share of it spent in CPU fallbacks, bytes
    moved, and the clocks (aggregations of the backend-neutral :class:`~trn_notebook.facts.base.Placement`).

    Modeled time is the cost model's: device kernels and copies for native ops, modeled copies plus
    modeled host compute for fallbacks (``modeled_s``; ``device_s`` is the same figure).
    """
    backend = facts.current()
    if snapshot is None and not backend.is_simulator:
        placement = backend.placement()
        return {
            "calls": placement.calls_by_category,
            "ops": placement.ops_by_category,
            "device_s": NOT_MEASURED,
            "modeled_s": NOT_MEASURED,
            "fallback_s": NOT_MEASURED,
            "fallback_pct": NOT_MEASURED,
            "clocks": facts.NA,
        }
    p = placement_of(placement_log.snapshot() if snapshot is None else snapshot)
    modeled_s = (p.device_ms or 0.0) / 1e3
    share = p.fallback_share or 0.0
    return {
        "calls": p.calls_by_category,
        "ops": p.ops_by_category,
        "device_s": modeled_s,
        "modeled_s": modeled_s,
        "fallback_s": (p.fallback_ms or 0.0) / 1e3,
        "fallback_pct": 100.0 * share,
        "fallback_share": share,
        "bytes_moved": p.bytes_moved,
        "clocks": clocks.snapshot(),
    }


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Attribute device memory peaks inside the block to the named phase (``load``, ``warmup`` …).

    Raises :class:`~trn_notebook.facts.SimulatorOnlyError` on hardware.
    """
    facts.current().require_simulator(
        "trn_notebook.phase", "torch.neuron.reset_peak_memory_stats() before the phase, max_memory_allocated() after"
    )
    with allocator.phase_scope(name):
        yield


def save_trace(path: str | Path) -> Path:
    """Write the simulator's timeline (device ops, host work, sync points) as Chrome/Perfetto trace JSON.

    Open the file in https://ui.perfetto.dev or chrome://tracing. Times are the *modeled* clocks.
    Raises ``OSError`` if the file cannot be written, ``SimulatorOnlyError`` on hardware.
    """
    facts.current().require_simulator(
        "trn_notebook.save_trace",
        "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]), "
        "then prof.export_chrome_trace(path)",
    )
    path = check_writable(path, "trace")
    return write_text_atomic(path, json.dumps(clocks.chrome_trace()))


def memory_timeline() -> pd.DataFrame:
    """The bounded memory timeline (seconds since start, allocated, active, reserved, phase).

    Raises :class:`~trn_notebook.facts.SimulatorOnlyError` on hardware.
    """
    facts.current().require_simulator(
        "trn_notebook.memory_timeline", "sample torch.neuron.memory_stats() yourself, or take a memory snapshot"
    )
    import pandas as pd

    rows = list(facts.current().memory_snapshot().timeline)
    return pd.DataFrame(rows, columns=allocator_timeline_columns())


def set_chip(name: str = "trn2", *, cores: int | None = None, hbm_bytes: int | None = None) -> Any:
    """Select the simulator's chip model (see :func:`trn_notebook.device.set_chip`).

    Raises ``ValueError`` for a bad chip/cores/capacity, ``SimulatorOnlyError`` on hardware.
    """
    facts.current().require_simulator(
        "trn_notebook.set_chip", "nothing to set: the instance decides the chip (torch.neuron.get_device_properties(0))"
    )
    from .device import set_chip as device_set_chip

    return device_set_chip(name, cores=cores, hbm_bytes=hbm_bytes)


def set_memory_capacity(nbytes: int | None) -> int:
    """Set the simulated HBM capacity (see :func:`trn_notebook.device.set_memory_capacity`).

    Raises ``ValueError`` below what is reserved, ``SimulatorOnlyError`` on hardware.
    """
    facts.current().require_simulator(
        "trn_notebook.set_memory_capacity",
        "nothing to set: the real HBM capacity applies (torch.neuron.memory_stats())",
    )
    from .device import set_memory_capacity as device_set_memory_capacity

    return device_set_memory_capacity(nbytes)


def set_op_category(name: str, category: Any, reason: str = "") -> None:
    """Override where the simulator runs base op ``name`` (see :func:`trn_notebook.device.set_op_category`).

    Raises ``SimulatorOnlyError`` on hardware, where TorchNeuron decides placement.
    """
    facts.current().require_simulator(
        "trn_notebook.set_op_category",
        "TorchNeuron decides placement; TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1 narrows fallback",
    )
    from .device import set_op_category as device_set_op_category

    device_set_op_category(name, category, reason)
