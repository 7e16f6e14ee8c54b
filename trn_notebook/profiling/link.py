"""Linking simulator records to the host ops of a profile (pure functions over time intervals).

A record's wall timestamp falls inside the host op (``aten::mm`` on ``neuron``) that issued it, on the
same thread. The innermost enclosing op is that host op; the ops nested inside it that enclose no
record of their own are the CPU kernels the simulator ran to compute the result ("simulator
kernels"): their time is already part of the host op, so they are labelled, not counted again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence


def link(
    spans: Sequence[tuple[float, float, int]], queries: Sequence[tuple[float, int]]
) -> tuple[list[int], list[int]]:
    """Innermost span enclosing each query, and each span's parent span.

    ``spans`` are ``(start, end, thread)``; ``queries`` ``(time, thread)``. Returns ``(owner, parent)``:
    ``owner[q]`` is the index of the innermost span on the query's thread with ``start <= t <= end``
    (-1 if none) and ``parent[s]`` the innermost span enclosing span ``s`` (-1 at top level).
    """
    by_thread: dict[int, list[tuple[float, int, float, int]]] = defaultdict(list)
    # (time, kind, -end, index): kind 0 = span opening, sorted before a query at the same time (kind 1);
    # at equal starts the longer span comes first, so the outer one is pushed before the inner one
    for i, (start, end, tid) in enumerate(spans):
        by_thread[tid].append((start, 0, -end, i))
    for q, (t, tid) in enumerate(queries):
        by_thread[tid].append((t, 1, 0.0, q))
    owner = [-1] * len(queries)
    parent = [-1] * len(spans)
    for items in by_thread.values():
        items.sort()
        stack: list[int] = []
        ends: list[float] = []
        for t, kind, neg_end, i in items:
            while ends and ends[-1] < t:
                ends.pop()
                stack.pop()
            if kind == 0:
                parent[i] = stack[-1] if stack else -1
                stack.append(i)
                ends.append(-neg_end)
            else:
                owner[i] = stack[-1] if stack else -1
    return owner, parent


def simulator_kernels(parent: Sequence[int], owners: Sequence[int]) -> list[int]:
    """Spans nested in a record's host op that hold no record themselves (the simulator's CPU kernels)."""
    hosts = {o for o in owners if o >= 0}
    holds = set()  # spans that are hosts or enclose a host
    for h in hosts:
        i = h
        while i >= 0 and i not in holds:
            holds.add(i)
            i = parent[i]
    out = []
    for s in range(len(parent)):
        if s in holds:
            continue
        i = parent[s]
        while i >= 0:
            if i in hosts:
                out.append(s)
                break
            i = parent[i]
    return out
