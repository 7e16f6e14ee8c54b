"""Every piece of mutable state in one registry: one reset (the read layer's
:func:`trn_notebook.facts.bundle.snapshot` takes one typed snapshot of all of it).

Each owner registers itself where it is declared, with what a reset does to it::

    state.register("compile_log", compile_log)                                  # cleared by every reset
    state.register("compiled_cells", state.Globals(__name__, "_cache", "_by_name"), reset="compiled")
    state.register("op_info_cache", state.Globals(__name__, "_infos"), reset=False)  # survives, said here

``reset`` is ``True`` (every :func:`reset`), ``False`` (never: process-lifetime handles, caches derived
from constants, live processes), ``"compiled"`` (only with ``reset(compiled=True)``, the default) or
``"op_overrides"`` (only with ``reset(op_overrides=True)``). :func:`owners` lists them; ``tests/test_state.py``
fails on any module-level mutable global of the package that no owner holds.

The original owners (each with a typed, frozen ``snapshot()``; :class:`~trn_notebook.facts.bundle.State`
bundles them):

========================  ==============================================  ===========================
owner                     what it holds                                   snapshot type
========================  ==============================================  ===========================
``placement_log``         per-op calls, costs, bytes, source line         ``PlacementSnapshot``
``clocks``                wall / modeled host / modeled device clocks     ``ClockSnapshot``
``allocator``             device memory counters, peaks, timeline, OOMs   ``MemorySnapshot``
``policy``                user overrides of op categories                 ``dict[str, OpRecord]``
``compile_log``           one record per compiled graph                   ``list[CompileRecord]``
``shape_log``             input signatures per compiled callable          ``dict[str, ShapeEntry]``
``compiled_graphs``       in-memory compiled graphs and dynamo's frames   ``int`` (graphs held)
``dry_runs``              the last dry run's figures (all modeled)        ``DryFigures | None``
========================  ==============================================  ===========================

The compiler's owners appear only once the compiler is loaded (it is imported lazily). This module
imports nothing of the package, not even for types (every layer registers into it, so it sits below all
of them).
"""

from __future__ import annotations

import copy
import sys
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from . import locks as _locks

ResetWhen = bool | Literal["compiled", "op_overrides"]


class StateOwner(Protocol):
    """What every owner of mutable state offers."""

    def snapshot(self) -> Any: ...

    def reset(self) -> None: ...


@dataclass(frozen=True)
class Registration:
    """One registered owner and what a reset does to it."""

    name: str
    owner: StateOwner
    reset: ResetWhen
    module: str  # the module that declared it


_CONTAINERS = (dict, set, list, deque)


class Globals:
    """Owner of module-level globals of one module: containers (dict, set, list, deque) and names its
    functions rebind (``global name``).

    ``snapshot()`` returns each by name (containers as shallow copies); ``reset()`` puts each back to
    what it was at registration: a container gets its initial content back in place (code holding a
    reference to it keeps working), any other value is rebound. Register it after the names exist.
    """

    def __init__(self, module: str, *names: str) -> None:
        self.module = module
        self.names = names
        mod = sys.modules[module]
        self._initial = {n: _copy(getattr(mod, n)) for n in names}
        self.lock = _locks.make("leaf", f"globals of {module}")

    def snapshot(self) -> dict[str, Any]:
        """The current value of each global, by name (containers copied)."""
        mod = sys.modules[self.module]
        with self.lock:
            return {n: _copy(getattr(mod, n)) for n in self.names}

    def reset(self) -> None:
        """Every global back to its value at registration."""
        mod = sys.modules[self.module]
        with self.lock:
            for n, initial in self._initial.items():
                value = getattr(mod, n)
                if isinstance(value, _CONTAINERS) and type(value) is type(initial):
                    value.clear()
                    if isinstance(value, dict | set):
                        value.update(initial)
                    else:
                        value.extend(initial)
                else:
                    setattr(mod, n, _copy(initial))


def _copy(value: Any) -> Any:
    return copy.copy(value) if isinstance(value, _CONTAINERS) else value


_lock = _locks.make("leaf", "state registry")
_registry: dict[str, Registration] = {}  # the registry itself (never reset; it holds every owner)


def register(name: str, owner: Any, *, reset: ResetWhen = True, module: str | None = None) -> Any:
    """Register ``owner`` (``snapshot()``/``reset()``) under ``name``; returns it.

    Registering the same name again replaces the entry (a module reloaded in a test). Raises
    ``TypeError`` for an owner without ``snapshot``/``reset`` and ``ValueError`` for an unknown ``reset``.
    """
    if not (callable(getattr(owner, "snapshot", None)) and callable(getattr(owner, "reset", None))):
        raise TypeError(f"state owner {name!r} needs snapshot() and reset(); got {type(owner).__name__}")
    if reset not in (True, False, "compiled", "op_overrides"):
        raise ValueError(f"reset= must be True, False, 'compiled' or 'op_overrides', not {reset!r}")
    if module is None:
        module = owner.module if isinstance(owner, Globals) else type(owner).__module__
    with _lock:
        _registry[name] = Registration(name, owner, reset, module)
    return owner


def registrations() -> dict[str, Registration]:
    """Every registration by name, in registration order."""
    with _lock:
        return dict(_registry)


def owners() -> dict[str, StateOwner]:
    """Every state owner by name (the compiler's only once it is loaded)."""
    return {name: r.owner for name, r in registrations().items()}


def reset(*, compiled: bool = True, op_overrides: bool = False) -> None:
    """Start an exercise over: empty the placement log, zero the clocks, restart the memory statistics
    (live tensors keep their memory), show warnings again, and empty the compile, shape and comm logs
    and the profiler's buffers — every owner registered with ``reset=True``.

    ``compiled=True`` also drops compiled graphs held in memory, dynamo's compiled frames and the
    compiled cells (the next call compiles again, from the disk cache when it has the graph);
    ``op_overrides=True`` also drops :func:`~trn_notebook.set_op_category` overrides. Raises whatever
    an owner's ``reset()`` raises (none of the package's owners raise).
    """
    wanted: set[ResetWhen] = {True}
    if compiled:
        wanted.add("compiled")
    if op_overrides:
        wanted.add("op_overrides")
    for r in registrations().values():
        if r.reset in wanted:
            r.owner.reset()


# envvars sits below this module (locks read a variable through it): its once-per-process memory of the
# malformed values it warned about registers here; it survives reset() (a value is said once per process).
from . import envvars as _envvars  # noqa: E402

register("envvars_warned", Globals(_envvars.__name__, "_warned"), reset=False)

__all__ = [
    "Globals",
    "Registration",
    "ResetWhen",
    "StateOwner",
    "owners",
    "register",
    "registrations",
    "reset",
]
