"""Who owns a device block of a memory snapshot: the owner rule, in one place.

At snapshot time each live block is **identified** by tensor identity when it holds the storage of a
parameter (``p``), a gradient (``p.grad``) of a live ``nn.Module``, or a tensor in the ``state`` of a live
``torch.optim.Optimizer`` (found with the garbage collector, so no model has to be named). Every other
block is **guessed** from the stack that allocated it (optimizer code, ``Module._apply``, a compiled
graph's scratch arena, the autograd engine's thread, else activations), or, when it was allocated before
history recording started, is **unrecorded** (shown as activations: nothing is known about it).
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterable
from typing import Any

import torch

from ..device.memory.runtime import block_address

OWNERS = ("parameters", "gradients", "optimizer state", "activations", "workspace")
IDENTIFIED, GUESSED, UNRECORDED = "identified", "guessed", "unrecorded"
SOURCES = (IDENTIFIED, GUESSED, UNRECORDED)
DEFAULT_OWNER = "activations"

_OPTIM = f"{os.sep}torch{os.sep}optim{os.sep}"
_MODULE = f"{os.sep}torch{os.sep}nn{os.sep}modules{os.sep}module.py"
_EXECUTABLE = f"compiler{os.sep}executable.py"
_ROOTS = (torch.nn.Module, torch.optim.Optimizer)


def frame_owner(filename: str, name: str) -> str:
    """The owner one allocating frame points to (``""`` when it says nothing): optimizer code, the
    ``Module._apply`` of ``.to()``, or a compiled graph's executable (its scratch arena). Raises nothing."""
    if _OPTIM in filename:
        return "optimizer state"
    if filename.endswith(_MODULE) and name == "_apply":
        return "parameters"
    if filename.endswith(_EXECUTABLE):
        return "workspace"
    return ""


def thread_owner() -> str:
    """The guess when no frame says anything: the autograd engine's worker thread allocates gradients, the
    main thread activations. Raises nothing."""
    return DEFAULT_OWNER if threading.current_thread() is threading.main_thread() else "gradients"


def live_roots() -> tuple[list[torch.nn.Module], list[torch.optim.Optimizer]]:
    """Every live ``nn.Module`` and ``Optimizer`` (a garbage-collector walk; types are compared without
    touching the objects' attributes, so lazy or deprecated module globals warn nothing). Raises nothing."""
    modules: list[torch.nn.Module] = []
    optimizers: list[torch.optim.Optimizer] = []
    for obj in gc.get_objects():
        cls = type(obj)
        if issubclass(cls, _ROOTS):
            (modules if issubclass(cls, torch.nn.Module) else optimizers).append(obj)
    return modules, optimizers


def identified_blocks(
    modules: Iterable[torch.nn.Module] | None = None, optimizers: Iterable[torch.optim.Optimizer] | None = None
) -> dict[int, str]:
    """Block address -> owner for the blocks holding parameters, gradients and optimizer state (a tensor
    that is both, e.g. a parameter held in an optimizer's state, counts as the first of those). Defaults
    to every live module and optimizer (:func:`live_roots`). Raises nothing."""
    if modules is None or optimizers is None:
        found = live_roots()
        modules = found[0] if modules is None else modules
        optimizers = found[1] if optimizers is None else optimizers
    params: list[torch.Tensor] = []
    for m in modules:  # read the instance dicts: a module whose __init__ did not run (yet) has none
        own = vars(m).get("_parameters")
        params += [p for p in own.values() if isinstance(p, torch.Tensor)] if isinstance(own, dict) else []
    state: list[torch.Tensor] = []
    for o in optimizers:
        held = vars(o).get("state")
        state += [v for s in held.values() for v in _tensors(s)] if isinstance(held, dict) else []
    out: dict[int, str] = {}
    for owner, tensors in (
        ("parameters", params),
        ("gradients", [p.grad for p in params if p.grad is not None]),
        ("optimizer state", state),
    ):
        for t in tensors:
            addr = block_address(t)
            if addr is not None:
                out.setdefault(addr, owner)
    return out


def _tensors(state: Any) -> list[torch.Tensor]:
    values = state.values() if isinstance(state, dict) else [state]
    return [v for v in values if isinstance(v, torch.Tensor)]


def attribute(blocks: Iterable[dict[str, Any]], guessed: dict[int, str], identified: dict[int, str]) -> None:
    """Set ``owner`` and ``owner_source`` (identified / guessed / unrecorded) on each live block dict of a
    snapshot, in place: identity first, then the guess recorded at allocation, else unrecorded
    (:data:`DEFAULT_OWNER`). Free blocks get ``""`` for both. Raises nothing."""
    for b in blocks:
        if b["state"] == "inactive":
            b["owner"] = b["owner_source"] = ""
            continue
        addr = b["address"]
        owner = identified.get(addr)
        if owner is not None:
            b["owner"], b["owner_source"] = owner, IDENTIFIED
        elif addr in guessed:
            b["owner"], b["owner_source"] = guessed[addr] or DEFAULT_OWNER, GUESSED
        else:
            b["owner"], b["owner_source"] = DEFAULT_OWNER, UNRECORDED


def owner_totals(snapshot: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per owner (in :data:`OWNERS` order, all present): live ``bytes`` (block sizes), ``blocks``, and the
    bytes of each source (``identified`` / ``guessed`` / ``unrecorded``). A block without ``owner_source``
    (a snapshot written before this rule) counts as guessed. Raises ``KeyError`` for a malformed snapshot."""
    out = {o: {"bytes": 0, "blocks": 0, **dict.fromkeys(SOURCES, 0)} for o in OWNERS}
    for seg in snapshot["segments"]:
        for b in seg["blocks"]:
            if b["state"] == "inactive":
                continue
            owner = b.get("owner") or DEFAULT_OWNER
            row = out.setdefault(owner, {"bytes": 0, "blocks": 0, **dict.fromkeys(SOURCES, 0)})
            row["bytes"] += b["size"]
            row["blocks"] += 1
            source = b.get("owner_source") or GUESSED
            row[source if source in SOURCES else GUESSED] += b["size"]
    return out
