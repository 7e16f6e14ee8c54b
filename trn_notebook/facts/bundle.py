"""One typed snapshot of every registered owner: the read layer's view of :mod:`trn_notebook.state`.

The registry (:mod:`trn_notebook.state`) sits below every layer and knows none of their types; this
module, in the read layer, bundles the owners' typed snapshots into one :class:`State`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import state as _state
from ..device.clocks import ClockSnapshot
from ..device.memory.allocator import MemorySnapshot
from ..device.ops.registry import OpRecord
from ..device.placement import PlacementSnapshot


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
    others: dict[str, Any] = field(default_factory=dict)  # every other owner's snapshot, by name


_TYPED = {
    "placement_log": "placement",
    "clocks": "clocks",
    "allocator": "memory",
    "policy": "op_overrides",
    "compile_log": "compiles",
    "shape_log": "shapes",
    "compiled_graphs": "compiled_graphs",
}


def snapshot() -> State:
    """One consistent-enough view of every owner (each owner's snapshot is taken under its own lock).

    Raises ``RuntimeError`` when the device's owners are not registered (``trn_notebook`` not imported).
    """
    regs = _state.registrations()
    missing = [n for n in ("placement_log", "clocks", "allocator", "policy") if n not in regs]
    if missing:
        raise RuntimeError(f"state owners {missing} are not registered: import trn_notebook first")
    typed: dict[str, Any] = {}
    others: dict[str, Any] = {}
    for name, r in regs.items():
        if name in _TYPED:
            typed[_TYPED[name]] = r.owner.snapshot()
        else:
            others[name] = r.owner.snapshot()
    return State(**typed, others=others)


__all__ = ["State", "snapshot"]
