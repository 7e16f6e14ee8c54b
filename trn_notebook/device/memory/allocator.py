"""A simulated caching segment allocator: the device memory counters' single source of truth.

Semantics follow TorchNeuron's memory guide (shared/reference/torchneuron.md, Memory), which mirrors
PyTorch's CUDA caching allocator:

* requests under 1 MiB come from a *small pool* of 2 MiB segments; larger ones from a *large pool*
  (20 MiB segments for requests under 10 MiB, a segment of the rounded size above that);
* requests round up to a size class below 16 MiB (multiples of 256 B — the minimum block — under
  1 MiB, multiples of 128 KiB up to 16 MiB); larger requests are only aligned to 256 B;
* freed blocks stay cached (reserved) until :meth:`CachingAllocator.empty_cache`;
* ``reserved >= allocated >= active`` always: *active* counts the exact bytes of live tensors,
  *allocated* their rounded blocks, *reserved* the segments.

No bytes are stored here (the simulator keeps them in host memory): this does the accounting, addresses, OOM.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ...display.format import fmt_bytes
from . import hostmem
from .blocks import Block, Pool, Segment, blocks, free_blocks
from .sections import SectionedLock

KiB = 1 << 10
MiB = 1 << 20
MIN_BLOCK = 256
SMALL_REQUEST = 1 * MiB
SMALL_SEGMENT = 2 * MiB
LARGE_SEGMENT = 20 * MiB
LARGE_SEGMENT_THRESHOLD = 10 * MiB
ROUND_LIMIT = 16 * MiB
LARGE_CLASS = 128 * KiB
TIMELINE_CAPACITY = 4_096
_perf = time.perf_counter


def round_size(nbytes: int) -> int:
    """Block size for a request of ``nbytes`` (size classes below 16 MiB, 256 B alignment above)."""
    if nbytes <= MIN_BLOCK:
        return MIN_BLOCK
    if nbytes < SMALL_REQUEST:
        return -(-nbytes // MIN_BLOCK) * MIN_BLOCK
    if nbytes < ROUND_LIMIT:
        return -(-nbytes // LARGE_CLASS) * LARGE_CLASS
    return -(-nbytes // MIN_BLOCK) * MIN_BLOCK


def segment_size(block: int) -> int:
    """Segment the allocator reserves when no cached block fits ``block`` bytes."""
    if block < SMALL_REQUEST:
        return SMALL_SEGMENT
    if block < LARGE_SEGMENT_THRESHOLD:
        return LARGE_SEGMENT
    return -(-block // SMALL_SEGMENT) * SMALL_SEGMENT


@dataclass
class MemoryCounters:
    """Current and peak counters plus events (the ``memory_stats`` figures)."""

    allocated: int = 0
    active: int = 0
    reserved: int = 0
    peak_allocated: int = 0
    peak_active: int = 0
    peak_reserved: int = 0
    num_allocs: int = 0
    num_frees: int = 0
    num_alloc_retries: int = 0
    num_ooms: int = 0
    num_segments: int = 0
    num_segment_frees: int = 0


class OutOfDeviceMemory(torch.OutOfMemoryError):
    """Simulated HBM exhausted; carries the figures (asked, free, reserved, capacity) in bytes."""

    def __init__(self, message: str, *, asked: int, free: int, reserved: int, capacity: int) -> None:
        super().__init__(message)
        self.asked = asked
        self.free = free
        self.reserved = reserved
        self.capacity = capacity


@dataclass(frozen=True)
class MemorySnapshot:
    """The allocator's figures at one moment: counters, capacity, peaks per phase, recent timeline and OOMs."""

    counters: MemoryCounters
    capacity: int
    phase: str
    phase_peaks: dict[str, dict[str, int]]
    timeline: tuple[tuple[float, int, int, int, str], ...]
    oom_events: tuple[tuple[float, int, str], ...]
    unmeasured: frozenset[str] = frozenset()  # counters the live backend does not report (hardware)

    def measured(self, counter: str) -> bool:
        """Whether ``counter`` (a :class:`MemoryCounters` field) was reported, not defaulted to 0."""
        return counter not in self.unmeasured

    @property
    def free(self) -> int:
        """Capacity not held by live blocks."""
        return max(self.capacity - self.counters.allocated, 0)

    @property
    def cached(self) -> int:
        """Reserved bytes not in live blocks (what ``empty_cache`` could release at most)."""
        return self.counters.reserved - self.counters.allocated

    @property
    def live_segments(self) -> int:
        """Segments currently reserved (created minus released)."""
        return self.counters.num_segments - self.counters.num_segment_frees


