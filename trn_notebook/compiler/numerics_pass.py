"""The numerics pass: make the ``trainium`` precision policy explicit in the IR (casts and rounding nodes).

It reads the policy in force (:mod:`trn_notebook.device.numerics.policy`; the cache key includes it) and rewrites
the graph the same way the eager path computes each op (:mod:`trn_notebook.device.numerics.calls`):

* ``matmul`` nodes: FP32 operands are auto-cast (``numerics_round`` to the cast type, kept in FP32) and
  low-precision operands upcast (``cast`` to f32); the node computes in FP32 and its result is rounded
  once to its declared dtype (``numerics_round``: RNE or stochastic).
* other computing nodes (pointwise, reduction, library): rewritten only where the CPU kernel's own
  FP32-internal, RNE result differs from the policy: stochastic rounding of low-precision results, and
  ``autocast="all"`` (FP32 inputs and results rounded through the cast type).

Under ``exact`` it returns the graph unchanged. int64 is handled by ``legalize_dtypes`` (the real backend's
downcast). Integer data of the ops with no integer datapath (``matmul`` nodes and the registry's
``scatter`` class, e.g. ``scatter_add``) is ``cast`` to f32, computed in f32 and converted back by a
``numerics_round`` to the integer dtype (:func:`~trn_notebook.device.numerics.policy.integer_from_fp32`, as eager).
The input of an activation with a documented ScalarE valid range (the record's ``valid_range``) is read
through a ``numerics_check`` node: the same :class:`~trn_notebook.device.numerics.policy.NeuronNumericsWarning` as
eager, naming the op, the range and the node's user source line, once per op and line.
"""

from __future__ import annotations

from typing import Any

from .. import state as _state
from ..device.numerics.calls import ADDEND_OPS, INDEX_ARGS, NOT_OPERANDS, scatter_computes, source_where
from ..device.numerics.policy import NumericsPolicy, numerics, warn_integer_fp32
from ..device.ops.policy import registry
from ..device.source_lines import SourceLine
from .ir import DType, Graph, Node, Ref, TensorType
from .ops import OPS

_LOW = frozenset({"bf16", "f16"})
_INTS = frozenset({"i64", "i32", "i16", "i8", "u8"})  # IR integer dtypes (b8 is not computed through FP32)
_CAST_NAMES = {"bf16": "bf16", "fp16": "f16", "tf32": "tf32", "fp8_e4m3": "fp8_e4m3"}


def key_items() -> dict[str, Any]:
    """The policy's part of the compile cache key (empty under ``exact``: exact keys do not change)."""
    policy = numerics.policy
    return {"numerics": policy.to_dict()} if policy.active else {}


def _operand_names(op: str) -> list[str]:
    impl = OPS[op].impl
    schema = getattr(impl, "_schema", None)
    return [a.name for a in schema.arguments] if schema is not None else []


