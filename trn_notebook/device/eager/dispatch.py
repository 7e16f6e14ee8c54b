"""Execution of ATen ops on the simulated device: one boxed fallback plus a few direct kernels.

Every op on a neuron tensor lands in :func:`run_op`: it decides the placement (the op's record in
the registry: its category and its "can run here" dtypes),
runs the CPU kernel on host aliases of the device bytes, maps results back to neuron tensors
(aliases stay aliases, in-place ops return their argument), and records the op in the placement
log, the clocks and the cost model. Direct registrations exist only for hot ops (skipping the
``.out`` detour of structured kernels), copies, factories, ``item`` and the ops whose composite
kernels raise before reaching a fallback (convolution).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from ... import state as _state
from .. import config as _config
from .. import costmodel
from ..clocks import clocks
from ..memory.runtime import cached_host_view, check_representable, forget_host_views, host_view, rebind, state, wrap
from ..numerics.calls import call as _numerics_call
from ..numerics.policy import numerics as _numerics
from ..ops.accelerator_ops import no_cpu_kernel_error
from ..ops.policy import REJECTED_DTYPES, policy
from ..ops.registry import NATIVE_MEMORY_FORMATS, memory_format_error
from ..placement import placement_log
from ..source_lines import user_frame
from . import records as _records
from .fallback import NeuronFallbackWarning, charge_fallback, placed_category, warn_once

_perf = time.perf_counter
_Tensor = torch.Tensor
_STRIDED = torch.strided
_NUMBERS = (int, float, bool, complex)
_defer = _records.append
_pending = _records.pending
_CAPACITY = _records.CAPACITY


class _Flags:
    formatting = 0  # > 0 while printing: float64 allowed for the formatter's internal math


flags = _Flags()
_warned: set[str] = set()


class _OpInfo:
    __slots__ = (
        "call",
        "category",
        "dtypes",
        "flops",
        "foreach",
        "lowered",
        "mutable",
        "name",
        "number_args",
        "op",
        "reason",
        "version",
        "view",
    )

    def __init__(self, op: torch._ops.OpOverload) -> None:
        self.op = op
        self.call = getattr(op, "_op", op)  # what OpOverload.__call__ calls
        schema = op._schema
        name = schema.name.split("::", 1)[-1]
        self.name = name
        rule = policy.rule(name, op)
        self.category: str = rule.category or "cpu_fallback"  # the registry always fills it in
        self.reason = rule.reason
        self.dtypes = rule.dtypes  # "can run here": other dtypes fall back
        self.flops = rule.flops
        self.lowered = bool(rule.lower)  # the compiler lowers it to an IR op (it runs on device inside a graph)
        self.foreach = name.startswith("_foreach_")  # one fused launch over its lists (costmodel.foreach_seconds)
        self.mutable = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
        # a view op: host_only, returns one read-only alias of its first argument (view, as_strided, t …)
        first = schema.arguments[0] if schema.arguments else None
        self.view = (
            self.category == "host_only"
            and not self.mutable
            and len(schema.returns) == 1
            and schema.returns[0].alias_info is not None
            and first is not None
            and first.alias_info is not None
            and schema.returns[0].alias_info.before_set == first.alias_info.before_set
        )
        # Tensor parameters that may arrive as Python numbers (the boxed fallback unwraps wrapped scalars)
        self.number_args = tuple(
            i for i, a in enumerate(schema.arguments) if not a.kwarg_only and isinstance(a.type, torch.TensorType)
        )
        self.version = policy.version


_infos: dict[Any, _OpInfo] = {}
_state.register("dispatch", _state.Globals(__name__, "_warned", "_infos", "flags"))  # fallbacks warn again


def op_info(op: torch._ops.OpOverload) -> _OpInfo:
    """Cached facts of ``op`` from its registry record (recomputed when the registry changes)."""
    info = _infos.get(op)
    if info is None or info.version != policy.version:
        info = _infos[op] = _OpInfo(op)
    return info


def _reject_dtype(name: str, dtype: torch.dtype) -> TypeError:
    kind = "float64" if dtype == torch.float64 else "complex128"
    return TypeError(
        f"neuron does not support {kind} (aten::{name}): the device has no native 64-bit floating point. "
        f"Use float32 or bfloat16 (e.g. x.float() before .to('neuron')), or keep this computation on the "
        f"CPU. Printing and .cpu() still work; set TRN_NOTEBOOK_ALLOW_FLOAT64=1 to simulate it anyway."
    )


def _unsupported(info: _OpInfo) -> NotImplementedError:
    why = info.reason or "it is marked unsupported in the op policy"
    return NotImplementedError(
        f"aten::{info.name} is not supported on the neuron device: {why}. Run this step on the CPU "
        f"(x.cpu()), or let it fall back with trn_notebook.set_op_category('{info.name}', 'cpu_fallback')."
    )


def _same_device_error(name: str) -> RuntimeError:
    return RuntimeError(
        f"Expected all tensors to be on the same device, but found at least two devices, neuron:0 and cpu! "
        f"(when checking arguments for aten::{name}); move the CPU tensor with .to('neuron')"
    )


def run_op(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    """Run ``op`` for the neuron device: place it, compute it on host aliases, record its cost."""
    info = _infos.get(op)
    if info is None or info.version != policy.version:
        info = op_info(op)
    return _run(info, args, kwargs)


class DirectKernel:
    """The PrivateUse1 kernel of one hot overload: :func:`run_op` with the op's facts held, not looked up."""

    __slots__ = ("info", "op")

    def __init__(self, op: torch._ops.OpOverload) -> None:
        self.op = op
        self.info: _OpInfo | None = None  # filled on the first call (the registry may change before)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        info = self.info
        if info is None or info.version != policy.version:
            info = self.info = op_info(self.op)
        return _run(info, args, kwargs)


