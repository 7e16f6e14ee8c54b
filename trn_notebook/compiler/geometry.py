"""Geometry checks of IR results: no tensor a node produces may reach outside the storage it views.

Run on fake tensors before a graph read from disk or a bundle is accepted (:func:`.cache.check_runs`).
Under ``FakeTensorMode`` an ``as_strided`` view larger than its storage does not fail: the fake
(meta) storage silently grows. So the check remembers each storage's size when it first appears
(a graph input, or a node's fresh result) and measures every later view of it against that size:
an IR declaring a view of 65,536 floats over a 4-float input is refused before it can read or
write host memory beyond the input when run.
"""

from __future__ import annotations

from typing import Any

import torch


class StorageSizes:
    """The size in bytes of every storage seen so far, keyed by the storage's identity."""

    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}

    def note(self, value: Any) -> None:
        """Remember the storage size of each tensor in ``value`` not seen before."""
        for t in _tensors(value):
            self.sizes.setdefault(_key(t), t.untyped_storage().nbytes())

    def check(self, value: Any, where: str) -> None:
        """Raise ``ValueError`` if a tensor in ``value`` has a negative stride or offset, or reaches past the end
        of its storage as first seen (offset + Σ (size-1)·stride, in bytes); then remember new storages."""
        for t in _tensors(value):
            have = self.sizes.setdefault(_key(t), t.untyped_storage().nbytes())
            if t.numel() == 0:
                continue
            strides = t.stride()
            if any(s < 0 for s in strides) or t.storage_offset() < 0:
                raise ValueError(f"{where} produced a tensor with negative strides or offset {tuple(strides)}")
            last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, strides))
            need = (last + 1) * t.element_size()
            if need > have:
                raise ValueError(
                    f"{where} produced a view reaching byte {need:,} of a {have:,}-byte storage (shape "
                    f"{tuple(t.shape)}, strides {tuple(strides)}, offset {t.storage_offset()}): outside its tensors"
                )


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _key(t: torch.Tensor) -> int:
    return int(t.untyped_storage()._cdata)
