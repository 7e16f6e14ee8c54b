"""The simulator behind the :class:`~.base.Backend` protocol: reads the device's single sources of truth.

Every read goes through an owner's ``snapshot()`` (placement log, allocator, clocks, compile log) or its
public version counters; nothing here counts on its own.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import CATEGORY_NAMES, OpPlacement, Placement

if TYPE_CHECKING:
    from ..compiler.compile_log import CompileRecord
    from ..device.memory.allocator import MemorySnapshot
    from ..device.placement import PlacementEntry


def _compiler() -> Any | None:
    """The compiler package if it was imported (nothing was compiled otherwise)."""
    return sys.modules.get("trn_notebook.compiler")


def placement_of(snapshot: Mapping[str, PlacementEntry]) -> Placement:
    """A placement-log snapshot (or a window of one) as the backend-neutral :class:`Placement`."""
    rows = {
        f"aten::{n}": OpPlacement(e.category, e.calls, e.host_s * 1e3, e.device_s * 1e3, e.h2d, e.d2h, e.source)
        for n, e in sorted(snapshot.items())
    }
    return Placement(rows, measured=True, categories=CATEGORY_NAMES)


class SimulatorBackend:
    """Placement log, allocator, clocks and compile log of the simulated ``neuron`` device."""

    name = "trn_notebook simulator"
    is_simulator = True

    def placement(self) -> Placement:
        """See :meth:`Backend.placement`; every field is measured (device times are modeled)."""
        from ..device.placement import placement_log

        return placement_of(placement_log.snapshot())

    def executed_ops(self) -> dict[str, int | None]:
        """See :meth:`Backend.executed_ops`."""
        return {op: row.calls for op, row in self.placement().items()}

    def fallback_ops(self) -> list[str]:
        """See :meth:`Backend.fallback_ops`."""
        return self.placement().fallback_ops

    def clear_op_tracking(self) -> None:
        """See :meth:`Backend.clear_op_tracking`."""
        from ..device.placement import placement_log

        placement_log.reset()

    def placement_version(self) -> Hashable | None:
        """The placement log's version counter."""
        from ..device.placement import placement_log

        return placement_log.version

    def memory_stats(self) -> dict[str, int]:
        """See :meth:`Backend.memory_stats`."""
        from ..device import module

        return module.memory_stats()

    def memory_snapshot(self) -> MemorySnapshot:
        """``allocator.snapshot()``."""
        from ..device.memory.runtime import allocator

        return allocator.snapshot()

    def memory_version(self) -> Hashable | None:
        """Allocation, free, OOM and segment-free counts, capacity, the newest timeline sample, the phases."""
        from ..device.memory.runtime import allocator

        return allocator.version()

    def reset_peak_memory(self) -> None:
        """``allocator.reset_peaks()``."""
        from ..device.memory.runtime import allocator

        allocator.reset_peaks()

    def empty_cache(self) -> int | None:
        """``allocator.empty_cache()``: the bytes released."""
        from ..device.memory.runtime import allocator

        return int(allocator.empty_cache())

    def synchronize(self) -> None:
        """``torch.neuron.synchronize()`` of the simulator."""
        from ..device.module import synchronize

        synchronize()

    def compile_records(self) -> list[CompileRecord]:
        """The compiler's compile log (empty when the compiler was never loaded)."""
        compiler = _compiler()
        return [] if compiler is None else list(compiler.compile_log.snapshot())

    def compile_summary(self) -> Any:
        """See :meth:`Backend.compile_summary` (the compile log's running count; None before the compiler loads)."""
        compiler = _compiler()
        return None if compiler is None else compiler.compile_log.compile_log.summary()

    def compile_version(self) -> Hashable | None:
        """The compile log's version counter (-1 before the compiler is loaded)."""
        compiler = _compiler()
        if compiler is None:
            return -1
        log = compiler.compile_log
        version = getattr(getattr(log, "compile_log", log), "version", None)
        return len(log.snapshot()) if version is None else version

    def cache_dir(self) -> Path | None:
        """See :meth:`Backend.cache_dir`."""
        from ..compiler.disk_cache import cache_dir, enabled

        return cache_dir() if enabled() else None

    def cache_entries(self) -> list[dict[str, Any]]:
        """The compile cache's index (``trn_notebook.compiler.disk_cache.cache_entries()``)."""
        from ..compiler.disk_cache import cache_entries

        return list(cache_entries())

    def device_properties(self) -> dict[str, Any]:
        """See :meth:`Backend.device_properties` (``simulated=True``)."""
        from ..device import module

        return dict(vars(module.get_device_properties(0)))

    def device_time_s(self) -> float | None:
        """Modeled device seconds (the simulator's device clock)."""
        from ..device.clocks import clocks

        return float(clocks.snapshot().sim_device_s)

    def reset_tracking(self) -> list[str]:
        """Nothing beyond the simulator's owners (``trn_notebook.reset()`` clears those)."""
        return []

    def require_simulator(self, feature: str, instead: str) -> None:
        """Always allowed on the simulator."""
