"""The pass pipeline: pure ``Graph -> Graph`` functions, run in the order of :data:`PASSES`.

Each pass returns a new graph with the same observable results (tests check
``run(pass(ir)) == run(ir)``). Facts a pass wants reported (dtype downcasts) go into
``graph.meta``; passes never warn or log themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .decompositions import DECOMPOSITIONS, Site
from .fusion import fuse, plan_memory, reorder
from .ir import DType, Graph, Node, Ref, TensorType, map_refs
from .numerics_pass import apply_numerics
from .ops import OPS, RANDOM_OPS
from .text import format_value

Pass = Callable[[Graph], Graph]


class _Names:
    """Fresh value names that do not clash with the graph's."""

    def __init__(self, g: Graph, prefix: str) -> None:
        self.taken = set(g.types())
        self.prefix = prefix
        self.i = 0

    def __call__(self) -> str:
        while f"{self.prefix}{self.i}" in self.taken:
            self.i += 1
        name = f"{self.prefix}{self.i}"
        self.taken.add(name)
        return name


def _rename(nodes: list[Node], outputs: tuple[Ref | None, ...], mapping: dict[str, str]) -> tuple[list[Node], Any]:
    if not mapping:
        return nodes, outputs

    def fix(r: Ref) -> Ref:
        seen = r.name
        while seen in mapping:
            seen = mapping[seen]
        return Ref(seen)

    out_nodes = [
        n.with_(args=map_refs(n.args, fix), kwargs=tuple((k, map_refs(v, fix)) for k, v in n.kwargs)) for n in nodes
    ]
    return out_nodes, tuple(None if o is None else fix(o) for o in outputs)


# -- decomposition to the core op set ----------------------------------------------------------
def decompose(g: Graph) -> Graph:
    """Rewrite non-core ops into core ops with the rules of :data:`DECOMPOSITIONS` (algebra in each rule)."""
    fresh = _Names(g, "d")
    types = g.types()
    nodes: list[Node] = []
    alias: dict[str, str] = {}
    for n in g.nodes:
        rule = DECOMPOSITIONS.get(n.op)
        if rule is None:
            nodes.append(n)
            continue
        x = n.args[0] if n.args else None
        src_t = types.get(x.name) if isinstance(x, Ref) else None
        out_t = n.types[0]
        assert out_t is not None, n
        replaced = rule(Site(n, x, src_t, out_t, fresh))
        if isinstance(replaced, str):
            alias[n.outs[0]] = replaced
        else:
            nodes.extend(replaced)
    nodes, outputs = _rename(nodes, g.outputs, alias)
    return g.with_nodes(nodes, outputs)


# -- dead code and common subexpressions -------------------------------------------------------
def dce(g: Graph) -> Graph:
    """Drop nodes none of whose results is used (every op here is functional)."""
    live = {o.name for o in g.outputs if o is not None}
    kept: list[Node] = []
    for n in reversed(g.nodes):
        if any(o in live for o in n.outs if o):
            kept.append(n)
            live.update(n.refs())
    kept.reverse()
    return g.with_nodes(kept)


def cse(g: Graph) -> Graph:
    """Merge nodes computing the same op on the same arguments (random ops excluded)."""
    seen: dict[str, Node] = {}
    mapping: dict[str, str] = {}
    nodes: list[Node] = []

    def fix(r: Ref) -> Ref:
        return Ref(mapping.get(r.name, r.name))

    for n in g.nodes:
        n = n.with_(args=map_refs(n.args, fix), kwargs=tuple((k, map_refs(v, fix)) for k, v in n.kwargs))
        if n.op in RANDOM_OPS:
            nodes.append(n)
            continue
        key = f"{n.op}({', '.join(format_value(a) for a in n.args)}; {format_value([list(kv) for kv in n.kwargs])})"
        prev = seen.get(key)
        if prev is not None and prev.types == n.types:
            for new, old in zip(n.outs, prev.outs):
                if new:
                    mapping[new] = old
            continue
        seen[key] = n
        nodes.append(n)
    return g.with_nodes(nodes, tuple(None if o is None else fix(o) for o in g.outputs))


