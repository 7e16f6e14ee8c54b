"""The shape log: per compiled callable, the input signatures seen and the lengths per dimension.

``snapshot()`` -> ``{name: ShapeEntry}``, each a frozen record of ``signatures`` (``{sig: count}``),
``observed`` (``{dim_key: {length: count}}``), ``policy`` (``str | None``) and ``padded``
(``{bucket: count}``), read as attributes (``entry.signatures``). Written by compiled and
bucketed callables on every call; read by magics, widgets and the tuner.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import locks as _locks
from .. import state as _state
from .ir import DTYPE_NAMES


def signature_of(t: torch.Tensor) -> str:
    """``"f32[8,128]"`` for a tensor."""
    return f"{DTYPE_NAMES.get(t.dtype, str(t.dtype))}[{','.join(str(s) for s in t.shape)}]"


_ENTRY_KEYS = ("signatures", "observed", "policy", "padded")


@dataclass(frozen=True)
class ShapeEntry:
    """What one compiled callable has been called with, at snapshot time."""

    signatures: dict[str, int] = field(default_factory=dict)
    observed: dict[str, dict[int, int]] = field(default_factory=dict)
    policy: str | None = None
    padded: dict[int, int] = field(default_factory=dict)

    @property
    def calls(self) -> int:
        """Calls observed (every signature)."""
        return sum(self.signatures.values())

    __hash__ = None  # type: ignore[assignment]


class ShapeLog:
    """Counters per callable name; thread-safe."""

    def __init__(self) -> None:
        self.lock = _locks.make("leaf", "shape log")
        self.entries: dict[str, dict[str, Any]] = {}
        self.version = 0

    def _entry(self, name: str) -> dict[str, Any]:
        e = self.entries.get(name)
        if e is None:
            e = self.entries[name] = {"signatures": {}, "observed": {}, "policy": None, "padded": {}}
        return e

    def observe(self, name: str, named_tensors: list[tuple[str, torch.Tensor]]) -> None:
        """Count one call: its signature and the length of every dimension of every tensor argument."""
        sig = ", ".join(signature_of(t) for _, t in named_tensors)
        with self.lock:
            e = self._entry(name)
            e["signatures"][sig] = e["signatures"].get(sig, 0) + 1
            obs = e["observed"]
            for arg, t in named_tensors:
                for d, n in enumerate(t.shape):
                    key = f"{arg}[{d}]"
                    hist = obs.setdefault(key, {})
                    hist[int(n)] = hist.get(int(n), 0) + 1
            self.version += 1

    def padded(self, name: str, bucket: int) -> None:
        """Count one call padded up to ``bucket``."""
        with self.lock:
            e = self._entry(name)
            e["padded"][bucket] = e["padded"].get(bucket, 0) + 1
            self.version += 1

    def set_policy(self, name: str, policy: str | None) -> None:
        """Record the bucket policy in force for ``name``."""
        with self.lock:
            self._entry(name)["policy"] = policy
            self.version += 1

    def snapshot(self) -> dict[str, ShapeEntry]:
        """A frozen copy of every entry, by callable name."""
        with self.lock:
            return {name: ShapeEntry(**copy.deepcopy(e)) for name, e in self.entries.items()}

    def reset(self) -> None:
        """Forget everything."""
        with self.lock:
            self.entries = {}
            self.version += 1


shape_log = ShapeLog()
_state.register("shape_log", shape_log)


def snapshot() -> dict[str, ShapeEntry]:
    """Module-level shortcut for ``shape_log.snapshot()``."""
    return shape_log.snapshot()


def reset() -> None:
    """Module-level shortcut for ``shape_log.reset()``."""
    shape_log.reset()
