"""Reordering for fusion, fusion into kernels and liveness-based memory planning (the last three passes).

Fusion is greedy over the node order, so every kernel is a contiguous run of nodes (convex by
construction): a pointwise node joins the open kernel when one of its inputs is produced there;
a reduction (or a norm kernel) may close an open pointwise chain (pointwise-into-reduction); a
matmul takes a pointwise epilogue (bias, activation); views ride along with their producer's
kernel; library, copy and factory ops are kernels of their own.

Memory planning gives every value that crosses a kernel boundary (or leaves the graph) an offset
in one HBM arena, reusing the space of values whose last reader has run (first fit, 64-byte
aligned). Values that live only inside a kernel stay on chip (SBUF) and get offset -1.
"""

from __future__ import annotations

from .ir import Graph, Node
from .ops import OPS

ALIGN = 64


def reorder(g: Graph) -> Graph:
    """Move each pointwise op, view or reduction up to just after the op producing its last input.

    Only a move next to a matmul, pointwise op or view is made (where fusion can use it); the node
    still follows every input, so the order stays topological. This lets ``fuse``, which groups
    contiguous runs, catch chains that AOT Autograd interleaved with unrelated ops.
    """
    position: dict[str, int] = {}
    new: list[Node] = []
    hoisted: set[int] = set()  # ids of nodes placed by a move
    for n in g.nodes:
        kind = OPS[n.op].kind
        refs = [r for r in n.refs() if r in position]
        target = len(new)
        if kind in ("pointwise", "view", "reduction") and refs:
            last = max(position[r] for r in refs)
            producer_kind = OPS[new[last].op].kind
            fusible = producer_kind in ("matmul", "pointwise", "view")
            if fusible and not (kind == "reduction" and producer_kind == "matmul"):
                target = last + 1
                while target < len(new) and id(new[target]) in hoisted:
                    target += 1
        new.insert(target, n)
        if target != len(new) - 1:
            hoisted.add(id(n))
            for i in range(target, len(new)):
                for o in new[i].outs:
                    if o:
                        position[o] = i
        else:
            for o in n.outs:
                if o:
                    position[o] = target
    return g.with_nodes(new)


# library kernels that reduce along a dimension: a pointwise chain may fuse into them like into a reduction
_REDUCING_LIBRARY = frozenset(name for name, d in OPS.items() if d.reduces)  # from the op registry


def fuse(g: Graph) -> Graph:
    """Assign each node a kernel id (``Node.kernel``); see the module docstring for the rules.

    The open kernel is in one of three states: ``chain`` (pointwise/views: more pointwise or a
    closing reduction may join), ``epilogue`` (a matmul: pointwise consumers of its result join,
    as the activation engine applies them while draining the accumulator) or ``closed``.
    """
    producer_kernel: dict[str, int] = {}
    nodes: list[Node] = []
    kernel = -1
    state = "closed"
    for n in g.nodes:
        kind = OPS[n.op].kind
        if n.op in _REDUCING_LIBRARY:
            kind = "reduction"
        feeds_from_current = any(producer_kernel.get(r) == kernel for r in n.refs())
        if kind == "view":
            if not feeds_from_current:
                kernel += 1
                state = "chain"
        elif kind == "pointwise":
            if not (state in ("chain", "epilogue") and feeds_from_current):
                kernel += 1
                state = "chain"
        elif kind == "reduction":
            if not (state == "chain" and feeds_from_current):
                kernel += 1
            state = "closed"
        elif kind == "matmul":
            kernel += 1
            state = "epilogue"
        else:
            kernel += 1
            state = "closed"
        for o in n.outs:
            if o:
                producer_kernel[o] = kernel
        nodes.append(n.with_(kernel=kernel, mem=None))
    return g.with_nodes(nodes)


def base_of(g: Graph) -> dict[str, str]:
    """Each view value -> the non-view value (or input) whose bytes it aliases."""
    base: dict[str, str] = {}
    for n in g.nodes:
        if OPS[n.op].kind == "view":
            refs = n.refs()
            src = base.get(refs[0], refs[0]) if refs else ""
            for o in n.outs:
                if o:
                    base[o] = src
    return base


def plan_memory(g: Graph) -> Graph:
    """Assign arena offsets (``Node.mem``) to values crossing kernel boundaries; peak in ``meta``."""
    if any(n.kernel is None for n in g.nodes):
        g = fuse(g)
    base = base_of(g)
    types = g.types()
    inputs = {name for name, _ in g.inputs}
    kernel_of: dict[str, int] = {}
    for n in g.nodes:
        for o in n.outs:
            if o and n.kernel is not None:
                kernel_of[o] = n.kernel
    last_kernel = max((n.kernel for n in g.nodes if n.kernel is not None), default=0)
    # last kernel reading each (base) value from HBM; graph outputs live to the end
    needs_hbm: dict[str, int] = {}
    for n in g.nodes:
        for r in n.refs():
            b = base.get(r, r)
            if b in inputs or kernel_of.get(b) == n.kernel or n.kernel is None:
                continue
            needs_hbm[b] = max(needs_hbm.get(b, -1), n.kernel)
    for out in g.outputs:
        if out is not None:
            b = base.get(out.name, out.name)
            if b not in inputs:
                needs_hbm[b] = last_kernel + 1
    free: list[tuple[int, int]] = []  # (offset, size) holes
    arena = 0
    offsets: dict[str, int] = {}
    releases: dict[int, list[str]] = {}
    for name, k in needs_hbm.items():
        releases.setdefault(k, []).append(name)
    by_kernel: dict[int, list[str]] = {}
    for name in needs_hbm:
        by_kernel.setdefault(kernel_of[name], []).append(name)
    for k in range(last_kernel + 1):
        for name in by_kernel.get(k, []):
            t = types.get(name)
            size = -(-(t.nbytes if t is not None else 0) // ALIGN) * ALIGN
            hole = next((i for i, (_, s) in enumerate(free) if s >= size), None)
            if hole is None:
                offsets[name] = arena
                arena += size
            else:
                off, s = free.pop(hole)
                offsets[name] = off
                if s > size:
                    free.append((off + size, s - size))
        for name in releases.get(k, []):
            t = types.get(name)
            size = -(-(t.nbytes if t is not None else 0) // ALIGN) * ALIGN
            free.append((offsets[name], size))
        free.sort()
    nodes = [n.with_(mem=tuple(offsets.get(o, -1) if o else -1 for o in n.outs)) for n in g.nodes]
    meta = (*(kv for kv in g.meta if kv[0] != "arena_bytes"), ("arena_bytes", str(arena)))
    return Graph(g.name, g.inputs, tuple(nodes), g.outputs, meta)
