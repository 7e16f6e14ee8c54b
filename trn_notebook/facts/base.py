"""The :class:`Backend` protocol: one interface to the facts every view shows, simulator or hardware.

Placement comes as a typed :class:`Placement` (a mapping op → :class:`OpPlacement`, ``None`` where the
backend does not measure a figure) whose aggregations every view reads; memory as the allocator's own
:class:`~trn_notebook.device.allocator.MemorySnapshot` type (on hardware built from ``memory_stats()``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..compiler.compile_log import CompileRecord, CompileSummary
    from ..device.memory.allocator import MemorySnapshot

NOT_MEASURED = "not measured"  # a figure the live backend does not measure (e.g. per-op cost on hardware)
NA = "n/a"  # a fact that does not exist on the live backend

# One op's row in the placement view; host_ms/device_ms/bytes_* are None where not measured.
PLACEMENT_FIELDS = ("category", "calls", "host_ms", "device_ms", "bytes_h2d", "bytes_d2h", "source")
CATEGORY_NAMES = ("native", "cpu_fallback", "unsupported", "host_only")


class SimulatorOnlyError(RuntimeError):
    """A simulator-only feature (chip model, cost model, capacity override …) was used on real hardware."""


def shown(value: Any, missing: str = NOT_MEASURED) -> Any:
    """``value``, or ``missing`` ("not measured") when it is ``None``."""
    return missing if value is None else value


@dataclass(frozen=True, slots=True)
class OpPlacement:
    """One op as the live backend reports it; ``None`` where it does not measure the figure."""

    category: str
    calls: int | None = None
    host_ms: float | None = None
    device_ms: float | None = None
    bytes_h2d: int | None = None
    bytes_d2h: int | None = None
    source: str | None = None

    @property
    def bytes_moved(self) -> int | None:
        """Bytes copied both ways (None when not measured)."""
        if self.bytes_h2d is None or self.bytes_d2h is None:
            return None
        return self.bytes_h2d + self.bytes_d2h

    def values(self) -> list[Any]:
        """The fields in :data:`PLACEMENT_FIELDS` order."""
        return [getattr(self, f.name) for f in fields(self)]


@dataclass(frozen=True, eq=False)
class Placement(Mapping[str, OpPlacement]):
    """Placement by op (``aten::name``) from the live backend; aggregations computed once."""

    rows: dict[str, OpPlacement] = field(default_factory=dict)
    measured: bool = True  # False: costs, transfers and sources are not measured (hardware)
    categories: tuple[str, ...] = ("native", "cpu_fallback")  # always present in the aggregations

    def __getitem__(self, name: str) -> OpPlacement:
        return self.rows[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @cached_property
    def calls_by_category(self) -> dict[str, int | str]:
        """Calls per category (every one of :attr:`categories` present); NOT_MEASURED if a count is missing."""
        calls: dict[str, int | str] = dict.fromkeys(self.categories, 0)
        for row in self.rows.values():
            known = calls.get(row.category, 0)
            if row.calls is None or not isinstance(known, int):
                calls[row.category] = NOT_MEASURED
            else:
                calls[row.category] = known + row.calls
        return calls

    @cached_property
    def ops_by_category(self) -> dict[str, int]:
        """Distinct ops per category (every one of :attr:`categories` present)."""
        ops = dict.fromkeys(self.categories, 0)
        for row in self.rows.values():
            ops[row.category] = ops.get(row.category, 0) + 1
        return ops

    @cached_property
    def total_calls(self) -> int | str:
        """Calls of every op, NOT_MEASURED when a count is missing."""
        values = list(self.calls_by_category.values())
        return sum(v for v in values if isinstance(v, int)) if all(isinstance(v, int) for v in values) else NOT_MEASURED

    @cached_property
    def fallback_ops(self) -> list[str]:
        """Sorted names of the ops that ran through the CPU fallback."""
        return sorted(op for op, row in self.rows.items() if row.category == "cpu_fallback")

    @cached_property
    def fallbacks(self) -> list[tuple[str, OpPlacement]]:
        """CPU-fallback ops, costliest first by modeled time (never by the laptop's wall time); by name
        when costs are not measured."""
        rows = [(op, r) for op, r in self.rows.items() if r.category == "cpu_fallback"]
        return sorted(rows, key=lambda r: (r[1].device_ms or 0.0, r[0]), reverse=True)

    @cached_property
    def host_ms(self) -> float | None:
        """Host milliseconds of every op (None when not measured)."""
        return sum(r.host_ms or 0.0 for r in self.rows.values()) if self.measured else None

    @cached_property
    def fallback_ms(self) -> float | None:
        """Modeled milliseconds of the CPU fallbacks (None when not measured)."""
        if not self.measured:
            return None
        return sum(r.device_ms or 0.0 for r in self.rows.values() if r.category == "cpu_fallback")

    @cached_property
    def bytes_moved(self) -> int | None:
        """Bytes copied between host and device by every op (None when not measured)."""
        return sum(r.bytes_moved or 0 for r in self.rows.values()) if self.measured else None

    def only(self, category: str) -> Placement:
        """The ops of one category (all of them for ``""``)."""
        if not category:
            return self
        rows = {op: r for op, r in self.rows.items() if r.category == category}
        return Placement(rows, measured=self.measured, categories=self.categories)

    @cached_property
    def fallback_share(self) -> float | None:
        """Share of the modeled time spent in CPU fallbacks (None when not measured, 0 when nothing ran)."""
        total, falls = self.device_ms, self.fallback_ms
        if total is None or falls is None:
            return None
        return falls / total if total > 0 else 0.0

    @cached_property
    def device_ms(self) -> float | None:
        """Modeled milliseconds of every op (None when not measured)."""
        if not self.measured:
            return None
        return sum(r.device_ms or 0.0 for r in self.rows.values())

    def since(self, before: Placement) -> Placement:
        """Ops whose calls moved since ``before`` (a per-cell window); calls are differences where counted."""
        out: dict[str, OpPlacement] = {}
        for op, row in self.rows.items():
            prev = before.rows.get(op)
            if prev is None:
                out[op] = row
            elif row.calls is not None and prev.calls is not None and row.calls != prev.calls:
                out[op] = OpPlacement(
                    row.category,
                    row.calls - prev.calls,
                    host_ms=_minus(row.host_ms, prev.host_ms),
                    device_ms=_minus(row.device_ms, prev.device_ms),
                    bytes_h2d=_minus(row.bytes_h2d, prev.bytes_h2d),
                    bytes_d2h=_minus(row.bytes_d2h, prev.bytes_d2h),
                    source=row.source,
                )
        return Placement(out, measured=self.measured, categories=self.categories)


def _minus(after: Any, before: Any) -> Any:
    return None if after is None or before is None else after - before


@runtime_checkable
class Backend(Protocol):
    """What ``api.py``, the session layer, magics, widgets, the status bar and the report read."""

    name: str  # shown to people: "trn_notebook simulator" or "TorchNeuron (torch_neuronx 2.14.0)"
    is_simulator: bool

    def placement(self) -> Placement:
        """Placement by ``aten::op`` since the last clear (None for what is not measured)."""
        ...

    def executed_ops(self) -> dict[str, int | None]:
        """``aten::op`` → calls (None when the backend only names the ops)."""
        ...

    def fallback_ops(self) -> list[str]:
        """Sorted ``aten::op`` names that ran through the CPU fallback."""
        ...

    def clear_op_tracking(self) -> None:
        """Forget the placement records."""
        ...

    def placement_version(self) -> Hashable | None:
        """A cheap token that moves when placement moves (None: unknown, re-read every time)."""
        ...

    def memory_stats(self) -> dict[str, int]:
        """``torch.neuron.memory_stats()`` (CUDA-style keys)."""
        ...

    def memory_snapshot(self) -> MemorySnapshot:
        """Counters, capacity and (simulator only) phase peaks, timeline and OOM events."""
        ...

    def memory_version(self) -> Hashable | None:
        """A cheap token that moves when memory moves (None: unknown)."""
        ...

    def reset_peak_memory(self) -> None:
        """Set the memory peaks to the current values."""
        ...

    def empty_cache(self) -> int | None:
        """Release cached device memory; bytes released (None when the backend does not say)."""
        ...

    def synchronize(self) -> None:
        """Wait for the device queue to drain."""
        ...

    def compile_records(self) -> list[CompileRecord]:
        """One typed record per compiled graph (on hardware built from ``get_dynamo_metrics``; the fields it
        does not carry are empty or None)."""
        ...

    def compile_version(self) -> Hashable | None:
        """A cheap token that moves with the compile records (None: unknown)."""
        ...

    def compile_summary(self) -> CompileSummary | None:
        """Cache results and compile seconds of the compile records, counted once by the compile log's
        rule (``compiler.compile_log.cache_hit``); None when the backend's records do not say hit or miss."""
        ...

    def cache_dir(self) -> Path | None:
        """The persistent compile (NEFF) cache directory in force, None when disabled."""
        ...

    def cache_entries(self) -> list[dict[str, Any]]:
        """Entries of the persistent cache: ``key``, ``graph_name``, ``kind``, ``input_signature``, ``bytes``,
        ``created`` (values the backend does not know are NA)."""
        ...

    def device_properties(self) -> dict[str, Any]:
        """``torch.neuron.get_device_properties(0)`` as a dict (``name``, ``total_memory`` …)."""
        ...

    def device_time_s(self) -> float | None:
        """Modeled device seconds so far (simulator), None where device time is not modeled."""
        ...

    def reset_tracking(self) -> list[str]:
        """Restart what the backend tracks beyond the simulator's owners (``%trn reset``); what was reset."""
        ...

    def require_simulator(self, feature: str, instead: str) -> None:
        """Raise :class:`SimulatorOnlyError` naming ``feature`` and what to use ``instead`` on hardware."""
        ...


def simulator_only(feature: str, instead: str, backend_name: str) -> SimulatorOnlyError:
    """The error for using ``feature`` on ``backend_name``, with the hardware alternative."""
    return SimulatorOnlyError(
        f"{feature} is simulator-only: it changes or reads the trn_notebook simulator's models, and the live "
        f"backend is {backend_name}. On hardware: {instead}. (trn_notebook.port_check(path) lists every such call.)"
    )
