"""Lowering: an ATen-level FX graph (from AOT Autograd, fake tensors) to our typed IR.

Each supported ATen overload maps to one IR op (``ops.LOWERINGS``); ``getitem`` on multi-result
ops is resolved into the node's result names; device, layout and pin_memory arguments are
dropped (the executable decides where bytes live); the user's source line is kept per node.
Tensor constants (``get_attr``) are lifted into trailing inputs first (:func:`lift_constants`); Python
numbers the graph returns are kept in ``meta["constant_outputs"]`` and returned by the executable.
Anything else raises :class:`LoweringError`, which names the op and says what to do.
"""

from __future__ import annotations

import operator
import re
from typing import Any

import torch
import torch.fx

from ..device.ops.registry import memory_format_error
from ..device.source_lines import SourceLine, is_user_file, source_line
from .host_call import (
    HOST_CALL,
    HOST_EFFECT,
    DataDependentShapeError,
    UnsupportedOpError,
    data_dependent_error,
    lowering_of,
    qualified,
)
from .ir import DTYPE_NAMES, DType, Graph, IRError, Node, Ref, TensorType
from .kernel_call import entry_for
from .ops import LOWERINGS
from .text import CONSTANT_OUTPUTS, format_constant_outputs
from .verify import verify

_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')
_DROP_KWARGS = frozenset({"device", "layout", "pin_memory"})


# User calls that take a memory format themselves: a channels_last request from one of these is the user's own.
_FORMAT_CALLS = frozenset(
    {"contiguous", "to", "clone", "empty", "empty_like", "zeros_like", "ones_like", "full_like", "rand_like",
     "randn_like", "randint_like", "type_as", "new_empty", "empty_strided"}
)  # fmt: skip


class LoweringError(NotImplementedError):
    """An FX node the neuron compiler cannot lower (unsupported op or argument)."""


def user_source(node: torch.fx.Node) -> SourceLine | None:
    """The user's line that produced ``node`` (last user frame of its stack trace), with its code; ``None``
    when every frame is library code."""
    trace = node.meta.get("stack_trace") or ""
    frames = [f for f in _FRAME_RE.findall(trace) if is_user_file(f[0])]
    if not frames:
        return None
    filename, line = frames[-1]
    return source_line(filename, int(line), code=True)


def _format_asked_by_user(node: torch.fx.Node) -> bool:
    """Whether a non-contiguous ``memory_format`` on ``node`` is the user's own request (``x.contiguous(
    memory_format=...)``, ``.to(...)``, ``empty_like(...)``) rather than one a PyTorch function chose inside
    its decomposition (``F.interpolate`` and the pooling ops keep a channels_last-strided input's layout).
    Without dynamo's source record the request counts as the user's (refused)."""
    stack = node.meta.get("source_fn_stack") or []
    if not stack:
        return True
    fn = stack[-1][1]
    name = fn if isinstance(fn, str) else getattr(fn, "__name__", "")
    return name in _FORMAT_CALLS


def _type_of(val: Any, what: str) -> TensorType | None:
    if val is None:
        return None
    if isinstance(val, torch.Tensor):
        if any(not isinstance(s, int) for s in val.shape):
            from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

            if free_unbacked_symbols(val):  # a size only the data decides (nonzero, boolean masks, unique)
                raise data_dependent_error(what, "")
            raise LoweringError(
                f"{what} has a symbolic shape {tuple(val.shape)}: the neuron compiler needs static shapes; "
                "pad inputs to fixed sizes with trn_notebook.bucketed(...) instead of dynamic=True"
            )
        if val.layout != torch.strided:
            raise LoweringError(f"{what} has layout {val.layout}; only strided tensors compile for neuron")
        if val.dtype not in DTYPE_NAMES:
            raise LoweringError(f"{what} has dtype {val.dtype}, which the neuron compiler does not support")
        return TensorType.of(val)
    if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool):  # a tensor's value read into a size (.item())
        raise data_dependent_error(f"{what} (a tensor value read as a Python number, {val!r})", "")
    raise LoweringError(f"{what} produces a {type(val).__name__} ({val!r}); only tensor results compile for neuron")


