"""The simulator behind the :class:`~.base.Backend` protocol: reads the device's single sources of truth."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .base import PLACEMENT_FIELDS


class SimulatorBackend:
    """Placement log, allocator, clocks and compile log of the simulated ``neuron`` device."""

    name = "trn_notebook simulator"
    is_simulator = True

    def placement(self) -> dict[str, dict[str, Any]]:
        """See :meth:`Backend.placement`; every field is measured (device times are modeled)."""
        from ..device.placement import CALLS, CATEGORY, D2H, DEVICE_S, H2D, HOST_S, SOURCE, placement_log

        return {
            f"aten::{n}": dict(
                zip(
                    PLACEMENT_FIELDS,
                    (e[CATEGORY], e[CALLS], e[HOST_S] * 1e3, e[DEVICE_S] * 1e3, e[H2D], e[D2H], e[SOURCE]),
                )
            )
            for n, e in sorted(placement_log.snapshot().items())
        }

    def executed_ops(self) -> dict[str, int | None]:
        """See :meth:`Backend.executed_ops`."""
        return {op: row["calls"] for op, row in self.placement().items()}

    def fallback_ops(self) -> list[str]:
        """See :meth:`Backend.fallback_ops`."""
        return sorted(op for op, row in self.placement().items() if row["category"] == "cpu_fallback")

    def clear_op_tracking(self) -> None:
        """See :meth:`Backend.clear_op_tracking`."""
        from ..device.placement import placement_log

        placement_log.reset()

    def memory_stats(self) -> dict[str, int]:
        """See :meth:`Backend.memory_stats`."""
        from ..device import module

        return module.memory_stats()

    def compile_records(self) -> list[dict[str, Any]]:
        """The compiler's compile log (empty when the compiler was never loaded)."""
        import sys

        if "trn_notebook.compiler" not in sys.modules:
            return []
        from ..compiler import compile_log

        return list(compile_log.snapshot())

    def cache_dir(self) -> Path | None:
        """See :meth:`Backend.cache_dir`."""
        if os.environ.get("TORCH_NEURONX_DISABLE_NEFF_CACHE") == "1":
            return None
        from ..compiler.cache import cache_dir

        return cache_dir()

    def device_properties(self) -> dict[str, Any]:
        """See :meth:`Backend.device_properties` (``simulated=True``)."""
        from ..device import module

        return dict(vars(module.get_device_properties(0)))

    def device_time_s(self) -> float | None:
        """Modeled device seconds (the simulator's device clock)."""
        from ..device.clocks import clocks

        return float(clocks.snapshot()["sim_device_s"])

    def require_simulator(self, feature: str, instead: str) -> None:
        """Always allowed on the simulator."""
