"""How one op follows the ``trainium`` numerics policy, by its numerics class in the op registry.

:func:`call` replaces the CPU kernel call of :mod:`..eager.dispatch` while the policy is active (one check
there: ``numerics.active``). Per class (:meth:`~..ops.registry.OpRecord.numerics_class`):

* ``matmul`` — floating inputs cast per auto-cast (``matmult``/``all``: FP32 operands rounded to the
  cast type; a bias, mask or addend is not a TensorE operand and is not cast), low-precision inputs
  upcast, the product computed in FP32 (TensorE/PSUM accumulate in FP32), every floating output rounded
  once to the dtype the op returns (RNE, or seeded stochastic rounding). Integer inputs go through FP32
  too (no integer datapath; exact only below 2^24).
* ``scatter`` (scatter-with-compute: ``scatter_add``, ``index_add``, ``scatter_reduce``) — as ``elementwise``
  for floats; integer data (not the index) through FP32 like an integer matmul (no integer datapath).
* ``elementwise``/``reduction``/``activation`` — FP32 internal math with casts at the boundaries. The
  CPU kernels already compute low-precision inputs in FP32 and round once (RNE), so they run as they
  are unless stochastic rounding or ``autocast="all"`` needs the FP32 value; ``activation`` also
  checks the documented valid input range (:class:`NeuronNumericsWarning`; the CPU value is kept).
* ``integer`` (bitwise ops) — exact; ``movement`` and ``host`` (CPU fallbacks) — unchanged.
* int64 results of every computing class wrap to int32 when ``downcast_int64`` (two's complement).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from ... import state as _state
from ..ops.policy import policy as _registry
from ..ops.registry import NumericsClass
from ..source_lines import SourceLine, user_frame
from .policy import (
    NeuronNumericsWarning,
    NumericsPolicy,
    integer_from_fp32,
    integer_to_fp32,
    no_integer_datapath,
    numerics,
    warn_integer_fp32,
)

_Tensor = torch.Tensor
LOW_FLOATS = frozenset({torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2})
_COMPUTING = frozenset({"matmul", "elementwise", "reduction", "activation", "scatter", "integer"})
INDEX_ARGS = frozenset({"index", "indices"})  # a scatter's positions: integers that stay integers
# Arguments of matmul-class ops that are not TensorE operands (added or masked after the product).
NOT_OPERANDS = frozenset({"bias", "attn_mask", "input_bias"})
ADDEND_OPS = ("addmm", "addbmm", "baddbmm", "addmv", "addr", "_addmm_activation")
# Mantissa bits and smallest subnormal of each rounding target (IEEE/OCP formats)
_FORMATS: dict[torch.dtype, tuple[int, float]] = {
    torch.bfloat16: (7, 2.0**-133),
    torch.float16: (10, 2.0**-24),
    torch.float8_e4m3fn: (3, 2.0**-9),
    torch.float8_e5m2: (2, 2.0**-16),
}
_TF32 = (10, 2.0**-149)

_classes: dict[Any, tuple[int, NumericsClass, Any]] = {}  # op -> (registry version, class, valid range)
_out_dtypes: dict[Any, tuple[torch.dtype | None, ...] | None] = {}  # (op, input dtypes) -> output dtypes
_state.register("numerics_op_cache", _state.Globals(__name__, "_classes", "_out_dtypes"), reset=False)


def classify(op: torch._ops.OpOverload) -> tuple[NumericsClass, Any]:
    """The numerics class and valid range of ``op`` from its registry record (cached per registry version)."""
    hit = _classes.get(op)
    if hit is not None and hit[0] == _registry.version:
        return hit[1], hit[2]
    name = op._schema.name.split("::", 1)[-1]
    record = _registry.rule(name, op)
    valid = record.valid_range
    if name.startswith("_foreach_"):  # _foreach_sqrt(_): the per-tensor op's range, checked on every tensor
        base = _registry.get(name.removeprefix("_foreach_").rstrip("_"))
        valid = base.valid_range if base is not None else None
    entry = (_registry.version, record.numerics_class(op), valid)
    _classes[op] = entry
    return entry[1], entry[2]


# -- rounding ------------------------------------------------------------------------------------
def _grid(x: torch.Tensor, fmt: tuple[int, float]) -> torch.Tensor:
    """The spacing of the target format's values around each element of ``x`` (float64)."""
    mant, tiny = fmt
    e = torch.floor(torch.log2(x.abs().clamp_min(tiny)))
    return torch.exp2(e - mant).clamp_min(tiny)