def _run(info: _OpInfo, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if info.view and not kwargs:
        self = args[0]
        if isinstance(self, _Tensor) and not self.is_cpu and self.dtype not in REJECTED_DTYPES:
            for a in args:
                if a is not self and isinstance(a, _Tensor):
                    break
            else:
                return _run_view(info, self, args)
    op = info.op
    category = info.category
    if category == "unsupported":
        raise _unsupported(info)
    t0 = _perf()
    cfg = _config._current
    allow64 = cfg.allow_float64 or flags.formatting
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
    in_bytes = 0
    dtype = None
    foreign = False
    hargs: list[Any] = []
    view = cached_host_view  # in-place ops too: a change to a view's geometry is caught after the op
    native = info.dtypes
    for a in args:
        if isinstance(a, _Tensor):
            if a.is_cpu:
                if a.dim() > 0:
                    foreign = True
                hargs.append(a)
                continue
            dt = a.dtype
            if dt in REJECTED_DTYPES and not allow64:
                raise _reject_dtype(info.name, dt)
            if dtype is None or dt not in native:
                dtype = dt
            h = view(a)
            pairs.append((h, a))
            in_bytes += a.nbytes
            hargs.append(h)
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], _Tensor | None):
            hl: list[Any] = []
            for x in a:
                if isinstance(x, _Tensor) and not x.is_cpu:
                    if x.dtype in REJECTED_DTYPES and not allow64:
                        raise _reject_dtype(info.name, x.dtype)
                    if dtype is None or x.dtype not in native:
                        dtype = x.dtype
                    h = view(x)
                    pairs.append((h, x))
                    in_bytes += x.nbytes
                    hl.append(h)
                else:
                    if isinstance(x, _Tensor) and x.dim() > 0:
                        foreign = True
                    hl.append(x)
            hargs.append(hl)
        else:
            hargs.append(a)
    if kwargs:
        kw = {}
        for k, v in kwargs.items():
            if isinstance(v, _Tensor) and not v.is_cpu:
                if v.dtype in REJECTED_DTYPES and not allow64:
                    raise _reject_dtype(info.name, v.dtype)
                h = host_view(v)
                pairs.append((h, v))
                in_bytes += v.nbytes
                kw[k] = h
            elif k == "device" and v is not None:
                kw[k] = torch.device("cpu")
            elif k == "dtype" and v in REJECTED_DTYPES and not allow64:
                raise _reject_dtype(info.name, v)
            elif k == "memory_format" and v is not None and v not in NATIVE_MEMORY_FORMATS:  # channels_last
                raise memory_format_error(v, info.name)
            elif isinstance(v, list) and v and isinstance(v[0], _Tensor):
                hl = []
                for x in v:
                    if isinstance(x, _Tensor) and not x.is_cpu:
                        h = host_view(x)
                        pairs.append((h, x))
                        in_bytes += x.nbytes
                        hl.append(h)
                    else:
                        hl.append(x)
                kw[k] = hl
            else:
                kw[k] = v
        kwargs = kw
    if foreign and pairs and not info.name.lstrip("_").startswith("index"):  # CPU indices, as on CUDA
        raise _same_device_error(info.name)
    if category != "native" or (dtype is not None and dtype not in native):  # the common case skips the call
        category = placed_category(info, category, dtype, native, cfg, flags.formatting)
    try:
        # the overload's C++ callable (OpOverload.__call__ without its frame); the numerics hook: trainium policy
        out = info.call(*hargs, **kwargs) if not _numerics.active else _numerics_call(info, hargs, kwargs)
    except NotImplementedError as exc:  # the CPU kernel lacks this dtype (e.g. histc on int32)
        out = _missing_cpu_dtype(op, info, hargs, kwargs, exc)
    except RuntimeError as exc:  # a wrapped Python scalar arrives unwrapped, and this op takes no numbers
        if "Expected a value of type 'Tensor'" not in str(exc):
            raise
        out = op(*_numbers_as_tensors(info, hargs), **kwargs)  # e.g. remainder(x, 3) inside take_along_dim
    if info.mutable:
        for h, n in pairs:
            # data_ptr covers a new storage and a new offset (a host storage moves only to a new address,
            # the old one being held by the device until the neuron storage dies)
            if h.data_ptr() != n.data_ptr() or h.shape != n.shape or h.stride() != n.stride():
                forget_host_views(n)  # the cached view of the old geometry no longer describes it
                rebind(n, h)  # resized (out= tensors), possibly within the same storage (e.g. to 0 elements)
    if type(out) is _Tensor and out.is_cpu and out.layout is _STRIDED and not out.is_quantized:
        for h, n in pairs:  # _to_device for the common case: one dense host result
            if out is h:
                result = n
                break
        else:
            result = wrap(out, True)  # seeded: the next op reading it builds no host view
    else:
        result = _to_device(out, pairs)
    if state.accounting:
        if category == "native":
            _account_native(info, result, pairs, in_bytes, dtype, _perf() - t0, args if info.foreach else None)
        else:
            _account_host(info, category, result, pairs, in_bytes, dtype, _perf() - t0)
    return result


