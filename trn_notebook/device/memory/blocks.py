"""The allocator's bookkeeping structures: blocks, the segments they tile, and the free pools.

A :class:`Segment` is a reservation from the (simulated) runtime; its :class:`Block` objects form a
doubly linked list tiling it. Free blocks are cached in a :class:`Pool` by size (best-fit lookup).
:class:`~trn_notebook.device.allocator.CachingAllocator` owns them all; nothing else reads them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(eq=False, slots=True)
class Block:
    """A range of a segment; ``free`` blocks are cached for reuse."""

    addr: int
    size: int
    segment: Segment
    free: bool = True
    requested: int = 0
    prev: Block | None = None
    next: Block | None = None


@dataclass(eq=False, slots=True)
class Segment:
    """A reservation from the (simulated) runtime."""

    addr: int
    size: int
    small: bool
    head: Block | None = None
    used: int = 0  # bytes in non-free blocks


@dataclass
class Pool:
    """Free blocks of one pool (small or large) by size, LIFO per size."""

    small: bool
    sizes: list[int] = field(default_factory=list)  # sorted keys of ``free`` (a stack may be empty: kept for reuse)
    free: dict[int, list[Block]] = field(default_factory=dict)  # size -> free blocks (LIFO)

    def push(self, block: Block) -> None:
        """Cache a freed block."""
        stack = self.free.get(block.size)
        if stack is None:
            self.free[block.size] = [block]
            bisect.insort(self.sizes, block.size)
        else:
            stack.append(block)

    def remove(self, block: Block) -> None:
        """Take a specific free block out of the cache (coalescing, releasing its segment)."""
        stack = self.free[block.size]
        stack.remove(block)
        if not stack:
            del self.free[block.size]
            self.sizes.pop(bisect.bisect_left(self.sizes, block.size))

    def take(self, size: int) -> Block | None:
        """The smallest free block of at least ``size`` bytes (best fit), or ``None``; drops empty stacks it passes."""
        sizes, free = self.sizes, self.free
        i = bisect.bisect_left(sizes, size)
        while i < len(sizes):
            stack = free[sizes[i]]
            if stack:
                return stack.pop()
            del free[sizes[i]]
            sizes.pop(i)
        return None


def free_blocks(pool: Pool) -> list[Block]:
    """Every cached block of ``pool``."""
    return [b for stack in pool.free.values() for b in stack]


def blocks(seg: Segment) -> Iterator[Block]:
    """The blocks tiling ``seg``, in address order."""
    b = seg.head
    while b is not None:
        yield b
        b = b.next