class CachingAllocator(SectionedLock):
    """Accounting of device memory with CUDA-style caching; thread-safe (autograd runs backward on a worker); each
    method one section of its :class:`~.sections.SectionedLock` (dying storages: :meth:`free_from_finalizer`)."""

    def __init__(self, capacity: int) -> None:
        super().__init__("allocator", type(self).__name__)
        self.capacity = capacity
        self._next_addr = 1 << 32
        self._pools = {True: Pool(small=True), False: Pool(small=False)}
        self._segments: list[Segment] = []
        self.counters = MemoryCounters()
        # set only while memory history is recorded: fn(action, addr, size, requested) (trn_notebook.profiling)
        self.observer: Callable[[str, int, int, int], None] | None = None
        self.phase: str = "default"
        self.phase_peaks: dict[str, dict[str, int]] = {}
        self.timeline: deque[tuple[float, int, int, int, str]] = deque(maxlen=TIMELINE_CAPACITY)
        self.oom_events: deque[tuple[float, int, str]] = deque(maxlen=256)
        self._t0 = time.perf_counter()
        self._last_sample = 0.0
        self.sample_interval_s = 0.002

    # -- public: the only way in and out -------------------------------------------------------
    def malloc(self, nbytes: int) -> Block:
        """Reserve a block for ``nbytes``; raises :class:`OutOfDeviceMemory` with figures if HBM is full."""
        size = MIN_BLOCK if nbytes <= MIN_BLOCK else round_size(nbytes)
        small = size < SMALL_REQUEST
        with self.lock:  # a section (inlined for the op path): a storage dying inside it is released after
            self._busy += 1
            try:
                return self._malloc_locked(nbytes, size, small)
            finally:
                self._busy -= 1
                if self._dying and not self._busy:
                    self._drain_locked()

    def _malloc_locked(self, nbytes: int, size: int, small: bool) -> Block:
        if nbytes >= SMALL_REQUEST:
            self._check_host(nbytes)
        pool = self._pools[small]
        stack = pool.free.get(size)
        c = self.counters
        peaks = self.phase_peaks.get(self.phase)
        if stack:  # an exact-size cached block (a training loop's steady state; Pool.take inlined)
            block = stack.pop()
        else:
            taken = pool.take(size)
            block = taken if taken is not None else self._new_segment_block(size, small, nbytes)
            if block.size - size >= (MIN_BLOCK if small else SMALL_REQUEST):
                self._split(block, size, pool)
            peaks = None  # the reserved figure may have grown: the full peak update below
        block.free = False
        block.requested = nbytes
        block.segment.used += block.size
        c.allocated += block.size
        c.active += nbytes
        c.num_allocs += 1
        if c.allocated > c.peak_allocated:
            c.peak_allocated = c.allocated
        if c.active > c.peak_active:
            c.peak_active = c.active
        if peaks is None:
            self._phase_peak()
        else:  # _phase_peak inlined: reserved is unchanged on a cached block
            if c.allocated > peaks["allocated"]:
                peaks["allocated"] = c.allocated
            if c.active > peaks["active"]:
                peaks["active"] = c.active
        now = _perf() - self._t0
        if now - self._last_sample >= self.sample_interval_s:
            self._last_sample = now
            self.timeline.append((now, c.allocated, c.active, c.reserved, self.phase))
        if self.observer is not None:
            self.observer("alloc", block.addr, block.size, nbytes)
        return block

    def free(self, block: Block) -> None:
        """Return a block to its pool (it stays reserved)."""
        with self.lock:  # a section, inlined as in malloc
            self._busy += 1
            try:
                self._free_locked(block)
            finally:
                self._busy -= 1
                if self._dying and not self._busy:
                    self._drain_locked()

    def free_from_finalizer(self, block: Block) -> None:
        """:meth:`free` for a weakref callback of a dying storage: never waits, never frees inside a section."""
        self.release_from_finalizer(self._free_locked, block)  # runs under the lock: the body of free, no re-entry

    def _free_locked(self, block: Block) -> None:
        if block.free:
            return
        c = self.counters
        size = block.size
        c.allocated -= size
        c.active -= block.requested
        c.num_frees += 1
        block.segment.used -= size
        block.free = True
        if self.observer is not None:
            self.observer("free_completed", block.addr, size, block.requested)
        block.requested = 0
        pool = self._pools[block.segment.small]
        stack = pool.free.get(size)  # Pool.push and _sample inlined (once per dying eager tensor)
        if stack is None:
            pool.free[size] = [block]
            bisect.insort(pool.sizes, size)
        else:
            stack.append(block)
        now = _perf() - self._t0
        if now - self._last_sample >= self.sample_interval_s:
            self._last_sample = now
            self.timeline.append((now, c.allocated, c.active, c.reserved, self.phase))

    def empty_cache(self) -> int:
        """Release every segment with no live block; returns the bytes released."""
        with self.section:
            released = 0
            keep = []
            for seg in self._segments:
                if seg.used == 0:
                    pool = self._pools[seg.small]
                    b = seg.head
                    while b is not None:
                        pool.remove(b)
                        b = b.next
                    released += seg.size
                    self.counters.num_segment_frees += 1
                    if self.observer is not None:
                        self.observer("segment_free", seg.addr, seg.size, 0)
                else:
                    keep.append(seg)
            self._segments = keep
            self.counters.reserved -= released
            self._sample(force=True)
            return released

    # -- internals ------------------------------------------------------------------------------
    def _check_host(self, nbytes: int) -> None:
        """Refuse (simulated OOM) a request the host backing the simulator cannot hold with room to spare."""
        room = hostmem.guard.headroom(self.counters.active)
        if room is None or nbytes <= room:
            return
        self._count_oom(nbytes)
        raise self._refusal(
            nbytes,
            room,
            f"neuron out of memory (host memory backing the simulator): tried to allocate {fmt_bytes(nbytes)}; the "
            f"host has only {fmt_bytes(max(room, 0) + hostmem.RESERVE)} left for this process (keeping "
            f"{fmt_bytes(hostmem.RESERVE)} for the notebook), below the simulated capacity of {fmt_bytes(self.capacity)}. "
            "Free tensors you no longer need, or lower the simulated capacity with "
            "trn_notebook.set_memory_capacity() to what this machine holds. Nothing already allocated was lost.",
        )

    def _new_segment_block(self, size: int, small: bool, nbytes: int) -> Block:
        seg_size = segment_size(size)
        c = self.counters
        if c.reserved + seg_size > self.capacity:
            # As CUDA does: free cached segments and retry once before failing.
            c.num_alloc_retries += 1
            self._coalesce_all()
            block = self._pools[small].take(size)
            if block is not None:
                return block
            self.empty_cache()
            if c.reserved + seg_size > self.capacity:
                self._over_capacity(nbytes, size)
        return self._add_segment(seg_size, small)

    def _add_segment(self, seg_size: int, small: bool) -> Block:
        """Reserve a new segment of ``seg_size`` bytes (no capacity check); returns its one block."""
        c = self.counters
        seg = Segment(addr=self._next_addr, size=seg_size, small=small)
        self._next_addr += seg_size
        block = Block(addr=seg.addr, size=seg_size, segment=seg)
        seg.head = block
        self._segments.append(seg)
        c.reserved += seg_size
        c.num_segments += 1
        if self.observer is not None:
            self.observer("segment_alloc", seg.addr, seg_size, 0)
        if c.reserved > c.peak_reserved:
            c.peak_reserved = c.reserved
        return block

    def _count_oom(self, nbytes: int) -> None:
        """Count one refused allocation of ``nbytes`` and keep its time and phase (every OOM path calls this)."""
        self.counters.num_ooms += 1
        self.oom_events.append((time.perf_counter() - self._t0, nbytes, self.phase))

    def _over_capacity(self, nbytes: int, size: int) -> None:
        """A new segment for ``nbytes`` would pass the capacity even after the retry: count the OOM and raise
        :class:`OutOfDeviceMemory` with the figures (a dry run's allocator may record it and go on instead)."""
        c = self.counters
        self._count_oom(nbytes)
        if self.observer is not None:
            self.observer("oom", 0, nbytes, nbytes)
        free = self.capacity - c.allocated
        raise self._refusal(
            nbytes,
            free,
            f"neuron out of memory (simulated HBM): tried to allocate {fmt_bytes(nbytes)}; "
            f"{fmt_bytes(max(free, 0))} free of {fmt_bytes(self.capacity)} capacity; "
            f"{fmt_bytes(c.allocated)} allocated, {fmt_bytes(c.reserved)} reserved by the caching allocator. "
            f"{self._fragmentation_note(size, free)}{_capacity_setting_note(self.capacity)}"
            "Free tensors you no longer need (del, then torch.neuron.empty_cache()), use a smaller "
            "batch or sequence bucket, or bfloat16 weights. Nothing already allocated was lost.",
        )

    def _refusal(self, nbytes: int, free: int, message: str) -> OutOfDeviceMemory:
        """The error for a request of ``nbytes`` the device refuses with ``free`` bytes left."""
        return OutOfDeviceMemory(
            message, asked=nbytes, free=max(free, 0), reserved=self.counters.reserved, capacity=self.capacity
        )

    def _fragmentation_note(self, size: int, free: int) -> str:
        """When the free bytes would hold the request but no free block does: say it is fragmentation."""
        if free < size:
            return ""
        largest = max((b.size for p in self._pools.values() for b in free_blocks(p)), default=0)
        return (
            f"Fragmentation, not capacity: the free bytes would hold it, but the largest free block is "
            f"{fmt_bytes(largest)} (free memory is split across {len(self._segments)} live segments; see "
            "trn_notebook.profiling.fragmentation()). "
        )

    def _split(self, block: Block, size: int, pool: Pool) -> None:
        rest = Block(addr=block.addr + size, size=block.size - size, segment=block.segment)
        rest.prev, rest.next = block, block.next
        if block.next is not None:
            block.next.prev = rest
        block.next = rest
        block.size = size
        pool.push(rest)

    def _coalesce_all(self) -> None:
        for seg in self._segments:
            pool = self._pools[seg.small]
            b = seg.head
            while b is not None:
                n = b.next
                if b.free and n is not None and n.free:
                    pool.remove(b)
                    pool.remove(n)
                    b.size += n.size
                    b.next = n.next
                    if n.next is not None:
                        n.next.prev = b
                    pool.push(b)
                    continue
                b = n

    def _phase_peak(self) -> None:
        peaks = self.phase_peaks.get(self.phase)
        c = self.counters
        if peaks is None:
            peaks = self.phase_peaks[self.phase] = {"allocated": 0, "active": 0, "reserved": 0}
        if c.allocated > peaks["allocated"]:
            peaks["allocated"] = c.allocated
        if c.active > peaks["active"]:
            peaks["active"] = c.active
        if c.reserved > peaks["reserved"]:
            peaks["reserved"] = c.reserved

    def _sample(self, force: bool = False) -> None:
        now = _perf() - self._t0
        if force or now - self._last_sample >= self.sample_interval_s:
            self._last_sample = now
            c = self.counters
            self.timeline.append((now, c.allocated, c.active, c.reserved, self.phase))

    # -- views ----------------------------------------------------------------------------------
    @contextmanager
    def phase_scope(self, name: str) -> Iterator[None]:
        """Attribute peaks inside the block to phase ``name`` (nesting restores the outer phase)."""
        with self.section:
            previous, self.phase = self.phase, name
            self._phase_peak()
            self._sample(force=True)
        try:
            yield
        finally:
            with self.section:
                self.phase = previous
                self._sample(force=True)

    def layout(self) -> list[tuple[int, int, bool, tuple[tuple[int, int, int, bool], ...]]]:
        """Live segments as ``(addr, size, small_pool, blocks)``, blocks as ``(addr, size, requested, free)``."""
        with self.section:
            return [(s.addr, s.size, s.small, tuple((b.addr, b.size, b.requested, b.free) for b in blocks(s)))
                    for s in self._segments]  # fmt: skip

    def version(self) -> tuple[int | float | None, ...]:
        """A token that changes whenever a figure of the memory views changes (read under the lock)."""
        with self.section:
            c, timeline = self.counters, self.timeline
            last = timeline[-1][0] if timeline else None
            return (c.num_allocs, c.num_frees, c.num_ooms, c.num_segment_frees, c.reserved, self.capacity, last,
                    len(self.phase_peaks))  # fmt: skip

    def check_invariants(self) -> None:
        """Raise ``AssertionError`` if the counters disagree with the segment/block structure."""
        with self.section:
            c = self.counters
            reserved = sum(s.size for s in self._segments)
            allocated = 0
            for seg in self._segments:
                assert sum(b.size for b in blocks(seg)) == seg.size, "blocks do not tile their segment"
                allocated += sum(b.size for b in blocks(seg) if not b.free)
            assert reserved == c.reserved, (reserved, c.reserved)
            assert allocated == c.allocated, (allocated, c.allocated)
            assert c.reserved >= c.allocated >= c.active >= 0
            assert c.reserved <= self.capacity

    def snapshot(self) -> MemorySnapshot:
        """A frozen copy of the counters, capacity, per-phase peaks, timeline and OOM events."""
        import dataclasses

        with self.section:
            return MemorySnapshot(
                dataclasses.replace(self.counters),
                self.capacity,
                self.phase,
                {name: dict(p) for name, p in self.phase_peaks.items()},
                tuple(self.timeline),
                tuple(self.oom_events),
            )

    def reset(self) -> None:
        """Start the statistics over: release cached segments, set peaks to current values, zero the
        event counts, drop the timeline, OOM events and phase peaks. Live tensors keep their blocks."""
        with self.section:
            self.empty_cache()
            self.reset_accumulated()  # live blocks and segments count as allocated/created: current = allocs - frees
            self.timeline.clear()
            self.oom_events.clear()
            self.reset_peaks()
            self._sample(force=True)

    def reset_accumulated(self) -> None:
        """Zero the accumulated event counts; live blocks and segments stay counted (current = allocs - frees)."""
        with self.section:
            c = self.counters
            c.num_frees = c.num_alloc_retries = c.num_ooms = c.num_segment_frees = 0
            c.num_allocs = sum(1 for seg in self._segments for b in blocks(seg) if not b.free)
            c.num_segments = len(self._segments)

    def reset_peaks(self) -> None:
        """Set every peak (global and per phase) to the current value."""
        with self.section:
            c = self.counters
            c.peak_allocated, c.peak_active, c.peak_reserved = c.allocated, c.active, c.reserved
            self.phase_peaks = {}
            self._phase_peak()


def allocator_timeline_columns() -> list[str]:
    """Column names of :attr:`CachingAllocator.timeline` rows."""
    return ["t_s", "allocated", "active", "reserved", "phase"]


def _capacity_setting_note(capacity: int) -> str:
    """Names ``TRN_NOTEBOOK_HBM_BYTES`` when it set this capacity (a value too small to use is no import error:
    it shows here, at the first allocation that does not fit)."""
    from ... import envvars
    from ..config import get_config

    if get_config().hbm_bytes != capacity:
        return ""
    return (
        f"The capacity comes from TRN_NOTEBOOK_HBM_BYTES={envvars.text('TRN_NOTEBOOK_HBM_BYTES')!r}; "
        "unset it (or give e.g. 24G) for the chip's own HBM. "
    )