def _run_view(info: _OpInfo, self: torch.Tensor, args: tuple[Any, ...]) -> torch.Tensor:
    """A view op on one neuron tensor (the most common host_only op): the CPU view of its cached host view,
    as a neuron tensor over the same storage; :func:`_run` with nothing to check, copy or cost."""
    t0 = _perf()
    h = cached_host_view(self)
    out = info.call(h, *args[1:])  # the CPU kernel validates sizes, strides and bounds
    result = self if out is h else wrap(out, True)  # the same storage: a view of the device tensor
    if state.accounting:
        name = info.name
        if clocks._observer is None and name in placement_log._entries:  # eager_records.deferrable, inlined
            _defer((name, None, _perf() - t0, None))
            if len(_pending) >= _CAPACITY:
                _records.flush()
        else:
            placement_log.record(name, "host_only", _perf() - t0, 0.0)
    return result


# Ops whose device kernels (CUDA, Neuron) accept integer inputs although the CPU kernel does not:
# computed in float32 on the host and cast back (exact for counts below 2**24), as CUDA returns them.
UPCAST_INTEGER_INPUTS = frozenset(r.name for r in policy.records() if r.upcast_int)  # from the op registry


def _missing_cpu_dtype(
    op: torch._ops.OpOverload, info: _OpInfo, hargs: list[Any], kwargs: dict[str, Any], exc: NotImplementedError
) -> Any:
    """An op/dtype pair with no CPU kernel: upcast where the device supports it, else a clear error."""
    where = user_frame()
    line = ":".join(map(str, where or ("unknown",)))
    if "from the 'CPU' backend" in str(exc):  # no CPU kernel at all (an accelerator-only op)
        raise no_cpu_kernel_error(f"aten::{info.name}", line, exc) from exc
    if "not implemented for" not in str(exc):
        raise exc
    dtypes = sorted({str(a.dtype) for a in hargs if isinstance(a, _Tensor)})
    ints = [a for a in hargs if isinstance(a, _Tensor) and not a.is_floating_point() and not a.is_complex()]
    if info.name in UPCAST_INTEGER_INPUTS and ints and kwargs.get("out") is None:
        dtype = ints[0].dtype
        key = f"upcast:{info.name}:{dtype}"
        if key not in _warned:
            _warned.add(key)
            warnings.warn_explicit(
                f"aten::{info.name} on {dtype}: the CPU has no kernel for it, so the neuron device computes it in "
                f"float32 and returns {dtype} (as CUDA does); shown once",
                *(NeuronFallbackWarning, *(where or ("<unknown>", 0)), "trn_notebook"),
            )
        up = [a.float() if isinstance(a, _Tensor) and a.dtype == dtype else a for a in hargs]
        out = op(*up, **kwargs)
        return out.to(dtype) if isinstance(out, _Tensor) else out
    raise NotImplementedError(
        f"aten::{info.name} has no kernel for {', '.join(dtypes)} on the CPU, so the neuron device cannot run it "
        f"either (called from {line}). Cast the input first (e.g. x.float()) or run this step on the CPU. "
        f"PyTorch said: {str(exc).splitlines()[0]}"
    ) from exc