# -- legalisation --------------------------------------------------------------------------------
_DOWNCAST = {"f64": "f32", "i64": "i32", "c128": "c64"}
_NEEDS_I64 = frozenset(name for name, d in OPS.items() if d.i64_index)  # from the op registry
_OPAQUE_CALLS = frozenset({"custom_call", "host_call", "host_effect"})  # run Python traced on int64 operands


def _narrow(t: TensorType | None) -> TensorType | None:
    if t is None or t.dtype not in _DOWNCAST:
        return t
    return TensorType(_DOWNCAST[t.dtype], t.shape, t.strides)


def legalize_dtypes(g: Graph) -> Graph:
    """Run 64-bit values in 32 bits: cast 64-bit inputs down, outputs back up (as the real backend does).

    Index operands of ops that need int64 are widened right before the op. The downcast inputs are
    listed in ``meta["downcast"]`` so the backend can warn.
    """
    wide = [(name, t) for name, t in g.inputs if t.dtype in _DOWNCAST]
    internal = any(t is not None and t.dtype in _DOWNCAST for n in g.nodes for t in n.types)
    if not wide and not internal:
        return g
    fresh = _Names(g, "c")
    types = g.types()
    rename: dict[str, str] = {}
    nodes: list[Node] = []
    for name, t in wide:
        new = fresh()
        rename[name] = new
        nodes.append(Node((new,), (_narrow(t),), "cast", (Ref(name),), (("dtype", DType(_DOWNCAST[t.dtype])),)))

    def narrow_const(v: Any) -> Any:
        if isinstance(v, DType) and v.name in _DOWNCAST:
            return DType(_DOWNCAST[v.name])
        if isinstance(v, list):
            return [narrow_const(x) for x in v]
        return v

    def fix(r: Ref) -> Ref:
        return Ref(rename.get(r.name, r.name))

    def widen(a: Any, n: Node) -> Any:
        if isinstance(a, Ref) and types.get(_orig(a.name, rename)) is not None:
            arg_type = types[_orig(a.name, rename)]
            if arg_type is not None and arg_type.dtype == "i64":
                w = fresh()
                nodes.append(Node((w,), (arg_type,), "cast", (a,), (("dtype", DType("i64")),), n.source))
                return Ref(w)
        return a

    for n in g.nodes:
        args = map_refs(n.args, fix)
        kwargs = tuple((k, narrow_const(map_refs(v, fix))) for k, v in n.kwargs)
        if n.op in _NEEDS_I64:  # index operands, positional or keyword (searchsorted's sorter=)
            # not the first operand of an op whose result takes its dtype (gather, index, index_select, scatter:
            # an int64 tensor indexed stays 32-bit); a host or custom call gets every operand as it was traced
            args = tuple(widen(a, n) if i or n.op in _OPAQUE_CALLS else a for i, a in enumerate(args))
            kwargs = tuple((k, widen(v, n)) for k, v in kwargs)
        narrowed = tuple(_narrow(t) for t in n.types)
        if _infers_dtype(n, kwargs) and narrowed[0] is not None and narrowed[0] != n.types[0]:
            # arange(5) / full(s, 1) pick int64 from their Python arguments: say the 32-bit dtype the IR declares
            kwargs = (*kwargs, ("dtype", DType(narrowed[0].dtype)))
        elif _makes_i64(n, types):
            # torch gives these int64 whatever the inputs: keep the op's int64 and cast it down right after
            kept = tuple(t if t is not None and t.dtype == "i64" else nt for t, nt in zip(n.types, narrowed))
            nodes.append(n.with_(args=tuple(narrow_const(a) for a in args), kwargs=kwargs, types=kept))
            for out_name, wide_t, narrow_t in zip(n.outs, n.types, narrowed):
                if out_name and wide_t is not None and wide_t.dtype == "i64":
                    down = fresh()
                    rename[out_name] = down
                    cast_kw = (("dtype", DType("i32")),)
                    nodes.append(Node((down,), (narrow_t,), "cast", (Ref(out_name),), cast_kw, n.source))
            continue
        nodes.append(n.with_(args=tuple(narrow_const(a) for a in args), kwargs=kwargs, types=narrowed))
    outputs: list[Ref | None] = []
    for o in g.outputs:
        if o is None:
            outputs.append(None)
            continue
        out_type = types[o.name]
        src = fix(o)
        if out_type is not None and out_type.dtype in _DOWNCAST:
            back = fresh()
            cast_type = TensorType(out_type.dtype, out_type.shape)
            nodes.append(Node((back,), (cast_type,), "cast", (src,), (("dtype", DType(out_type.dtype)),)))
            src = Ref(back)
        outputs.append(src)
    meta = (*g.meta, ("downcast", ",".join(f"{n}:{t.dtype}" for n, t in wide) or "internal"))
    return Graph(g.name, g.inputs, tuple(nodes), tuple(outputs), meta)


