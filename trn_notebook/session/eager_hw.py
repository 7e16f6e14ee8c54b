"""The ``%%trn eager`` window on real hardware: what TorchNeuron reports about one block of eager code.

TorchNeuron names the ops that ran and fell back (with call counts) and the memory counters; sync points,
launches and modeled times are the simulator's and read "n/a". The wall time is measured around the block.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import TracebackType

import torch

from .. import facts
from ..display.results import Card, Result, Table, fmt_bytes, fmt_s
from ..facts.base import NA, NOT_MEASURED, Placement, shown

TOP_FALLBACKS = 10


@dataclass(repr=False)
class HardwareEagerReport(Result):
    """What one eager block did on hardware (placement and memory differences over the block)."""

    label: str
    backend: str
    ops: Placement
    memory_before: int
    memory_after: int
    peak_allocated: int
    wall_s: float
    failed: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def calls_by_category(self) -> dict[str, int | str]:
        """Calls per category over the block (NOT_MEASURED when TorchNeuron gives no counts)."""
        return self.ops.calls_by_category

    def parts(self) -> list[Result]:
        c = self.calls_by_category
        card = Card(
            f"{self.label}{' (failed)' if self.failed else ''}",
            [
                ("ops", f"{len(self.ops)} distinct, {self.ops.total_calls} calls"),
                ("placement (calls)", f"native {c['native']} · fallback {c['cpu_fallback']}"),
                ("sync points", f"{NA} (the simulator's clock records them)"),
                ("launches", NA),
                (
                    "memory",
                    f"{fmt_bytes(self.memory_before)} → {fmt_bytes(self.memory_after)} "
                    f"(Δ {fmt_bytes(self.memory_after - self.memory_before)}, peak {fmt_bytes(self.peak_allocated)})",
                ),
                ("modeled time", f"{NOT_MEASURED} (profile the block with torch.profiler)"),
                ("wall time", f"{fmt_s(self.wall_s)} (measured on {self.backend})"),
            ],
            self.notes,
        )
        out: list[Result] = [card]
        falls = [(op, row) for op, row in self.ops.items() if row.category == "cpu_fallback"]
        if falls:
            rows = [(op, shown(row.calls), NOT_MEASURED, shown(row.source)) for op, row in falls[:TOP_FALLBACKS]]
            out.append(Table("CPU fallbacks", ["op", "calls", "cost", "source"], rows))
        return out


class HardwareEagerWindow:
    """The hardware counterpart of :class:`~trn_notebook.session.eager.EagerWindow` (same use)."""

    def __init__(self, label: str, *, on_device: bool = True) -> None:
        self.label, self.on_device = label, on_device
        self.report: HardwareEagerReport | None = None

    def __enter__(self) -> HardwareEagerWindow:
        self._backend = facts.current()
        self._prev_device = torch.get_default_device()
        if self.on_device:
            torch.set_default_device(torch.device("neuron", 0))
        self._backend.reset_peak_memory()
        self._ops = self._backend.placement()
        self._memory = self._backend.memory_snapshot().counters.allocated
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._backend.synchronize()
        wall = time.perf_counter() - self._t0
        ops = self._backend.placement().since(self._ops)
        if self.on_device:
            torch.set_default_device(self._prev_device)
        memory = self._backend.memory_snapshot().counters
        self.report = HardwareEagerReport(
            label=self.label,
            backend=self._backend.name,
            ops=ops,
            memory_before=self._memory,
            memory_after=memory.allocated,
            peak_allocated=memory.peak_allocated,
            wall_s=wall,
            failed=et is not None,
        )
