"""The shape-only allocator of a dry run: the real caching allocator's rules, no bytes behind it.

:class:`DryAllocator` *is* :class:`~trn_notebook.device.allocator.CachingAllocator` (same size
classes, segments, caching, best fit, splitting, phases, retry-then-OOM rule and counters); the only
rule it drops is the simulator's host-memory guard, because no host bytes back a dry run.
:class:`StorageTracker` gives each fake ``neuron`` storage one block for its life: a block is taken
when a storage is first seen in an op's result (as ``runtime.wrap`` does for a real result) and
returned when the storage dies (a weak reference, as ``runtime`` observes real storages).

For memory by category the tracker also keeps, per live storage, an identity ``(key, first_seq)``
(the C++ address and the allocation number when it was first seen: an address reused after a
storage dies is a new identity), labels given while the run goes (``label``: collective buffers,
activations saved for backward) and the live set at the allocated peak (taken lazily at the first
free after a new peak, so a growing forward pass costs one copy per local maximum, not per block).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch

from ..memory.allocator import Block, CachingAllocator, segment_size
from ..source_lines import user_source

Identity = tuple[int, int]  # (storage address, allocation number when first seen)


@dataclass(frozen=True)
class Crossing:
    """Where a dry run first needed more than the modeled capacity (the real device would stop there)."""

    asked: int  # bytes the allocation asked for
    allocated: int  # bytes allocated just before it
    reserved: int  # bytes reserved just before it
    capacity: int  # the modeled HBM capacity of one logical core
    phase: str  # the allocator's phase then (``run.phase(...)``)
    source: str  # the user's source line that asked


class DryAllocator(CachingAllocator):
    """A :class:`CachingAllocator` for shape-only storages: every rule but the host-memory guard.

    Over capacity (``strict=False``, the default) is a finding, not the end: the first allocation the real
    allocator would refuse (after its free-the-cache-and-retry) is kept as :attr:`crossing` and counted as one
    OOM; from then on segments are reserved past the capacity without the retry, so the run goes on to the
    peak it needs. ``strict=True`` raises :class:`OutOfDeviceMemory` at the crossing, as the device does.
    """

    def __init__(self, capacity: int, *, strict: bool = False) -> None:
        super().__init__(capacity)
        self.strict = strict
        self.crossing: Crossing | None = None

    def _check_host(self, nbytes: int) -> None:
        """No host bytes back a dry run: only the modeled HBM capacity can run out."""
        return

    def _new_segment_block(self, size: int, small: bool, nbytes: int) -> Block:
        if self.crossing is not None:  # already past the capacity: no retry, no second OOM
            return self._add_segment(segment_size(size), small)
        return super()._new_segment_block(size, small, nbytes)

    def _over_capacity(self, nbytes: int, size: int) -> None:
        if self.strict:
            super()._over_capacity(nbytes, size)
            return
        c = self.counters
        self._count_oom(nbytes)
        self.crossing = Crossing(nbytes, c.allocated, c.reserved, self.capacity, self.phase, user_source())


class StorageTracker:
    """One :class:`DryAllocator` block per live fake storage, keyed by the storage's C++ address."""

    def __init__(self, allocator: DryAllocator) -> None:
        self.allocator = allocator
        self.blocks: dict[int, Block] = {}
        self.first_seq: dict[int, int] = {}
        self.labels: dict[Identity, str] = {}
        self.seq = 0
        self.peak = 0
        self.peak_phase = "default"
        self.peak_live: dict[Identity, int] = {}  # identity -> block bytes at the allocated peak
        self._dirty = False

    def identity(self, t: torch.Tensor) -> Identity | None:
        """The identity of ``t``'s storage while it holds a block (``None`` otherwise)."""
        key = t.untyped_storage()._cdata
        seq = self.first_seq.get(key)
        return None if seq is None else (key, seq)

    def label(self, t: torch.Tensor, category: str, *, replace: bool = False) -> None:
        """Give ``t``'s storage a memory category (kept until it dies; the first label wins unless ``replace``)."""
        ident = self.identity(t)
        if ident is not None and (replace or ident not in self.labels):
            self.labels[ident] = category

    def _grew(self) -> None:
        allocated = self.allocator.counters.allocated
        if allocated > self.peak:
            self.peak = allocated
            self.peak_phase = self.allocator.phase
            self._dirty = True

    def _before_free(self, also: tuple[int, int] | None = None) -> None:
        if self._dirty:  # the live set right now is the live set at the peak
            self._dirty = False
            fs = self.first_seq
            self.peak_live = {(k, fs[k]): b.size for k, b in self.blocks.items()}
            if also is not None:  # a block about to be freed that is no longer in `blocks` (a regrown storage)
                ident = (also[0], fs[also[0]])
                self.peak_live[ident] = self.peak_live.get(ident, 0) + also[1]

    def finish_peak(self) -> None:
        """Take the peak's live set if the peak is the current state (call before reading :attr:`peak_live`)."""
        self._before_free()

    def hold_scratch(self, nbytes: int) -> None:
        """A compiled graph's scratch arena: a block held while the graph runs, then freed (no storage owns it).

        When it sets a new allocated peak, the peak's live set includes it (under an identity of its own,
        unlabelled: a temporary), so the categories still sum to the peak. Raises ``OutOfDeviceMemory``.
        """
        block = self.allocator.malloc(nbytes)
        self._grew()
        if self._dirty:
            self._before_free()
            self.peak_live[(-1, -1)] = block.size
        self.allocator.free(block)

    def track(self, t: torch.Tensor) -> None:
        """Give ``t``'s storage a block if it has none yet (a new result); raises ``OutOfDeviceMemory``."""
        st = t.untyped_storage()
        key = st._cdata
        if key in self.blocks:
            return
        nbytes = st.nbytes()
        if nbytes == 0:
            return
        self._take(st, key, nbytes)

    def _take(self, st: torch.UntypedStorage, key: int, nbytes: int) -> None:
        """A block of ``nbytes`` for storage ``st`` (keyed ``key``), released when the storage dies."""
        block = self.allocator.malloc(nbytes)
        with self.allocator.section:
            self.blocks[key] = block
            self.seq += 1
            self.first_seq.setdefault(key, self.seq)
        self._grew()
        weakref.finalize(st, self.allocator.release_from_finalizer, self._release, key, block)

    def retrack(self, t: torch.Tensor) -> None:
        """After an in-place op: a storage whose size changed (``resize_``) gets a new block, the old one freed."""
        self.retrack_storage(t.untyped_storage())

    def retrack_storage(self, st: torch.UntypedStorage) -> None:
        """:meth:`retrack` of a storage (FSDP2's ``storage.resize_(0)`` / ``resize_(n)``)."""
        key = st._cdata
        block = self.blocks.get(key)
        if block is None:
            nbytes = st.nbytes()
            if nbytes:
                self._take(st, key, nbytes)
            return
        nbytes = st.nbytes()
        if nbytes == block.requested:
            return
        fresh = self.allocator.malloc(nbytes) if nbytes else None  # grown into new memory, then the old freed
        with self.allocator.section:
            if fresh is None:
                del self.blocks[key]  # the storage lives on (resized to 0): its identity and labels stay
            else:
                self.blocks[key] = fresh
                weakref.finalize(st, self.allocator.release_from_finalizer, self._release, key, fresh)
        self._grew()
        self._before_free(also=(key, block.size))
        self.allocator.free(block)

    def _release(self, key: int, block: Block) -> None:
        if not block.free:
            self._before_free()
        with self.allocator.section:
            if self.blocks.get(key) is block:
                del self.blocks[key]
            if key not in self.blocks:  # the storage died: its identity goes (labels stay for the peak's live set)
                self.first_seq.pop(key, None)
        self.allocator.free(block)  # a no-op for a block already freed by retrack

    def live(self) -> int:
        """Number of fake storages holding a block."""
        return len(self.blocks)
