"""The shape log: per compiled callable, the input signatures seen and the lengths per dimension.

``snapshot()`` -> ``{name: {"signatures": {sig: count}, "observed": {dim_key: {length: count}},
"policy": str | None, "padded": {bucket: count}}}``. Written by compiled and bucketed callables on
every call; read by magics, widgets and the tuner.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import torch

from .ir import DTYPE_NAMES


def signature_of(t: torch.Tensor) -> str:
    """``"f32[8,128]"`` for a tensor."""
    return f"{DTYPE_NAMES.get(t.dtype, str(t.dtype))}[{','.join(str(s) for s in t.shape)}]"


class ShapeLog:
    """Counters per callable name; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
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

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """A deep copy of every entry."""
        with self.lock:
            return copy.deepcopy(self.entries)

    def reset(self) -> None:
        """Forget everything."""
        with self.lock:
            self.entries = {}
            self.version += 1


shape_log = ShapeLog()


def snapshot() -> dict[str, dict[str, Any]]:
    """Module-level shortcut for ``shape_log.snapshot()``."""
    return shape_log.snapshot()


def reset() -> None:
    """Module-level shortcut for ``shape_log.reset()``."""
    shape_log.reset()