def round_stochastic(x: torch.Tensor, dtype: torch.dtype, generator: torch.Generator) -> torch.Tensor:
    """``x`` (float32) rounded to ``dtype`` stochastically: up with probability equal to the distance to
    the lower neighbour in units of the spacing (unbiased in expectation); exact values are unchanged."""
    fmt = _FORMATS.get(dtype)
    if fmt is None:
        return x.to(dtype)
    xd = x.double()
    step = _grid(xd, fmt)
    low = torch.floor(xd / step) * step
    frac = (xd - low) / step
    u = torch.rand(x.shape, generator=generator, dtype=torch.float64)
    out = torch.where(u < frac, low + step, low)
    out = torch.where(torch.isfinite(xd), out, xd)
    return out.to(dtype)


def round_tf32(x: torch.Tensor) -> torch.Tensor:
    """FP32 values rounded to TF32's 10-bit mantissa (RNE), kept in float32."""
    xd = x.double()
    step = _grid(xd, _TF32)
    return torch.where(torch.isfinite(xd), torch.round(xd / step) * step, xd).float()


def round_to(x: torch.Tensor, dtype: torch.dtype, policy: NumericsPolicy) -> torch.Tensor:
    """An FP32 result rounded once to ``dtype`` under ``policy`` (RNE or stochastic; an integer ``dtype``: the
    FP32 result of an op with no integer datapath, converted back)."""
    if x.dtype == dtype:
        return x
    if not dtype.is_floating_point:
        return integer_from_fp32(x, dtype)
    if policy.stochastic_rounding and x.dtype == torch.float32 and dtype in _FORMATS:
        return round_stochastic(x, dtype, numerics.generator)
    return x.to(dtype)


def autocast_round(x: torch.Tensor, policy: NumericsPolicy) -> torch.Tensor:
    """An FP32 operand as auto-cast sees it: rounded to the cast type (RNE), kept in float32."""
    if policy.autocast_type == "tf32":
        return round_tf32(x)
    return x.to(policy.cast_dtype).float()


_ROUND_TARGETS = {"bf16": torch.bfloat16, "f16": torch.float16, "fp8_e4m3": torch.float8_e4m3fn}


def round_node(x: torch.Tensor, *, target: str, stochastic: bool, dtype: torch.dtype) -> torch.Tensor:
    """The compiler's ``numerics_round`` IR op: ``x`` rounded to ``target`` (``bf16``/``f16``/``fp8_e4m3``/
    ``tf32``; RNE, or stochastic when ``stochastic``), stored as ``dtype``; ``target="int"``: the FP32 result of
    an op with no integer datapath converted back to the integer ``dtype``."""
    if target == "int":
        return integer_from_fp32(x, dtype)
    x32 = x.float()
    if target == "tf32":
        return round_tf32(x32).to(dtype)
    low = _ROUND_TARGETS[target]
    rounded = round_stochastic(x32, low, numerics.generator) if stochastic else x32.to(low)
    return rounded if rounded.dtype == dtype else rounded.to(dtype)


# -- the per-op call -----------------------------------------------------------------------------
def call(info: Any, hargs: list[Any], kwargs: dict[str, Any]) -> Any:
    """Run ``info``'s CPU kernel on host tensors under the policy in force (the ``trainium`` path of dispatch)."""
    policy = numerics.policy
    cls, valid = classify(info.op)
    if cls == "movement" or cls == "host":
        return info.call(*hargs, **kwargs)
    if valid is not None:
        _check_range(info.name, valid, hargs)
    if cls == "matmul" and (policy.autocast != "none" or _any_not_fp32(hargs, kwargs)):
        ints = [t.dtype for t in _tensors(hargs, kwargs) if no_integer_datapath(t.dtype)]
        if ints:
            warn_integer_fp32(f"aten::{info.name}", ints[0], "dot")
        out = _fp32_call(info, hargs, kwargs, policy, _matmul_prep(info, hargs, policy))
    elif cls == "scatter" and _integer_data(info, hargs, kwargs):
        warn_integer_fp32(f"aten::{info.name}", _integer_dtype(info, hargs, kwargs), "scatter")
        out = _fp32_call(info, hargs, kwargs, policy, _scatter_prep(info))
    elif cls != "integer" and _needs_fp32(hargs, kwargs, policy):
        out = _fp32_call(info, hargs, kwargs, policy, _elementwise_prep(policy))
    else:
        out = info.call(*hargs, **kwargs)
    if policy.downcast_int64 and cls in _COMPUTING:
        _wrap_int64(out)
    return out


