"""``untyped_storage().resize_(n)`` on neuron storages, with the allocator seeing every free and regrow.

PyTorch resizes a PrivateUse1 storage through ``PrivateUse1HooksInterface::resizePrivateUse1Bytes``,
which the Python hooks object cannot implement. FSDP2 frees and regathers unsharded parameters
with ``storage.resize_(0)`` / ``storage.resize_(nbytes)`` from Python, so ``UntypedStorage.resize_``
is wrapped: for a neuron storage the new bytes come from the simulated allocator (a new block),
old bytes up to the smaller size are kept, and the storage *object* keeps its identity (every
tensor viewing it sees the new bytes) by swapping data pointers with PyTorch's
``StorageBase._swap_data_ptr_``. Other devices go to PyTorch's own ``resize_``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..memory import runtime

META_RESIZED: list[Callable[[torch.UntypedStorage], None]] = []
"""Called after a shape-only (``meta``) storage is resized: the dry engine (``device/dry/session.py``) registers
its tracker's follow-up here at import, so this module never imports the dry engine above it."""


def _disarm(ptr: int) -> None:
    """Drop the ownership entry of ``ptr`` without freeing (its weak reference no longer frees)."""
    entry = runtime._owners.pop(ptr, None)
    if entry is not None:
        entry[1].ptr = -1


def resize_neuron_storage(st: torch.UntypedStorage, nbytes: int) -> torch.UntypedStorage:
    """Resize neuron storage ``st`` in place to ``nbytes`` (keeps the common prefix of its bytes).

    Raises ``ValueError`` for a negative size, ``torch.OutOfMemoryError`` when the simulated HBM is full
    (the storage is then unchanged), ``RuntimeError`` if ``st`` is not device memory of this simulator.
    """
    if nbytes < 0:
        raise ValueError(f"storage size must be >= 0, got {nbytes}")
    old = st.nbytes()
    if nbytes == old:
        return st
    old_ptr = st.data_ptr()
    entry = runtime._owners.get(old_ptr) if old_ptr else None
    if old_ptr and entry is None:
        raise RuntimeError("this neuron storage is not device memory of the trn_notebook simulator")
    fresh: Any = None
    if nbytes:
        block = runtime.allocator.malloc(nbytes) if runtime.state.accounting else None
        host = torch.empty(nbytes, dtype=torch.uint8).untyped_storage()
        keep = min(old, nbytes)
        if keep:
            dst = torch.empty(0, dtype=torch.uint8).set_(host, 0, (keep,))
            dst.copy_(torch.empty(0, dtype=torch.uint8).set_(entry[0], 0, (keep,)))  # type: ignore[index]
        fresh = runtime.new_storage(host, block)
    with runtime._lock:
        if old_ptr:
            empty = runtime._construct_storage(0, runtime.DEVICE, 0)
            st._swap_data_ptr_(empty)  # st now holds nothing; `empty` the old bytes (dies unowned)
            _disarm(old_ptr)
            if entry[2] is not None:  # type: ignore[index]
                runtime.allocator.free(entry[2])  # type: ignore[index]
        if fresh is not None:
            new_ptr = fresh.data_ptr()
            st._swap_data_ptr_(fresh)
            new_entry = runtime._owners[new_ptr]
            new_entry[1].ptr = -1  # the temporary storage object no longer owns the bytes
            new_entry[1] = runtime._storage_ref(st, new_ptr)
            new_entry[3] = None
    return st


def install() -> None:
    """Route ``torch.UntypedStorage.resize_`` of neuron storages to :func:`resize_neuron_storage` (idempotent)."""
    cls = torch.UntypedStorage
    original = cls.resize_
    if getattr(original, "_trn_notebook", False):
        return

    def resize_(self: torch.UntypedStorage, size: int) -> torch.UntypedStorage:
        if self.device.type == "neuron":
            return resize_neuron_storage(self, int(size))
        if self.device.type == "meta":  # a shape-only storage: in a dry run, its block follows the new size
            out = original(self, size)
            for resized in META_RESIZED:
                resized(self)
            return out
        return original(self, size)

    resize_._trn_notebook = True  # type: ignore[attr-defined]
    resize_.__doc__ = original.__doc__
    cls.resize_ = resize_  # type: ignore[method-assign]