class _Lowerer:
    def __init__(self, name: str) -> None:
        self.name = name
        self.env: dict[torch.fx.Node, Any] = {}
        self.counter = 0

    def fresh(self) -> str:
        name = f"v{self.counter}"
        self.counter += 1
        return name

    def const(self, v: Any, node: torch.fx.Node) -> Any:
        if isinstance(v, torch.fx.Node):
            got = self.env[v]
            if isinstance(got, list):
                return [Ref(x) if x else None for x in got]
            if got is None:
                return None
            return Ref(got)
        if isinstance(v, torch.dtype):
            if v not in DTYPE_NAMES:
                raise LoweringError(f"{node.target}: dtype {v} is not supported by the neuron compiler")
            return DType(DTYPE_NAMES[v])
        if isinstance(v, list | tuple):
            return [self.const(x, node) for x in v]
        if isinstance(v, bool | str) or v is None:
            return v
        if isinstance(v, int | float):  # plain Python numbers (numpy scalars and the like normalised)
            return float(v) if isinstance(v, float) else int(v)
        if isinstance(v, complex):  # complex scalars (the backward of complex mul and polar: ``x * 1j``)
            return complex(v)
        raise LoweringError(f"{node.target}: argument {v!r} ({type(v).__name__}) cannot be lowered")

    def call(self, node: torch.fx.Node) -> Node | None:
        target = node.target
        if target is operator.getitem:
            src, idx = node.args
            self.env[node] = self.env[src][idx]
            return None
        if target is torch.ops.higher_order.with_effects:  # an effectful op (a check that may raise) with its token
            return self.effect(node)
        op = LOWERINGS.get(target)
        kernel = entry_for(target) if op is None else None
        prefix: tuple[Any, ...] = ()
        if kernel is not None:  # a registered custom tile kernel: kernel_call('ns::name@version', args...)
            op, prefix = "kernel_call", (kernel.ref,)
        elif op is None and isinstance(target, torch._ops.OpOverload) and target.namespace not in ("aten", "prims"):
            op = "custom_call"  # another torch.library custom op runs as a library call of the runtime
            prefix = (f"{target.namespace}.{target._opname}.{target._overloadname}",)
        elif op is None:
            try:  # a CPU fallback of eager runs on the graph's host; a native pointwise op with no record
                op = lowering_of(target)
            except DataDependentShapeError:
                raise data_dependent_error(str(target), str(user_source(node) or "")) from None
            except UnsupportedOpError as exc:
                raise LoweringError(f"{exc} (user code: {user_source(node) or 'unknown'})") from None
            prefix = (qualified(target),) if op is not None else ()
        if op is None:
            raise LoweringError(
                f"the neuron compiler has no lowering for {target} (user code: {user_source(node) or 'unknown'}); "
                "run this part eagerly (torch.compiler.disable) or set options={'fallback_execution': True}"
            )
        args = prefix + tuple(self.const(a, node) for a in node.args)
        kwargs = []
        internal_format = False
        for k, v in node.kwargs.items():
            if k in _DROP_KWARGS:
                continue
            if k == "memory_format":
                if v in (torch.contiguous_format, torch.preserve_format, None):
                    continue
                if _format_asked_by_user(node):
                    raise LoweringError(str(memory_format_error(v, str(target).removeprefix("aten."))))
                internal_format = True  # PyTorch's own layout choice: the device stores it contiguous (same values)
                continue
            kwargs.append((k, self.const(v, node)))
        val = node.meta.get("val")
        if internal_format and isinstance(val, torch.Tensor):
            val = val.contiguous()  # the IR type says what runs: a contiguous result
        if isinstance(val, list | tuple):
            types = tuple(_type_of(v, f"{target}[{i}]") for i, v in enumerate(val))
            outs = tuple(self.fresh() if t is not None else "" for t in types)
            self.env[node] = list(outs)
        else:
            types = (_type_of(val, str(target)),)
            outs = (self.fresh(),)
            self.env[node] = outs[0]
        return Node(outs, types, op, args, tuple(kwargs), user_source(node))

    def effect(self, node: torch.fx.Node) -> Node:
        """``with_effects(token, op, *args)``: ``host_effect('aten.op.overload', %token, ...)``, a host call that
        returns the token (then the op's results), when eager runs ``op`` as a CPU fallback
        (``_linalg_check_errors``, which raises for a singular matrix as eagerly); else :class:`LoweringError`."""
        token, target, *rest = node.args
        try:
            host = lowering_of(target) == HOST_CALL
        except (DataDependentShapeError, UnsupportedOpError):
            host = False
        if not host:
            raise LoweringError(
                f"the neuron compiler has no lowering for the effectful op {target} (user code: "
                f"{user_source(node) or 'unknown'}); run this part eagerly (torch.compiler.disable)"
            )
        args = (qualified(target), self.const(token, node), *(self.const(a, node) for a in rest))
        kwargs = tuple((k, self.const(v, node)) for k, v in node.kwargs.items())
        val = node.meta.get("val")
        vals = list(val) if isinstance(val, list | tuple) else [val]
        vals += [None] * (2 - len(vals))  # (token, results...): always unpacked, at least two results
        types = tuple(_type_of(v, f"{target}[{i}]") for i, v in enumerate(vals))
        outs = tuple(self.fresh() if t is not None else "" for t in types)
        self.env[node] = list(outs)
        return Node(outs, types, HOST_EFFECT, args, kwargs, user_source(node))