Prep = Callable[[torch.Tensor, int], torch.Tensor]


def _needs_fp32(hargs: list[Any], kwargs: dict[str, Any], policy: NumericsPolicy) -> bool:
    """Whether the CPU kernel's own FP32-internal, RNE-rounded result differs from the policy's."""
    want = set(LOW_FLOATS) if policy.stochastic_rounding else set()
    if policy.autocast == "all":
        want.add(torch.float32)
    if not want:
        return False
    return any(t.dtype in want for t in _tensors(hargs, kwargs))


def _any_not_fp32(hargs: list[Any], kwargs: dict[str, Any]) -> bool:
    return any(t.dtype != torch.float32 for t in _tensors(hargs, kwargs))


def _tensors(hargs: list[Any], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    found = []
    for a in (*hargs, *kwargs.values()):
        if isinstance(a, _Tensor):
            found.append(a)
        elif isinstance(a, list | tuple):
            found.extend(x for x in a if isinstance(x, _Tensor))
    return found


def _matmul_prep(info: Any, hargs: list[Any], policy: NumericsPolicy) -> Prep:
    schema = info.op._schema.arguments
    cast = policy.autocast in ("matmult", "all")
    skip_self = info.name in ADDEND_OPS

    def prep(t: torch.Tensor, pos: int) -> torch.Tensor:
        if no_integer_datapath(t.dtype):
            return integer_to_fp32(t)  # integer matmul: through FP32 (EVRF035)
        name = schema[pos].name if 0 <= pos < len(schema) else ""
        operand = name not in NOT_OPERANDS and not (skip_self and pos == 0)
        if t.dtype == torch.float32:
            return autocast_round(t, policy) if cast and operand else t
        return t.float() if t.dtype in LOW_FLOATS else t

    return prep


def _data_args(info: Any, hargs: list[Any], kwargs: dict[str, Any]) -> list[tuple[int, Any]]:
    schema = info.op._schema.arguments
    names = [a.name for a in schema]
    pos = [(i, a) for i, a in enumerate(hargs) if i >= len(names) or names[i] not in INDEX_ARGS]
    return pos + [(-1, v) for k, v in kwargs.items() if k not in INDEX_ARGS]


def scatter_computes(names: list[str], args: Any, kwargs: Any) -> bool:
    """Whether a ``scatter``-class op combines values (``index_put`` only with ``accumulate=True``; a plain
    scatter overwrites and keeps integers exact). ``names`` are the schema's argument names."""
    if "accumulate" not in names:
        return True
    pos = names.index("accumulate")
    return bool(args[pos] if pos < len(args) else dict(kwargs).get("accumulate", False))


def _integer_data(info: Any, hargs: list[Any], kwargs: dict[str, Any]) -> bool:
    """Whether a scatter-with-compute combines integer data (its index aside)."""
    if not scatter_computes([a.name for a in info.op._schema.arguments], hargs, kwargs):
        return False
    return any(isinstance(a, _Tensor) and no_integer_datapath(a.dtype) for _, a in _data_args(info, hargs, kwargs))


def _integer_dtype(info: Any, hargs: list[Any], kwargs: dict[str, Any]) -> torch.dtype:
    """The dtype of a scatter-with-compute's first integer data tensor."""
    return next(
        a.dtype for _, a in _data_args(info, hargs, kwargs) if isinstance(a, _Tensor) and no_integer_datapath(a.dtype)
    )


def _scatter_prep(info: Any) -> Prep:
    schema = info.op._schema.arguments

    def prep(t: torch.Tensor, pos: int) -> torch.Tensor:
        index = 0 <= pos < len(schema) and schema[pos].name in INDEX_ARGS
        return integer_to_fp32(t) if not index and no_integer_datapath(t.dtype) else t

    return prep


def _elementwise_prep(policy: NumericsPolicy) -> Prep:
    def prep(t: torch.Tensor, pos: int) -> torch.Tensor:
        if t.dtype in LOW_FLOATS:
            return t.float()
        if t.dtype == torch.float32 and policy.autocast == "all":
            return autocast_round(t, policy)
        return t

    return prep


def _fp32_call(info: Any, hargs: list[Any], kwargs: dict[str, Any], policy: NumericsPolicy, prep: Prep) -> Any:
    """Call the kernel on prepared (FP32) inputs, then round each result once to the dtype the op returns."""
    targets = _result_dtypes(info.op, hargs, kwargs)
    originals: dict[int, torch.Tensor] = {}

    def one(a: Any, pos: int) -> Any:
        if isinstance(a, _Tensor):
            n = prep(a, pos)
            if n is not a:
                originals[id(n)] = a
            return n
        if isinstance(a, list | tuple) and a and isinstance(a[0], _Tensor):
            return type(a)(one(x, pos) for x in a)
        return a

    args = [one(a, i) for i, a in enumerate(hargs)]
    kw = {k: one(v, -1) for k, v in kwargs.items()}
    out = info.call(*args, **kw)
    all_cast = policy.autocast == "all"
    written = _write_back(info.op, args, kw, originals, policy)  # in-place ops returning nothing (foreach)

    def finish(r: Any, target: torch.dtype | None) -> Any:
        if not isinstance(r, _Tensor):
            return r
        original = originals.get(id(r))
        if original is not None:  # an in-place/out= result: round into the caller's tensor
            if id(r) not in written:
                original.copy_(round_to(r, original.dtype, policy))
            return original
        if target is None or not r.is_floating_point():
            return r
        if target == torch.float32 and all_cast and r.dtype == torch.float32:
            return autocast_round(r, policy)
        return round_to(r, target, policy)

    if isinstance(out, tuple | list):
        ts = targets if targets is not None and len(targets) == len(out) else (None,) * len(out)
        return type(out)(finish(r, t) for r, t in zip(out, ts))
    return finish(out, targets[0] if targets else _fallback_target(hargs))


def _write_back(
    op: Any, args: list[Any], kw: dict[str, Any], originals: dict[int, torch.Tensor], policy: NumericsPolicy
) -> set[int]:
    """Round every argument the op writes (schema ``Tensor(a!)``) from its FP32 stand-in into the caller's tensor.

    Needed for in-place ops that return nothing (``_foreach_add_`` and the other foreach ops), whose
    results are only their mutated arguments. Returns the ids of the stand-ins written back.
    """
    done: set[int] = set()
    for pos, arg in enumerate(op._schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[pos] if pos < len(args) else kw.get(arg.name)
        for t in value if isinstance(value, list | tuple) else (value,):
            original = originals.get(id(t)) if isinstance(t, _Tensor) else None
            if original is not None and id(t) not in done:
                original.copy_(round_to(t, original.dtype, policy))
                done.add(id(t))
    return done


def _fallback_target(hargs: list[Any]) -> torch.dtype | None:
    floats = [a.dtype for a in hargs if isinstance(a, _Tensor) and a.is_floating_point()]
    return floats[0] if floats else None


def _meta(a: Any) -> Any:
    if isinstance(a, _Tensor):
        return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
    if isinstance(a, list | tuple):
        return type(a)(_meta(x) for x in a)
    return a


def _result_dtypes(op: Any, hargs: list[Any], kwargs: dict[str, Any]) -> tuple[torch.dtype | None, ...] | None:
    """The dtype of each result the op returns for these inputs in exact mode (a meta run, cached by dtypes)."""
    key = (op, *(a.dtype if isinstance(a, _Tensor) else None for a in _tensors(hargs, kwargs)))
    if key in _out_dtypes:
        return _out_dtypes[key]
    try:
        kw = {k: (torch.device("meta") if k == "device" else _meta(v)) for k, v in kwargs.items()}
        out = op(*[_meta(a) for a in hargs], **kw)
        outs = out if isinstance(out, tuple | list) else (out,)
        found: tuple[torch.dtype | None, ...] | None = tuple(o.dtype if isinstance(o, _Tensor) else None for o in outs)
    except Exception:  # no meta kernel: the first floating input's dtype is used
        found = None
    _out_dtypes[key] = found
    return found


def _wrap_int64(out: Any) -> None:
    """int64 results hold what int32 would: values outside [-2^31, 2^31) wrap modulo 2^32 (in place)."""
    for r in out if isinstance(out, tuple | list) else (out,):
        if isinstance(r, _Tensor) and r.dtype == torch.int64 and r.numel():
            r.copy_(r.to(torch.int32))


# -- NKI kernels (nki.simulate): the same policy for tile stores and ScalarE activations -------------------
_NKI_NAMES = {"arctan": "atan"}  # NKI activation names that differ from the ATen op's


def tile_cast(value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """An engine's FP32 result written to a ``dtype`` tile: RNE, or seeded stochastic rounding under the
    ``trainium`` policy with ``stochastic_rounding`` (the engines' output cast)."""
    policy = numerics.policy
    if policy.active and policy.stochastic_rounding:
        return round_to(value.float(), dtype, policy)
    return value.to(dtype)


def check_activation_range(name: str, x: torch.Tensor) -> None:
    """Under the ``trainium`` policy, warn (:class:`NeuronNumericsWarning`) when ScalarE activation ``name``'s
    input ``x`` leaves the documented valid range (the op's registry record holds it)."""
    if not numerics.active:
        return
    record = _registry.get(_NKI_NAMES.get(name, name))
    if record is not None and record.valid_range is not None:
        _check_range(name, record.valid_range, [x])


def check_node(x: torch.Tensor, *, op: str, where: str, line: int) -> torch.Tensor:
    """The compiler's ``numerics_check`` IR op (``trainium`` graphs only): :func:`_check_range` of activation
    ``op``'s input ``x`` (its record's valid range), warned once per op and user source line; returns ``x``."""
    record = _registry.get(op)
    if record is not None and record.valid_range is not None:
        _check_range(op, record.valid_range, [x], (where, line))
    return x


def source_where(src: SourceLine | None) -> tuple[str, int]:
    """``(filename, line)`` of an IR node's source line (a cell's as ``cell [N]``) for a warning."""
    if src is None:
        return ("<compiled graph>", 0)
    return (f"cell [{src.cell}]" if src.cell is not None else src.file, src.line)


def _check_range(name: str, valid: Any, hargs: list[Any], where: tuple[str, int] | None = None) -> None:
    x = hargs[0] if hargs else None
    if isinstance(x, list | tuple):  # a foreach op's list: each tensor, the first out of range warns
        for t in x:
            _check_range(name, valid, [t], where)
        return
    if not isinstance(x, _Tensor) or not x.is_floating_point() or x.numel() == 0:
        return
    v = x.detach().float()
    m = v.abs() if valid.magnitude else v
    bad = (m < valid.lo) | (m > valid.hi)
    count = int(bad.sum())
    if not count:
        return
    where = where or user_frame() or ("<unknown>", 0)
    key = (name, f"{where[0]}:{where[1]}")
    if key in numerics.warned:
        return
    numerics.warned.add(key)
    example = float(v[bad].flatten()[0])
    warnings.warn_explicit(
        f"aten::{name}: {count} of {x.numel()} inputs (e.g. {example:g}) are outside {valid.text}, the range "
        f"Trainium's ScalarE computes {name} for; its output there is invalid (the value is not published, so "
        f"the simulator keeps the CPU value). Clamp or rescale the input (source: nki.api.shared.rst L137-175)",
        NeuronNumericsWarning,
        where[0],
        where[1],
        "trn_notebook",
    )


__all__ = [
    "LOW_FLOATS", "autocast_round", "call", "check_activation_range", "check_node", "classify", "round_node", "round_stochastic",
    "round_tf32", "round_to", "scatter_computes", "source_where", "tile_cast",
]  # fmt: skip