def _numbers_as_tensors(info: _OpInfo, hargs: list[Any]) -> list[Any]:
    """0-dim CPU tensors for numbers in Tensor parameters, typed as PyTorch types a wrapped scalar."""
    first = next((a for a in hargs if isinstance(a, _Tensor)), None)
    fixed = list(hargs)
    for i in info.number_args:
        if i < len(fixed) and type(fixed[i]) in _NUMBERS:
            dtype = torch.result_type(first, fixed[i]) if first is not None else None
            fixed[i] = torch.tensor(fixed[i], dtype=dtype, device="cpu")
    return fixed


def _to_device(out: Any, pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> Any:
    if isinstance(out, _Tensor):
        for h, n in pairs:
            if out is h:
                return n
        if out.is_cpu:
            check_representable(out)
            return wrap(out, True)
        return out
    if isinstance(out, tuple | list):
        return type(out)(_to_device(o, pairs) for o in out)
    return out


def _out_tensors(result: Any) -> list[torch.Tensor]:
    if isinstance(result, _Tensor):
        return [result]
    if isinstance(result, tuple | list):
        return [r for r in result if isinstance(r, _Tensor)]
    return []


def _account_native(
    info: _OpInfo,
    result: Any,
    pairs: list[tuple[torch.Tensor, torch.Tensor]],
    in_bytes: int,
    dtype: torch.dtype | None,
    wall_s: float,
    foreach_args: tuple[Any, ...] | None = None,
    fused: bool = False,
) -> None:
    """Charge a native op: its roofline device time plus launch on the clocks, one call in the placement log
    (a foreach op: one launch whose device time is the sum over its lists, ``foreach_args`` its arguments;
    ``fused``: fused into a neighbouring kernel of a compiled graph, so no time of its own beyond the launch)."""
    dt = dtype or torch.float32
    if fused:
        device_s = 0.0
    elif foreach_args is not None:
        device_s = costmodel.foreach_seconds(state.chip, dt, foreach_args, result if isinstance(result, list) else None)
    else:
        device_s = _native_seconds(info, result, pairs, in_bytes, dt)
    consts = costmodel._constants
    cfg = _config._current
    name = info.name
    if not cfg.eager_fusion and not cfg.launch_blocking and clocks._observer is None and name in placement_log._entries:
        # the common case: the charge below, as one record folded when the clocks or the log are read
        _defer((name, device_s + consts.eager_launch_s, wall_s, consts.eager_host_dispatch_s))
        if len(_pending) >= _CAPACITY:
            _records.flush()
        return
    st = clocks.state
    launch = consts.eager_launch_s
    fused = False
    if cfg.eager_fusion and not torch.are_deterministic_algorithms_enabled():
        if 0 < st.in_group < cfg.fusion_max_ops:
            launch = 0.0
            fused = True
            st.in_group += 1
        else:
            st.in_group = 1
            st.fused_groups += 1
    device_s += launch
    clocks.launch(name, device_s, consts.eager_host_dispatch_s, wall_s, fused=fused)
    placement_log.record(name, "native", wall_s, device_s)
    if cfg.launch_blocking:
        clocks.sync("NEURON_LAUNCH_BLOCKING=1")


def _native_seconds(
    info: _OpInfo, result: Any, pairs: list[tuple[torch.Tensor, torch.Tensor]], in_bytes: int, dt: torch.dtype
) -> float:
    """Roofline device time of one (non-foreach) native op, without launch."""
    if type(result) is _Tensor:  # one result: no list to build
        outs = None
        out_bytes = result.nbytes
    else:
        outs = _out_tensors(result)
        out_bytes = 0
        for o in outs:
            out_bytes += o.nbytes
    if info.flops is not None:  # the op's cost function from its record (matmul-class)
        out_numel = 0
        for o in outs if outs is not None else (result,):
            out_numel += o.numel()
        flops = info.flops([n.shape for _, n in pairs], out_numel)
    else:  # pointwise/reduction: ~one op per element of the larger side
        flops = (in_bytes if in_bytes > out_bytes else out_bytes) / dt.itemsize
    peak, bandwidth = costmodel.roofline_rates(state.chip, dt)  # costmodel.roofline_seconds, inlined
    compute = flops / peak
    memory = (in_bytes + out_bytes) / bandwidth
    return compute if compute > memory else memory


def _account_host(
    info: _OpInfo,
    category: str,
    result: Any,
    pairs: list[tuple[torch.Tensor, torch.Tensor]],
    in_bytes: int,
    dtype: torch.dtype | None,
    wall_s: float,
) -> None:
    """Charge a host_only op (host wall only) or a CPU fallback (sync, copies both ways, modeled host compute)."""
    name = info.name
    if category == "host_only":
        placement_log.record(name, "host_only", wall_s, 0.0)
        return
    # cpu_fallback: the host waits for the device, copies inputs out, computes, copies results back (one charge,
    # shared with the compiler's host calls: fallback.py)
    warn_once(info.name, info.reason, bool(flags.formatting))
    charge_fallback(info.name, [h for h, _ in pairs], _out_tensors(result), wall_s)


@contextlib.contextmanager
def accounting_disabled() -> Iterator[None]:
    """Skip placement logging, cost model and allocator accounting (benchmarks of their overhead only)."""
    state.accounting = False
    try:
        yield
    finally:
        state.accounting = True


def record_sync(reason: str) -> None:
    """Record a host-visible sync point (``.item()``, ``.cpu()``, ``print``, ``synchronize()``)."""
    clocks.sync(reason, placement_log.user_source())


def record_transfer(name: str, h2d: int, d2h: int, wall_s: float) -> None:
    """Charge a host<->device copy to the clocks and the placement log."""
    moved = costmodel.transfer_seconds(h2d + d2h)
    clocks.host_work(name, moved, wall_s, {"transfer": True, "h2d": h2d, "d2h": d2h})
    placement_log.record(name, "native", wall_s, moved, h2d=h2d, d2h=d2h)
