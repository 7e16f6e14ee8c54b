"""The IR's op set: each op's kind, engine and CPU implementation, and the ATen overloads it lowers from.

Kinds drive the passes: ``view`` (no data moves), ``pointwise`` (fusible in chains), ``reduction``
(a pointwise chain may fuse into it), ``matmul`` (TensorE), ``library`` (a hand-written kernel of
the runtime: norms, softmax, pooling, gathers), ``copy`` (DMA), ``factory`` and ``host`` (a host call: a CPU
fallback inside the graph, :mod:`.host_call`). ``core`` ops are
what decomposition leaves; the others appear only between lowering and decomposition.
Unknown names are rejected everywhere (lowering, parsing, codegen).

The op set is built from the device's op registry: each record's ``lower`` names the IR op its
overloads lower to and the defining record carries the IR op's ``kind`` (``device/ops/op_table.py``);
an op is ``core`` unless the decomposition table (:mod:`.decompositions`) has a rule for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..device.numerics.calls import check_node, round_node
from ..device.ops.policy import registry
from ..device.ops.registry import IR_KINDS
from . import varlen
from .decompositions import DECOMPOSITIONS
from .host_call import ATEN_POINTWISE, HOST_CALL, HOST_EFFECT, aten_pointwise, host_call, host_effect
from .kernel_call import kernel_call
from .namespaces import is_user_namespace

KINDS = IR_KINDS


@dataclass(frozen=True)
class OpDef:
    """What the compiler knows about one IR op."""

    name: str
    kind: str
    impl: Callable[..., Any]
    core: bool = True  # False: rewritten by a rule of the decomposition table
    transcendental: bool = False  # runs on the ScalarE (activation) engine
    flops: Callable[[Any, int], float] | None = None  # the record's cost function (shapes, out elements)
    random: bool = False  # random or uninitialised output: never merged by CSE
    reduces: bool = False  # a library kernel that reduces (a pointwise chain may fuse into it)
    i64_index: bool = False  # keeps 64-bit index inputs through dtype legalisation
    int_to_i64: bool = False  # integer inputs give int64 unless dtype= is given (torch's sum/prod/cumsum rule)


OPS: dict[str, OpDef] = {}
LOWERINGS: dict[Any, str] = {}  # ATen OpOverload -> IR op name


def _tensor_overloads(packet: Any) -> list[Any]:
    """Every functional overload of ``packet`` that returns tensors (no ``out=`` variants)."""
    found = []
    for n in packet.overloads():
        ov = getattr(packet, n)
        rets = ov._schema.returns
        if "out" in n or not rets or not all("Tensor" in str(r.type) for r in rets):
            continue
        if any(a.alias_info is not None and a.alias_info.is_write for a in ov._schema.arguments):
            continue
        found.append(ov)
    return found


def _build() -> None:
    """Fill :data:`OPS` and :data:`LOWERINGS` from the op registry's records (``lower``, ``kind``)."""
    defined: dict[str, Any] = {}
    impls: dict[str, Any] = {}
    for record in registry.records():
        if not record.lower:
            continue
        packet = getattr(getattr(torch.ops, record.ns), record.name)
        for overload, ir_name in record.lower:
            if overload == "*":  # every tensor overload, resolved per call by the packet
                for ov in _tensor_overloads(packet):
                    LOWERINGS[ov] = ir_name
                impls.setdefault(ir_name, packet)
            else:
                ov = getattr(packet, overload)
                LOWERINGS[ov] = ir_name
                if record.kind is not None:
                    impls.setdefault(ir_name, ov)
            if record.kind is not None:
                defined[ir_name] = record
    for ir_name, r in defined.items():
        core = ir_name not in DECOMPOSITIONS
        OPS[ir_name] = OpDef(
            ir_name,
            r.kind,
            impls[ir_name],
            core,
            r.transcendental,
            r.flops,
            r.random,
            r.reduces,
            r.i64_index,
            r.int_to_i64,
        )
    missing = sorted(set(LOWERINGS.values()) - set(OPS))
    if missing:
        raise AssertionError(f"IR ops lowered to but defined by no record (set kind=...): {missing}")