def _fetch_attr(gm: torch.nn.Module, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def lift_constants(gm: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, list[torch.Tensor]]:
    """``gm`` with every ``get_attr`` tensor (``_tensor_constant0``, lifted constants, buffers AOT kept
    as attributes) turned into a trailing graph input, and those tensors in input order.

    The compiled graph stays data-free (its IR text and cache key hold no tensor values); the
    executable appends the constants to its arguments on every call. ``gm`` itself is unchanged
    (fallback execution runs it as is). Raises :class:`LoweringError` for a non-tensor attribute.
    """
    attrs = [n for n in gm.graph.nodes if n.op == "get_attr"]
    if not attrs:
        return gm, []
    graph = torch.fx.Graph()
    mapping: dict[torch.fx.Node, torch.fx.Node] = {}
    consts: list[torch.Tensor] = []
    for node in gm.graph.nodes:  # placeholders first, in their order
        if node.op == "placeholder":
            mapping[node] = graph.node_copy(node, lambda n: mapping[n])
    seen: dict[str, torch.fx.Node] = {}
    for node in attrs:
        target = str(node.target)
        value = _fetch_attr(gm, target)
        if not isinstance(value, torch.Tensor):
            raise LoweringError(
                f"graph attribute {target} is a {type(value).__name__}, not a tensor; the neuron compiler lifts "
                "only tensor constants into graph inputs"
            )
        if target not in seen:
            ph = graph.placeholder("const_" + re.sub(r"\W", "_", target))
            ph.meta["val"] = value
            seen[target] = ph
            consts.append(value)
        mapping[node] = seen[target]
    for node in gm.graph.nodes:
        if node.op not in ("placeholder", "get_attr"):
            mapping[node] = graph.node_copy(node, lambda n: mapping[n])
    return torch.fx.GraphModule(gm, graph), consts


def lower(gm: torch.fx.GraphModule, name: str) -> Graph:
    """Lower an ATen FX graph with fake-tensor metadata to IR; raises :class:`LoweringError`."""
    lw = _Lowerer(name)
    inputs: list[tuple[str, TensorType]] = []
    nodes: list[Node] = []
    outputs: tuple[Ref | None, ...] = ()
    consts: dict[int, Any] = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            val = node.meta.get("val")
            t = _type_of(val, f"input {node.name}")
            if t is None:
                raise LoweringError(f"input {node.name} is not a tensor")
            pname = re.sub(r"\W", "_", node.name)
            inputs.append((pname, t))
            lw.env[node] = pname
        elif node.op == "call_function":
            n = lw.call(node)
            if n is not None:
                nodes.append(n)
        elif node.op == "output":
            outs = node.args[0]
            outs = outs if isinstance(outs, list | tuple) else (outs,)
            refs: list[Ref | None] = []
            for i, o in enumerate(outs):
                if o is None:
                    refs.append(None)
                elif isinstance(o, torch.fx.Node):
                    got = lw.env[o]
                    refs.append(Ref(got) if isinstance(got, str) and got else None)
                elif isinstance(o, bool | int | float):  # a Python number the graph returns: the executable adds it
                    refs.append(None)
                    consts[i] = o
                else:
                    raise LoweringError(
                        f"graph output {i} is a {type(o).__name__} ({o!r}); a compiled graph returns tensors, "
                        "None and Python numbers only"
                    )
            outputs = tuple(refs)
        else:
            raise LoweringError(f"FX node kind {node.op!r} ({node.target}) is not supported by the neuron compiler")
    meta = ((CONSTANT_OUTPUTS, format_constant_outputs(consts)),) if consts else ()
    g = Graph(name, tuple(inputs), tuple(nodes), outputs, meta)
    try:
        verify(g)
    except IRError as exc:
        raise LoweringError(str(exc)) from exc
    return g