class _Rewriter:
    def __init__(self, g: Graph, policy: NumericsPolicy) -> None:
        self.policy = policy
        self.types = g.types()
        self.taken = set(self.types)
        self.i = 0
        self.nodes: list[Node] = []

    def fresh(self) -> str:
        while f"q{self.i}" in self.taken:
            self.i += 1
        name = f"q{self.i}"
        self.taken.add(name)
        return name

    def emit(
        self, src: Ref, t: TensorType, op: str, kwargs: tuple[tuple[str, Any], ...], source: SourceLine | None
    ) -> Ref:
        new = self.fresh()
        self.types[new] = t
        self.nodes.append(Node((new,), (t,), op, (src,), kwargs, source))
        return Ref(new)

    def rnd(self, src: Ref, t: TensorType, target: str, out: str, source: SourceLine | None, stochastic: bool) -> Ref:
        kwargs = (("target", target), ("stochastic", stochastic), ("dtype", DType(out)))
        return self.emit(src, TensorType(out, t.shape), "numerics_round", kwargs, source)

    def operand(self, a: Any, matmul: bool, is_operand: bool, source: SourceLine | None) -> Any:
        if not isinstance(a, Ref):
            return a
        t = self.types.get(a.name)
        if t is None:
            return a
        p = self.policy
        cast = _CAST_NAMES[p.autocast_type]
        if t.dtype == "f32" and (
            (matmul and is_operand and p.autocast != "none") or (not matmul and p.autocast == "all")
        ):
            return self.rnd(a, t, cast, "f32", source, False)
        if t.dtype in _LOW:
            return self.emit(a, TensorType("f32", t.shape), "cast", (("dtype", DType("f32")),), source)
        return a

    def integer_node(self, n: Node, names: list[str]) -> bool:
        """An op with no integer datapath on integer data: f32 operands, f32 compute, results converted back."""
        if not scatter_computes(names, n.args, n.kwargs):
            return False
        data = [
            (i, a, t)
            for i, a in enumerate(n.args)
            if isinstance(a, Ref)
            and (t := self.types.get(a.name)) is not None
            and t.dtype in _INTS
            and (names[i] if i < len(names) else "") not in INDEX_ARGS
        ]
        if not data:
            return False
        engine = "dot" if OPS[n.op].kind == "matmul" else "scatter"
        warn_integer_fp32(f"compiled {n.op}", data[0][2].torch_dtype, engine, source_where(n.source))
        f32 = DType("f32")
        args = list(n.args)
        for pos, ref, t in data:
            args[pos] = self.emit(ref, TensorType("f32", t.shape), "cast", (("dtype", f32),), n.source)
        ints = [bool(o) and t is not None and t.dtype in _INTS for o, t in zip(n.outs, n.types)]
        inner = tuple(self.fresh() if is_int else o for o, is_int in zip(n.outs, ints))
        types = tuple(
            TensorType("f32", t.shape, t.strides) if is_int and t is not None else t for t, is_int in zip(n.types, ints)
        )
        self.nodes.append(n.with_(outs=inner, types=types, args=tuple(args)))
        for o, fp32, t, is_int in zip(n.outs, inner, n.types, ints):
            if is_int and t is not None:
                kwargs = (("target", "int"), ("stochastic", False), ("dtype", DType(t.dtype)))
                self.nodes.append(Node((o,), (t,), "numerics_round", (Ref(fp32),), kwargs, n.source))
        return True

    def checked(self, n: Node, op: str) -> Node:
        """``n`` reading its input through a ``numerics_check`` of activation ``op``'s valid range."""
        a = n.args[0] if n.args else None
        t = self.types.get(a.name) if isinstance(a, Ref) else None
        if not isinstance(a, Ref) or t is None or t.dtype not in (_LOW | {"f32"}):
            return n
        where, line = source_where(n.source)  # constants of the IR (its text is the cache artifact)
        ref = self.emit(a, t, "numerics_check", (("op", op), ("where", where), ("line", line)), n.source)
        return n.with_(args=(ref, *n.args[1:]))

    def node(self, n: Node) -> None:
        d = OPS.get(n.op)
        if (
            d is None
            or d.kind in ("view", "copy", "factory", "host")
            or n.op in ("cast", "numerics_round", "numerics_check")
        ):
            self.nodes.append(n)
            return
        activation = _activation_ops().get(n.op)
        if activation is not None:
            n = self.checked(n, activation)
        matmul = d.kind == "matmul"
        if (matmul or n.op in _scatter_ops()) and self.integer_node(n, _operand_names(n.op)):
            return
        floats = [t for t in n.types if t is not None and t.dtype in (_LOW | {"f32"})]
        if not floats or len(floats) != len([t for t in n.types if t is not None]):
            self.nodes.append(n)
            return
        if not matmul and not self._elementwise_changes(n):
            self.nodes.append(n)
            return
        names = _operand_names(n.op)
        skip_self = n.op in ADDEND_OPS
        args = tuple(
            self.operand(
                a,
                matmul,
                (names[i] if i < len(names) else "") not in NOT_OPERANDS and not (skip_self and i == 0),
                n.source,
            )
            for i, a in enumerate(n.args)
        )
        if args == n.args and all(t.dtype == "f32" for t in floats) and (matmul or self.policy.autocast != "all"):
            self.nodes.append(n)  # nothing to cast: FP32 in, FP32 out
            return
        p = self.policy
        plan: list[tuple[str, str, bool] | None] = []
        for o, t in zip(n.outs, n.types):
            if not o or t is None:
                plan.append(None)
            elif t.dtype in _LOW:
                plan.append((t.dtype, t.dtype, p.stochastic_rounding))
            elif p.autocast == "all":  # every FP32 operation in the cast type, its result too
                plan.append((_CAST_NAMES[p.autocast_type], "f32", False))
            else:
                plan.append(None)  # FP32 result: kept as computed (PSUM / engine FP32)
        inner = tuple(self.fresh() if step is not None else o for o, step in zip(n.outs, plan))
        inner_types = tuple(None if t is None else TensorType("f32", t.shape, t.strides) for t in n.types)
        self.nodes.append(n.with_(outs=inner, types=inner_types, args=args))
        for o, i, t, step in zip(n.outs, inner, n.types, plan):
            if step is not None and t is not None:
                kwargs = (("target", step[0]), ("stochastic", step[2]), ("dtype", DType(step[1])))
                self.nodes.append(Node((o,), (t,), "numerics_round", (Ref(i),), kwargs, n.source))

    def _elementwise_changes(self, n: Node) -> bool:
        p = self.policy
        if p.autocast == "all":
            return True
        return p.stochastic_rounding and any(t is not None and t.dtype in _LOW for t in n.types)


_scatter_cache: dict[int, frozenset[str]] = {}  # registry version -> IR names (derived; kept across resets)
_activation_cache: dict[int, dict[str, str]] = {}  # registry version -> {IR name: record name}
_state.register("numerics_pass_ops", _state.Globals(__name__, "_scatter_cache", "_activation_cache"), reset=False)


def _activation_ops() -> dict[str, str]:
    """IR ops of the records with a ScalarE valid range -> the record's name, per registry version."""
    hit = _activation_cache.get(registry.version)
    if hit is None:
        _activation_cache.clear()
        hit = _activation_cache[registry.version] = {
            ir: r.name for r in registry.records() if r.valid_range is not None for _, ir in r.lower
        }
    return hit


def _scatter_ops() -> frozenset[str]:
    """IR ops of the registry's ``scatter`` numerics class (scatter-with-compute), per registry version."""
    hit = _scatter_cache.get(registry.version)
    if hit is None:
        _scatter_cache.clear()
        hit = _scatter_cache[registry.version] = frozenset(
            ir for r in registry.records() if r.numerics_class() == "scatter" for _, ir in r.lower
        )
    return hit


def apply_numerics(g: Graph) -> Graph:
    """The graph with the numerics policy in force made explicit (unchanged under ``exact``)."""
    policy = numerics.policy
    if not policy.active:
        return g
    rw = _Rewriter(g, policy)
    for n in g.nodes:
        rw.node(n)
    meta = (*g.meta, ("numerics", policy.label()))
    return Graph(g.name, g.inputs, tuple(rw.nodes), g.outputs, meta)


__all__ = ["apply_numerics", "key_items"]