_build()
# Custom tile kernels (trn_notebook.nki.nki_op): an IR-only op, not an ATen record; lowering emits it for
# any custom op whose OpOverload carries a kernel entry (see kernel_call.py). A kernel of its own.
OPS["kernel_call"] = OpDef("kernel_call", "library", kernel_call)
# The numerics policy's rounding (trainium mode, inserted by the numerics pass; device/numerics/calls.py)
OPS["numerics_round"] = OpDef("numerics_round", "pointwise", round_node)
# The ScalarE valid-range check of an activation's input (trainium graphs only): returns its input, a view
# (no cost, no bytes: a simulator check, not a hardware instruction)
OPS["numerics_check"] = OpDef("numerics_check", "view", check_node)
# ATen ops with no lowering of their own (host_call.py): a CPU fallback of eager runs on the graph's host, charged
# as eager charges it; a native pointwise op with no record is one pointwise node
# host_call: random (RNG fallbacks are never merged by CSE); i64_index (the CPU kernel gets int64 indices, as eager)
OPS[HOST_CALL] = OpDef(HOST_CALL, "host", host_call, random=True, i64_index=True)
OPS[HOST_EFFECT] = OpDef(HOST_EFFECT, "host", host_effect, random=True, i64_index=True)
OPS[ATEN_POINTWISE] = OpDef(ATEN_POINTWISE, "pointwise", aten_pointwise)
IR_ONLY = frozenset(
    {"kernel_call", "custom_call", "numerics_round", "numerics_check", HOST_CALL, HOST_EFFECT, ATEN_POINTWISE}
    | {"varlen_attn", "varlen_attn_backward"}  # lowered from torch_attn custom ops (varlen.py), not ATen records
)


def _histc(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``histc``; integer inputs (MoE routers off-CPU) count in float32 and keep their dtype, as on the device."""
    if x.is_floating_point():
        return torch.ops.aten.histc.default(x, *args, **kwargs)
    return torch.ops.aten.histc.default(x.float(), *args, **kwargs).to(x.dtype)


def resolve_custom_op(name: str) -> Any:
    """``torch.ops.<ns>.<op>.<overload>`` named ``"ns.op.overload"``: a registered custom op of a user namespace.

    Raises ``KeyError`` for a malformed name, an op of PyTorch's own namespaces (aten/prims lower to
    their own IR ops; ``inductor``, ``quantized``, … run with unchecked geometry: see
    :mod:`.namespaces`), or an op not registered in this process (e.g. its library is not imported).
    """
    parts = name.split(".") if isinstance(name, str) else []
    if len(parts) != 3:
        raise KeyError(f"custom_call {name!r}: expected 'namespace.op.overload'")
    ns, op, overload = parts
    if ns in ("aten", "prims"):
        raise KeyError(f"custom_call {name!r}: aten/prims ops lower to their own IR ops")
    if not is_user_namespace(ns):
        raise KeyError(f"custom_call {name!r}: the namespace {ns!r} is PyTorch's; the IR may call only user custom ops")
    try:
        return getattr(getattr(getattr(torch.ops, ns), op), overload)
    except (AttributeError, RuntimeError) as exc:
        raise KeyError(f"custom op {name} is not registered in this process (import its library first)") from exc


def _custom_call(name: str, *args: Any, **kwargs: Any) -> Any:
    return resolve_custom_op(name)(*args, **kwargs)


OPS["histc"] = OpDef("histc", "library", _histc, reduces=OPS["histc"].reduces)
# A torch.library custom op (e.g. transformers::grouped_mm_fallback of MoE layers): a runtime library call.
# random: never merged by CSE; i64_index: the op gets int64 tensors as the user passed them (its own checks may
# insist on int64 targets, e.g. torch's linear_cross_entropy custom op)
OPS["custom_call"] = OpDef("custom_call", "library", _custom_call, random=True, i64_index=True)
# varlen_attn (TorchNeuron 2.34: native): PyTorch's torch_attn custom ops run as the device's flash-attention kernels
# per sequence (varlen.py: values as eager; cost over equal-length sequences, assumed)
OPS["varlen_attn"] = OpDef("varlen_attn", "library", varlen.varlen_forward, flops=varlen.varlen_flops)
OPS["varlen_attn_backward"] = OpDef(
    "varlen_attn_backward", "library", varlen.varlen_backward, flops=varlen.varlen_backward_flops
)
LOWERINGS[varlen.FORWARD] = "varlen_attn"
LOWERINGS[varlen.BACKWARD] = "varlen_attn_backward"

RANDOM_OPS = frozenset(name for name, d in OPS.items() if d.random)


def get(name: str) -> OpDef:
    """The op named ``name``; raises ``KeyError`` naming the op when unknown."""
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown IR op {name!r} ({len(OPS)} ops known, e.g. {sorted(OPS)[:8]})") from None


def engine_of(kinds: set[str], transcendental: bool) -> str:
    """The NeuronCore engine a fused kernel of these op kinds runs on."""
    if "matmul" in kinds:
        return "TensorE"
    if kinds <= {"view"}:
        return "none"
    if kinds & {"copy"} and kinds <= {"copy", "view"}:
        return "DMA"
    if "host" in kinds:
        return "host"  # a host call: the host CPU, charged as a CPU fallback when the graph runs
    if "library" in kinds:
        return "GpSimdE"
    if transcendental:
        return "ScalarE"
    return "VectorE"