def _makes_i64(n: Node, types: dict[str, TensorType | None]) -> bool:
    """torch makes this node's int64 output itself, whatever 32-bit inputs it gets: an index output (argmax,
    topk's or sort's indices, max.dim's): an int64 output, no int64 tensor input and no dtype argument."""
    if not any(t is not None and t.dtype == "i64" for t in n.types):
        return False
    if any(isinstance(v, DType) for _, v in n.kwargs) or any(isinstance(a, DType) for a in n.args):
        return False
    return not any((t := types.get(r)) is not None and t.dtype == "i64" for r in n.refs())


def _infers_dtype(n: Node, kwargs: tuple[tuple[str, Any], ...]) -> bool:
    """An op whose output dtype torch infers rather than reads from its narrowed inputs, with no ``dtype``: a
    factory with no tensor argument (its Python arguments pick int64), or a sum/cumsum-like op, whose integer
    inputs give int64 (so a cached graph's check saw int64 where the IR declares int32)."""
    d = OPS.get(n.op)
    if d is None or any(k == "dtype" for k, _ in kwargs):
        return False
    if d.int_to_i64:
        return True
    return d.kind == "factory" and not any(isinstance(a, Ref) for a in n.args)


def _orig(name: str, rename: dict[str, str]) -> str:
    for k, v in rename.items():
        if v == name:
            return k
    return name


def _dense(t: TensorType) -> bool:
    """True when the strides are a permutation of contiguous strides (no gaps, no overlap)."""
    if t.strides is None:
        return True
    dims = sorted((st, s) for s, st in zip(t.shape, t.strides) if s != 1)
    expect = 1
    for st, s in dims:
        if st != expect:
            return False
        expect *= s
    return True


def legalize_layout(g: Graph) -> Graph:
    """Make every input with gaps or overlap (sliced, expanded) contiguous explicitly, before its first use.

    Dense inputs in a permuted order (a transposed weight saved for backward) are left as they
    are: they are a contiguous buffer read in another dimension order, which every engine takes.
    """
    strided = [(name, t) for name, t in g.inputs if not _dense(t)]
    if not strided:
        return g
    fresh = _Names(g, "l")
    rename: dict[str, str] = {}
    nodes: list[Node] = []
    for name, t in strided:
        new = fresh()
        rename[name] = new
        nodes.append(Node((new,), (TensorType(t.dtype, t.shape),), "contiguous", (Ref(name),)))

    def fix(r: Ref) -> Ref:
        return Ref(rename.get(r.name, r.name))

    body = [
        n.with_(args=map_refs(n.args, fix), kwargs=tuple((k, map_refs(v, fix)) for k, v in n.kwargs)) for n in g.nodes
    ]
    outputs = tuple(None if o is None else fix(o) for o in g.outputs)
    return g.with_nodes(nodes + body, outputs)


# The pipeline, in order. Reordering, fusion and memory planning live in fusion.py.
PASSES: tuple[tuple[str, Pass], ...] = (
    ("decompose", decompose),
    ("dce", dce),
    ("cse", cse),
    ("legalize_dtypes", legalize_dtypes),
    ("legalize_layout", legalize_layout),
    ("numerics", apply_numerics),  # the trainium precision policy as explicit casts/rounding (numerics_pass.py)
    ("reorder", reorder),
    ("fuse", fuse),
    ("plan_memory", plan_memory),
)


def run_passes(g: Graph, keep: bool = False) -> tuple[Graph, list[tuple[str, Graph]]]:
    """Apply :data:`PASSES` in order; with ``keep`` also return the graph after each pass."""
    history: list[tuple[str, Graph]] = []
    for name, p in PASSES:
        g = p(g)
        if keep:
            history.append((name, g))
    return g, history


__all__ = ["PASSES", "cse", "dce", "decompose", "legalize_dtypes", "legalize_layout", "run_passes"]
