"""ATen ops the compiler has no lowering of its own for, decided by the op's eager placement (one rule):

* an op eager runs as a **CPU fallback** (linear algebra, FFT, cumulative max/min, 3-D pooling …: its record's
  category in ``device/ops/op_table.py``) becomes ``host_call('aten.<op>.<overload>', …)``: the graph's host runs
  the CPU kernel between the device kernels, and each call is charged exactly as eager charges the fallback
  (:func:`trn_notebook.device.eager.fallback.charge_fallback`: a sync, copies both ways, the modeled host compute, a
  ``cpu_fallback`` entry in the placement log), after the graph's launch;
* a **pointwise** op eager runs natively with no record of its own (``special_*``, ``digamma``, ``i0`` …)
  becomes ``aten_pointwise('aten.<op>.<overload>', …)``: a pointwise IR node (fusible, modeled as eager models
  it, one op per element);
* an op whose output shape depends on its input's values (``Tag.dynamic_output_shape``, or an unbacked size)
  is refused at compile time with :class:`DataDependentShapeError`: the device needs static shapes, as
  TorchNeuron does.

The name argument is resolved only to an ``aten`` overload of the right placement, so a graph parsed from the
cache cannot call anything else.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import torch

from .. import state as _state
from ..device.eager.fallback import charge_fallback, warn_once
from ..device.ops.policy import policy
from .ir import Graph, TensorType

HOST_CALL = "host_call"
HOST_EFFECT = "host_effect"  # an effectful CPU fallback (with_effects): returns its token, then its results
ATEN_POINTWISE = "aten_pointwise"
DATA_DEPENDENT = "data-dependent output shape"


class UnsupportedOpError(NotImplementedError):
    """An op the device policy marks ``unsupported`` (eager raises for it too): refused at compile time."""


class DataDependentShapeError(NotImplementedError):
    """An op whose output shape depends on tensor values: refused at compile time (static shapes only)."""


def qualified(op: torch._ops.OpOverload) -> str:
    """``'aten.<op>.<overload>'`` of an ATen overload (the IR's name argument)."""
    return f"aten.{op._opname}.{op._overloadname}"


def lowering_of(op: Any) -> str | None:
    """The generic IR op for ATen overload ``op`` (which has no lowering of its own), or ``None``.

    Raises :class:`DataDependentShapeError` for an op with a data-dependent output shape and
    :class:`UnsupportedOpError` for an op the device policy marks unsupported (with the policy's reason)."""
    if not isinstance(op, torch._ops.OpOverload) or op.namespace != "aten":
        return None
    if torch.Tag.dynamic_output_shape in op.tags:
        raise data_dependent_error(str(op), "")
    rule = policy.rule(op._opname, op)
    category = rule.category or "cpu_fallback"
    if category == "unsupported":
        raise UnsupportedOpError(
            f"aten::{op._opname} is not supported on the neuron device, eagerly or compiled: "
            f"{rule.reason or 'it is marked unsupported in the op policy'}"
        )
    if category == "cpu_fallback":
        return HOST_CALL
    if category == "native" and torch.Tag.pointwise in op.tags:
        return ATEN_POINTWISE
    return None


def data_dependent_error(what: str, source: str) -> DataDependentShapeError:
    """The refusal of a data-dependent output shape (``what``: the op or value; ``source``: the user's line)."""
    where = f" (user code: {source})" if source else ""
    return DataDependentShapeError(
        f"{what} has a {DATA_DEPENDENT}{where}: its size depends on the values of its input, and the neuron "
        "compiler needs static shapes, as TorchNeuron does; run this step eagerly (torch.compiler.disable) or "
        "use a fixed-size form (nonzero_static, masked_fill or torch.where instead of boolean indexing)"
    )


@functools.cache
def resolve(name: str, ir_op: str) -> torch._ops.OpOverload:
    """The ATen overload named ``'aten.<op>.<overload>'`` for IR op ``ir_op``; raises ``KeyError`` when it is
    malformed, not an ATen overload, or not of the placement ``ir_op`` stands for (a CPU fallback for
    ``host_call``, a native pointwise op for ``aten_pointwise``)."""
    parts = name.split(".") if isinstance(name, str) else []
    if len(parts) != 3 or parts[0] != "aten":
        raise KeyError(f"{ir_op} {name!r}: expected 'aten.op.overload'")
    try:
        op = getattr(getattr(torch.ops.aten, parts[1]), parts[2])
    except (AttributeError, RuntimeError) as exc:
        raise KeyError(f"{ir_op} {name!r}: no such ATen overload") from exc
    try:
        found = lowering_of(op)
    except (DataDependentShapeError, UnsupportedOpError):
        found = None
    if found != ir_op:
        raise KeyError(f"{ir_op} {name!r}: this op is not a {'CPU fallback' if ir_op == HOST_CALL else 'pointwise'} op")
    return op


class _Walls(threading.local):
    """Measured wall seconds of the host calls of the program running on this thread (None: not recording)."""

    walls: list[float] | None = None


_walls = _Walls()  # per thread: set only while a graph runs (HostCalls.run), so nothing survives a run to reset
_state.register("host_call_walls", _state.Globals(__name__, "_walls"), reset=False)


def host_call(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run CPU fallback ``name`` (``'aten.op.overload'``) on host tensors; records its wall for the executable."""
    import time

    op = resolve(name, HOST_CALL)
    t0 = time.perf_counter()
    out = op(*args, **kwargs)
    walls = _walls.walls
    if walls is not None:
        walls.append(time.perf_counter() - t0)
    return out


def host_effect(name: str, token: Any, *args: Any, **kwargs: Any) -> Any:
    """Run effectful CPU fallback ``name`` (it may raise, as eagerly); return ``(token, *results)`` (``(token,
    None)`` when the op returns nothing: the IR node has at least two results)."""
    out = host_call(name, *args, **kwargs)
    return (token, *(out if isinstance(out, tuple | list) else (out,)))


def aten_pointwise(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run the native pointwise ATen op ``name`` (``'aten.op.overload'``) on host tensors."""
    return resolve(name, ATEN_POINTWISE)(*args, **kwargs)


def _meta(t: TensorType) -> torch.Tensor:
    return torch.empty(t.shape, dtype=t.torch_dtype, device="meta")


class HostCalls:
    """The host calls of one graph, in program order, with their static charges: ``(base op name, input
    tensors, output tensors)`` as meta tensors of the IR types (a fallback's charge reads only sizes)."""

    def __init__(self, graph: Graph) -> None:
        types = graph.types()
        self.calls: list[tuple[str, list[torch.Tensor], list[torch.Tensor]]] = []
        for n in graph.nodes:
            if n.op not in (HOST_CALL, HOST_EFFECT):
                continue
            ins = [_meta(t) for r in n.refs() if (t := types.get(r)) is not None]
            results = n.types[1:] if n.op == HOST_EFFECT else n.types  # an effect's token is not a result
            outs = [_meta(t) for t in results if t is not None]
            self.calls.append((str(n.args[0]).split(".")[1], ins, outs))
        self.reason = {name: policy.rule(name).reason for name, _, _ in self.calls}

    def __bool__(self) -> bool:
        return bool(self.calls)

    def run(self, program: Any, inputs: list[Any]) -> tuple[list[Any], list[float]]:
        """``program(inputs)`` with the measured wall of each host call (in program order)."""
        previous = _walls.walls
        walls: list[float] = []
        _walls.walls = walls
        try:
            return program(inputs), walls
        finally:
            _walls.walls = previous

    def charge(self, walls: list[float] | None = None) -> None:
        """Charge every host call as eager charges its fallback (``walls``: measured; None in a dry run)."""
        for i, (name, ins, outs) in enumerate(self.calls):
            warn_once(name, self.reason[name])
            wall = walls[i] if walls is not None and i < len(walls) else 0.0
            charge_fallback(name, ins, outs, wall, f"fallback aten::{name} (compiled graph)")
