"""Codegen: turn an IR graph into a :class:`Program`, a list of precomputed closures over CPU torch ops.

Every value gets a slot in a flat environment list; each step reads its argument slots, calls the
op's implementation and stores its results; slots are released right after their last use (the
liveness the memory planner computed), so host memory behaves like eager's. No source text is
generated or executed: the closures are built from the op registry, so a graph parsed from the
cache runs exactly the code this module defines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._ops import OpOverload, OpOverloadPacket

from .ir import DType, Graph, IRError, Ref
from .ops import get

Env = list[Any]
Step = Callable[[Env], None]


def _resolver(value: Any, slots: dict[str, int]) -> tuple[bool, Any]:
    """(is_dynamic, getter-or-constant) for one argument."""
    if isinstance(value, Ref):
        idx = slots[value.name]
        return True, idx
    if isinstance(value, DType):
        return False, value.torch
    if isinstance(value, list | tuple):
        parts = [_resolver(v, slots) for v in value]
        if not any(dyn for dyn, _ in parts):
            return False, [p for _, p in parts]
        getters = [(dyn, p) for dyn, p in parts]

        def get_list(env: Env, getters: list[tuple[bool, Any]] = getters) -> list[Any]:
            return [env[p] if dyn is True else (p(env) if dyn == "f" else p) for dyn, p in getters]

        return "f", get_list  # type: ignore[return-value]
    return False, value


def returns_list(fn: Any) -> bool:
    """Whether ``fn`` (an op's implementation) returns a list of tensors (``unbind``, ``split``): its
    results are unpacked into the node's outs even when there is only one (``unbind`` of a size-1 dim)."""
    schema = getattr(fn, "_schema", None)
    return schema is not None and len(schema.returns) == 1 and str(schema.returns[0].type) == "List[Tensor]"


def direct(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The cheapest call of ``fn`` that is semantically identical: an ATen ``OpOverload`` or ``OpOverloadPacket``
    is called through its C++ builtin (``fn._op``; its ``__call__`` is only ``self._op(*args, **kwargs)``, a Python
    frame of ~2 us per node), anything else as it is (a torchbind overload, whose ``__call__`` does more). Raises
    nothing."""
    if isinstance(fn, OpOverload) and type(fn) is OpOverload:
        return fn._op  # type: ignore[no-any-return]
    if isinstance(fn, OpOverloadPacket) and type(fn) is OpOverloadPacket and not fn._has_torchbind_op_overload:
        return fn._op  # type: ignore[no-any-return]
    return fn


def _make_step(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    outs: list[int],
    slots: dict[str, int],
    many: bool = False,
) -> Step:
    specs = [_resolver(a, slots) for a in args]
    kw_specs = {k: _resolver(v, slots) for k, v in kwargs.items()}
    simple = all(dyn is True for dyn, _ in specs) and not kw_specs and len(outs) == 1 and not many
    if simple and outs[0] >= 0:
        o = outs[0]
        idx = [p for _, p in specs]
        if len(idx) == 1:
            (a,) = idx

            def step1(env: Env) -> None:
                env[o] = fn(env[a])

            return step1
        if len(idx) == 2:
            a, b = idx

            def step2(env: Env) -> None:
                env[o] = fn(env[a], env[b])

            return step2
        if len(idx) == 3:
            a, b, c = idx

            def step3(env: Env) -> None:
                env[o] = fn(env[a], env[b], env[c])

            return step3
    const_kw = {k: p for k, (dyn, p) in kw_specs.items() if dyn is False}
    dyn_kw = [(k, dyn, p) for k, (dyn, p) in kw_specs.items() if dyn is not False]

    def call(env: Env) -> Any:
        a = [env[p] if dyn is True else (p(env) if dyn == "f" else p) for dyn, p in specs]
        if dyn_kw:
            kw = dict(const_kw)
            for k, dyn, p in dyn_kw:
                kw[k] = env[p] if dyn is True else p(env)
            return fn(*a, **kw)
        return fn(*a, **const_kw)

    if len(outs) == 1 and not many:
        o = outs[0]

        def step_one(env: Env) -> None:
            env[o] = call(env)

        return step_one

    def step_many(env: Env) -> None:
        result = call(env)
        for i, slot in enumerate(outs):
            if slot >= 0:
                env[slot] = result[i]

    return step_many


class Program:
    """A graph compiled to closures: ``program(inputs) -> outputs`` on CPU tensors."""

    __slots__ = ("n_inputs", "n_slots", "outputs", "plan", "step_ops")

    def __init__(self, graph: Graph, *, check_types: bool = False) -> None:
        slots: dict[str, int] = {}
        for name, _ in graph.inputs:
            slots[name] = len(slots)
        for n in graph.nodes:
            for o in n.outs:
                if o:
                    slots[o] = len(slots)
        last_use: dict[int, int] = {}
        for i, n in enumerate(graph.nodes):
            for r in n.refs():
                if r not in slots:
                    raise IRError(f"graph {graph.name}: %{r} is not defined")
                last_use[slots[r]] = i
        keep = {slots[o.name] for o in graph.outputs if o is not None}
        frees: list[list[int]] = [[] for _ in graph.nodes]
        for slot, i in last_use.items():
            if slot not in keep:
                frees[i].append(slot)
        plan: list[tuple[Step, tuple[int, ...]]] = []
        for i, n in enumerate(graph.nodes):
            op = get(n.op)
            outs = [slots[o] if o else -1 for o in n.outs]
            step = _make_step(direct(op.impl), n.args, dict(n.kwargs), outs, slots, many=returns_list(op.impl))
            if check_types:
                step = _checked(step, n, outs)
            plan.append((step, tuple(frees[i])))
        self.plan = plan
        self.step_ops = [n.op for n in graph.nodes]
        self.n_inputs = len(graph.inputs)
        self.n_slots = len(slots)
        self.outputs = tuple(-1 if o is None else slots[o.name] for o in graph.outputs)

    def __call__(self, inputs: list[Any] | tuple[Any, ...]) -> list[Any]:
        env: Env = list(inputs)
        env.extend([None] * (self.n_slots - len(env)))
        for step, frees in self.plan:
            step(env)
            for f in frees:
                env[f] = None
        return [None if o < 0 else env[o] for o in self.outputs]


def _checked(step: Step, node: Any, outs: list[int]) -> Step:
    def run(env: Env) -> None:
        step(env)
        for slot, t in zip(outs, node.types):
            if slot < 0 or t is None:
                continue
            v = env[slot]
            if not isinstance(v, torch.Tensor) or tuple(v.shape) != t.shape:
                got = tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__
                raise IRError(f"{node.op} produced {got}, IR declares {t}")

    return run


def run_graph(graph: Graph, inputs: list[torch.Tensor], *, check_types: bool = False) -> list[Any]:
    """Interpret ``graph`` on CPU tensors (tests, the property check, eager fallbacks)."""
    return Program(graph, check_types=check_types)(inputs)
