"""The shape-only allocator of a dry run: the real caching allocator's rules, no bytes behind it.

:class:`DryAllocator` *is* :class:`~trn_notebook.device.allocator.CachingAllocator` (same size
classes, segments, caching, best fit, splitting, phases, retry-then-OOM rule and counters); the only
rule it drops is the simulator's host-memory guard, because no host bytes back a dry run.
:class:`StorageTracker` gives each fake ``neuron`` storage one block for its life: a block is taken
when a storage is first seen in an op's result (as ``runtime.wrap`` does for a real result) and
returned when the storage dies (a weak reference, as ``runtime`` observes real storages).
"""

from __future__ import annotations

import threading
import weakref

import torch

from .allocator import Block, CachingAllocator


class DryAllocator(CachingAllocator):
    """A :class:`CachingAllocator` for shape-only storages: every rule but the host-memory guard."""

    def _check_host(self, nbytes: int) -> None:
        """No host bytes back a dry run: only the modeled HBM capacity can run out."""
        return


class StorageTracker:
    """One :class:`DryAllocator` block per live fake storage, keyed by the storage's C++ address."""

    def __init__(self, allocator: DryAllocator) -> None:
        self.allocator = allocator
        self.lock = threading.Lock()
        self.blocks: dict[int, Block] = {}

    def track(self, t: torch.Tensor) -> None:
        """Give ``t``'s storage a block if it has none yet (a new result); raises ``OutOfDeviceMemory``."""
        st = t.untyped_storage()
        key = st._cdata
        if key in self.blocks:
            return
        nbytes = st.nbytes()
        if nbytes == 0:
            return
        block = self.allocator.malloc(nbytes)
        with self.lock:
            self.blocks[key] = block
        weakref.finalize(st, self._release, key, block)

    def retrack(self, t: torch.Tensor) -> None:
        """After an in-place op: a storage whose size changed (``resize_``) gets a new block, the old one freed."""
        st = t.untyped_storage()
        key = st._cdata
        block = self.blocks.get(key)
        if block is None:
            self.track(t)
            return
        nbytes = st.nbytes()
        if nbytes == block.requested:
            return
        fresh = self.allocator.malloc(nbytes) if nbytes else None  # grown into new memory, then the old freed
        self.allocator.free(block)
        with self.lock:
            if fresh is None:
                del self.blocks[key]
            else:
                self.blocks[key] = fresh
                weakref.finalize(st, self._release, key, fresh)

    def _release(self, key: int, block: Block) -> None:
        with self.lock:
            if self.blocks.get(key) is block:
                del self.blocks[key]
        self.allocator.free(block)  # a no-op for a block already freed by retrack

    def live(self) -> int:
        """Number of fake storages holding a block."""
        return len(self.blocks)
