"""Every state owner of the simulator in one place: one snapshot, one reset.

The owners (each with ``snapshot()`` and ``reset()``):

========================  ==============================================  ===========================
owner                     what it holds                                   snapshot type
========================  ==============================================  ===========================
``placement_log``         per-op calls, costs, bytes, source line         :class:`PlacementSnapshot`
``clocks``                wall / modeled host / modeled device clocks     :class:`ClockSnapshot`
``allocator``             device memory counters, peaks, timeline, OOMs   :class:`MemorySnapshot`
``policy``                user overrides of op categories                 ``dict[str, OpRecord]``
``compile_log``           one record per compiled graph                   ``list[CompileRecord]``
``shape_log``             input signatures per compiled callable          ``dict[str, ShapeEntry]``
``compiled_graphs``       in-memory compiled graphs and dynamo's frames   ``int`` (graphs held)
``dry_runs``              the last dry run's figures (all modeled)        ``DryFigures | None``
========================  ==============================================  ===========================

The compiler's owners appear only once the compiler is loaded (it is imported lazily).
:func:`reset` clears what a workshop exercise needs cleared; ``%trn reset`` calls it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Protocol

from .device import dispatch
from .device.allocator import MemorySnapshot
from .device.clocks import ClockSnapshot, clocks
from .device.dryrun import DryFigures, dry_runs
from .device.placement import PlacementSnapshot, placement_log
from .device.policy import policy
from .device.registry import OpRecord
from .device.runtime import allocator


class StateOwner(Protocol):
    """What every owner of mutable state offers."""

    def snapshot(self) -> Any: ...

    def reset(self) -> None: ...


class _CompiledGraphs:
    """The compiler's in-process caches: planned graphs by cache key, dynamo's compiled frames, bundles."""

    def snapshot(self) -> int:
        from .compiler import backend

        return len(backend._memory)

    def reset(self) -> None:
        import torch

        from .compiler import backend, contracts
        from .compiler.artifacts import artifacts

        torch._dynamo.reset()
        backend.clear_memory_cache()
        artifacts.reset()
        contracts._warned_modes.clear()


@dataclass(frozen=True)
class State:
    """A snapshot of every owner (compiler fields are ``None`` while the compiler is not loaded)."""

    placement: PlacementSnapshot
    clocks: ClockSnapshot
    memory: MemorySnapshot
    op_overrides: dict[str, OpRecord]
    compiles: list[Any] | None = None
    shapes: dict[str, Any] | None = None
    compiled_graphs: int | None = None
    dry_run: DryFigures | None = None  # the last dry run's figures: modeled, never mixed with the above


def _compiler_loaded() -> bool:
    return "trn_notebook.compiler" in sys.modules


def owners() -> dict[str, StateOwner]:
    """Every state owner by name (the compiler's only once it is loaded)."""
    found: dict[str, StateOwner] = {
        "placement_log": placement_log,
        "clocks": clocks,
        "allocator": allocator,
        "policy": policy,
        "dry_runs": dry_runs,
    }
    if _compiler_loaded():
        from .compiler.compile_log import compile_log
        from .compiler.shape_log import shape_log

        found.update(compile_log=compile_log, shape_log=shape_log, compiled_graphs=_CompiledGraphs())
    return found


def snapshot() -> State:
    """One consistent-enough view of every owner (each owner's snapshot is taken under its own lock)."""
    o = owners()
    compiler = _compiler_loaded()
    return State(
        placement=placement_log.snapshot(),
        clocks=clocks.snapshot(),
        memory=allocator.snapshot(),
        op_overrides=policy.snapshot(),
        compiles=o["compile_log"].snapshot() if compiler else None,
        shapes=o["shape_log"].snapshot() if compiler else None,
        compiled_graphs=o["compiled_graphs"].snapshot() if compiler else None,
        dry_run=dry_runs.snapshot(),
    )


def reset(*, compiled: bool = True, op_overrides: bool = False) -> None:
    """Start an exercise over: empty the placement log, zero the clocks, restart the memory statistics
    (live tensors keep their memory), show fallback warnings again, and empty the compile and shape logs.

    ``compiled=True`` also drops compiled graphs held in memory and dynamo's compiled frames (the next
    call compiles again, from the disk cache when it has the graph); ``op_overrides=True`` also drops
    :func:`~trn_notebook.set_op_category` overrides. Raises nothing for owners not loaded yet.
    """
    placement_log.reset()
    clocks.reset()
    allocator.reset()
    dispatch.reset_warnings()
    dry_runs.reset()
    if op_overrides:
        policy.reset()
    if _compiler_loaded():
        o = owners()
        o["compile_log"].reset()
        o["shape_log"].reset()
        if compiled:
            o["compiled_graphs"].reset()


__all__ = ["State", "StateOwner", "owners", "reset", "snapshot"]
