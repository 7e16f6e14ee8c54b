"""Dry dispatch: ops on shape-only ``neuron`` tensors, routed and charged as the real device would be.

Inside a dry run, :class:`DryMode` (a ``TorchDispatchMode``) sits above torch's ``FakeTensorMode``.
Fake dispatch sees an op at the Python key, *before* the backend; the real device sees what the
dispatcher resolves for ``PrivateUse1``. :meth:`DryMode.__torch_dispatch__` makes the same choice
the dispatcher makes for a ``neuron`` op, in the dispatcher's order:

1. a direct ``PrivateUse1`` kernel of ours (:mod:`..eager.kernels`): factories, copies, ``.item()``,
   ``resize_``/``set_``, convolution, the hot ops (which run :func:`..eager.dispatch.run_op` anyway);
2. a ``CompositeExplicitAutograd(NonFunctional)`` kernel: ATen's own C++ composite runs with this mode
   active, so its sub-ops come back here (``_to_copy`` becomes ``empty_strided`` + ``copy_``);
3. a ``CompositeImplicitAutograd`` kernel (reached under ``inference_mode``): decomposed;
4. otherwise the boxed fallback, :func:`..eager.dispatch.run_op`: the op's registry record decides native,
   CPU fallback, host-only or unsupported exactly as :func:`..eager.dispatch._run` does, the result's shapes
   come from ``FakeTensorMode``, and the charge is :func:`..eager.dispatch._account_native` /
   :func:`..eager.dispatch._account_host` themselves (one cost model, :mod:`..costmodel`, for real and dry).

New result storages take a block from the dry run's shape-only allocator (:mod:`.alloc`).
Reads of values (``.item()``, ``bool(t)``, ``.tolist()``, ``nonzero``) become findings with their
source line (a host sync on the real device) and continue on a stated stand-in value.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensor
from torch.utils._python_dispatch import TorchDispatchMode

from .. import config as _config
from ..eager import dispatch as _d
from ..eager.fallback import placed_category
from ..eager.kernels import _check_dtype, _check_index, _check_size, convolution_backward_args
from ..memory.runtime import state
from ..ops.policy import REJECTED_DTYPES
from ..ops.registry import NATIVE_MEMORY_FORMATS
from ..placement import placement_log
from . import host_shapes as _host_shapes
from .alloc import StorageTracker
from .host import RealHost

_perf = time.perf_counter
_Tensor = torch.Tensor
_DK = torch._C.DispatchKey
_has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
aten = torch.ops.aten


@dataclass(frozen=True)
class Finding:
    """A value read on the host during a dry run: a sync point on the real device, a portability note."""

    kind: str  # "item" (a scalar read, Python control flow included), "host_copy", "dynamic_shape"
    op: str
    source: str
    stand_in: str  # what the dry run used instead of the value it cannot know
    count: int = 1  # calls from that line

    def __str__(self) -> str:
        times = f" ×{self.count}" if self.count > 1 else ""
        return f"{self.source}: {self.op}{times} reads device values on the host; the dry run used {self.stand_in}"


class DryRunError(RuntimeError):
    """An op a dry run cannot model (e.g. a data-dependent shape with no stand-in)."""


def _is_neuron(t: Any) -> bool:
    return isinstance(t, _Tensor) and t.device.type == "neuron"


def _touches_neuron(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    for a in args:
        if isinstance(a, _Tensor):
            if a.device.type == "neuron":
                return True
        elif isinstance(a, (list, tuple)):
            for x in a:
                if isinstance(x, _Tensor) and x.device.type == "neuron":
                    return True
    for k, v in kwargs.items():
        if isinstance(v, _Tensor) and v.device.type == "neuron":
            return True
        if k == "device" and v is not None and torch.device(v).type == "neuron":
            return True
    return False


def _tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, _Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [o for o in out if isinstance(o, _Tensor)]
    return []


# Route of an overload, in the dispatcher's order for PrivateUse1 (cached per overload).
DIRECT, CEANF, CEA, CIA, FALLBACK = "direct", "ceanf", "cea", "cia", "fallback"
_routes: dict[Any, str] = {}


def route(func: torch._ops.OpOverload) -> str:
    """Which kernel the dispatcher picks for ``func`` on a ``neuron`` tensor (see the module docstring)."""
    r = _routes.get(func)
    if r is None:
        name = func.name()
        if _has_kernel(name, _DK.PrivateUse1):
            r = DIRECT
        elif _has_kernel(name, _DK.CompositeExplicitAutogradNonFunctional):
            r = CEANF
        elif _has_kernel(name, _DK.CompositeExplicitAutograd):
            r = CEA
        elif _has_kernel(name, _DK.CompositeImplicitAutograd):
            r = CIA
        else:
            r = FALLBACK
        _routes[func] = r
    return r


_STAND_IN = {torch.bool: False}
_PLAIN = (torch.Tensor, torch.nn.Parameter)


class _Paused:
    def __init__(self, mode: DryMode) -> None:
        self.mode = mode

    def __enter__(self) -> None:
        self.mode.paused += 1

    def __exit__(self, *exc: object) -> None:
        self.mode.paused -= 1


# Inside a compiled graph these only move data between layouts: the compiler folds them into their neighbours
_LAYOUT_COPIES = frozenset({"copy_", "clone", "_to_copy", "contiguous"})


class DryMode(TorchDispatchMode):
    """Charges every ``neuron`` op of a dry run as the device would (see the module docstring)."""

    def __init__(self, tracker: StorageTracker, on_data_dependent: str = "continue") -> None:
        super().__init__()
        self.tracker = tracker
        self.on_data_dependent = on_data_dependent
        self._findings: dict[tuple[str, str, str], Finding] = {}
        self.ops = 0
        self.assumptions: dict[str, int] = {}  # what a charge assumed where the dry run lacks values -> calls
        # Non-aten ops with a charge of their own: func -> hook(func, args, kwargs, fake) returning the result
        # (``fake(func, args, kwargs)`` gives it the shape-only one). Layers above the device install them.
        self.hooks: dict[Any, Callable[..., Any]] = {}
        self.paused = 0  # > 0: ops pass straight to FakeTensorMode, uncharged and unallocated (see `paused()`)
        self.in_graph = False  # priced as kernels of one compiled graph: an op the compiler lowers runs on device
        self.host = RealHost()  # active: real host tensors keep real values (see `real_host()`)
        self._composite: list[Any] = []  # composites being expanded (a composite calling itself goes to fake)
        self._direct: dict[Any, Callable[..., Any]] = {
            aten.empty.memory_format: self._empty,
            aten.empty_strided.default: self._empty,
            aten._copy_from.default: self._copy_from,
            aten._copy_from_and_resize.default: self._copy_from,
            aten._local_scalar_dense.default: self._item,
            aten.convolution_overrideable.default: self._convolution,
            aten.convolution_backward_overrideable.default: self._convolution_backward,
            aten._efficientzerotensor.default: self._empty,
        }

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        """``torch.compile`` under a dry run compiles for real: dynamo traces the frame (it would skip it with a
        mode on the stack), the mode is off while the compiler works, and back on for the compiled graph's run,
        which charges its schedule (``compiler/executable.py``) instead of its ops one by one."""
        return True

    def pause(self) -> _Paused:
        """A reusable context manager: inside it ops are shape-only with nothing charged (no device work)."""
        return _Paused(self)

    def real_host(self) -> RealHost:
        """A context manager: inside it real host tensors keep real values (:mod:`.host`, for DDP)."""
        return self.host

    # -- routing --------------------------------------------------------------------------------
    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.paused:  # metadata work that runs nothing on the device (DTensor's sharding propagation)
            return func(*args, **kwargs)
        if func is aten._local_scalar_dense.default:  # a value read, on any device: a finding, never a raw error
            return self._item(func, args, kwargs)
        if func.namespace != "aten":
            hook = self.hooks.get(func)  # e.g. a collective of a dry run of ranks (dry/ranks.py)
            if hook is not None:
                return hook(func, args, kwargs, self._fake)
            return self._fake(func, args, kwargs)
        if not _touches_neuron(args, kwargs):
            if self.host.depth and RealHost.all_real(args, kwargs):
                return RealHost.run(func, args, kwargs)
            return self._fake(func, args, kwargs)
        if any(t not in _PLAIN and not issubclass(t, FakeTensor) for t in types):
            # A wrapper subclass (DTensor, FSDP2's sharded parameters): it runs first and its local ops on
            # shape-only shards come back here, charged with the shard's shapes as each rank runs them.
            return NotImplemented
        self.ops += 1
        r = route(func)
        if r == DIRECT:
            special = self._direct.get(func)
            if special is not None:
                return special(func, args, kwargs)
            if func is aten._to_copy.default:
                return self._composite_call(func, _DK.CompositeExplicitAutograd, args, kwargs)
            return self._run(func, args, kwargs)  # DirectKernel ops and resize_/set_: run_op's semantics
        if func not in self._composite:
            if r == CEANF:
                return self._composite_call(func, _DK.CompositeExplicitAutogradNonFunctional, args, kwargs)
            if r == CEA:
                return self._composite_call(func, _DK.CompositeExplicitAutograd, args, kwargs)
            if r == CIA:
                with self:
                    return func.decompose(*args, **kwargs)
        if r in (CEANF, CEA):  # a composite kernel calling itself (detach): metadata only
            return self._fake(func, args, kwargs)
        return self._run(func, args, kwargs)

    def _composite_call(self, func: Any, key: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self._composite.append(func)
        try:
            # A C++ composite may build host (CPU) bookkeeping tensors from no tensor at all and read their values
            # (torch's repeat: arange/cat/flatten of a permutation it passes to permute): on the device those are
            # real host tensors, so they are here too (``self.host``: ops on real host tensors run for real).
            with self, self.host:
                out = func._op_dk(key, *args, **kwargs)
        finally:
            self._composite.pop()
        if any(t.device.type == "meta" for t in _tensors(out)):
            # The composite built its result in C++ without a sub-op (_unsafe_view): on the device that is a
            # view with nothing charged; FakeTensorMode gives it the right device.
            return self._fake(func, args, kwargs)
        for t in _tensors(out):
            if _is_neuron(t):
                self.tracker.track(t)
        return out

    def _fake(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The op's result from ``FakeTensorMode`` (shapes only); data-dependent shapes become findings."""
        try:
            out = func(*args, **kwargs)
        except DynamicOutputShapeException:
            out = self._dynamic_shape(func, args, kwargs)
        except DataDependentOutputException as exc:
            if func in (aten.item.default, aten._local_scalar_dense.default):
                return self._item(aten._local_scalar_dense.default, args, {})
            raise DryRunError(
                f"{placement_log.user_source()}: {func} needs tensor values ({exc.func}), which a dry run does not "
                "have (on the real device that is a host sync). Run this step outside trn_notebook.dryrun(), or "
                "give the op its value as a Python number."
            ) from None
        for t in _tensors(out):
            if _is_neuron(t):
                self.tracker.track(t)
        return out

    # -- the boxed fallback: dispatch._run's decisions, with fake results ----------------------
    def _run(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        info = _d.op_info(func)
        if info.view and not kwargs:
            self_ = args[0]
            if (
                _is_neuron(self_)
                and self_.dtype not in REJECTED_DTYPES
                and not any(a is not self_ and isinstance(a, _Tensor) for a in args)
            ):
                t0 = _perf()
                out = self._fake(func, args, kwargs)
                if state.accounting:
                    placement_log.record(info.name, "host_only", _perf() - t0, 0.0)
                return out
        category = info.category
        if category == "unsupported":
            raise _d._unsupported(info)
        t0 = _perf()
        cfg = _config._current
        allow64 = cfg.allow_float64 or _d.flags.formatting
        pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
        in_bytes = 0
        dtype = None
        foreign = False
        native = info.dtypes

        def device_arg(a: torch.Tensor, scan_dtype: bool) -> None:
            nonlocal in_bytes, dtype
            if a.dtype in REJECTED_DTYPES and not allow64:
                raise _d._reject_dtype(info.name, a.dtype)
            if scan_dtype and (dtype is None or a.dtype not in native):
                dtype = a.dtype
            pairs.append((a, a))
            in_bytes += a.nbytes

        for a in args:
            if isinstance(a, _Tensor):
                if a.device.type != "neuron":
                    foreign = foreign or a.dim() > 0
                else:
                    device_arg(a, True)
            elif isinstance(a, (list, tuple)) and a and isinstance(a[0], _Tensor | None):
                for x in a:
                    if isinstance(x, _Tensor) and x.device.type == "neuron":
                        device_arg(x, True)
                    elif isinstance(x, _Tensor) and x.dim() > 0:
                        foreign = True
        for k, v in kwargs.items():
            if isinstance(v, _Tensor) and v.device.type == "neuron":
                device_arg(v, False)
            elif k == "dtype" and v in REJECTED_DTYPES and not allow64:
                raise _d._reject_dtype(info.name, v)
            elif k == "memory_format" and v is not None and v not in NATIVE_MEMORY_FORMATS:
                raise RuntimeError(
                    f"neuron supports only contiguous memory format, got {v} (aten::{info.name}); drop "
                    "memory_format=torch.channels_last (TorchNeuron rejects it too)"
                )
            elif isinstance(v, list) and v and isinstance(v[0], _Tensor):
                for x in v:
                    if isinstance(x, _Tensor) and x.device.type == "neuron":
                        device_arg(x, False)
        if foreign and pairs:
            if not info.name.lstrip("_").startswith("index"):  # CPU indices, as on CUDA (dispatch._run)
                raise _d._same_device_error(info.name)
            args = _host_shapes.indices_on_device(self, args, pairs[0][0].device)
        category = placed_category(info, category, dtype, native, cfg, _d.flags.formatting)
        fused = False
        if self.in_graph:
            if category != "native" and info.lowered:
                category = "native"  # inside a compiled graph the compiler's lowering runs it (compiler/lowering)
            fused = category == "native" and (info.name in _LAYOUT_COPIES or torch.Tag.pointwise in func.tags)
        special = _host_shapes.SPECIAL.get(func)
        result = special(self, func, args, kwargs) if special is not None else self._fake(func, args, kwargs)
        if info.mutable:
            for _, n in pairs:
                self.tracker.retrack(n)
        if state.accounting:
            if category == "native":
                # a foreach op: one launch over its lists, as the real kernel charges it (costmodel.foreach_seconds)
                foreach_args = args if info.foreach else None
                _d._account_native(info, result, pairs, in_bytes, dtype, _perf() - t0, foreach_args, fused)
            else:
                _d._account_host(info, category, result, pairs, in_bytes, dtype, _perf() - t0)
        return result

    # -- direct kernels (kernels.py), shape-only -------------------------------------------------
    def _empty(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Factories: the real kernels' checks, then a block for the new storage (no placement entry)."""
        _check_index(kwargs.get("device"))
        _check_size(list(args[0]))
        _check_dtype(func.name().split("::")[-1], kwargs.get("dtype"))
        mf = kwargs.get("memory_format")
        if mf not in (None, torch.contiguous_format, torch.preserve_format):
            raise RuntimeError(
                f"neuron supports only contiguous memory format, got {mf}; drop "
                "memory_format=torch.channels_last (TorchNeuron rejects it too)"
            )
        return self._fake(func, args, kwargs)

    def _copy_from(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``_copy_from``: host->device and device->host transfers charged, device->device is ``copy_``."""
        src, dst = args[0], args[1]
        t0 = _perf()
        if func is aten._copy_from_and_resize.default:
            self._fake(aten.resize_.default, (dst, list(src.shape)), {})
            self.tracker.retrack(dst)
        if self.host.depth:
            self.host.on_copy(src, dst)
        if dst.device.type != "neuron":
            self._finding("host_copy", "copy to host (.cpu()/.to('cpu'))", "uninitialised host values")
            _d.record_sync("copy to host (.cpu()/.to('cpu'))")
            _d.record_transfer("_copy_from", 0, src.nbytes, _perf() - t0)
            return dst
        if dst.dtype in REJECTED_DTYPES and not (_config._current.allow_float64 or _d.flags.formatting):
            raise _d._reject_dtype("_copy_from", dst.dtype)
        if src.device.type != "neuron":
            _d.record_transfer("_copy_from", src.nbytes, 0, _perf() - t0)
            return dst
        return self._run(aten.copy_.default, (dst, src), {})

    def _item(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``.item()`` / ``bool(t)`` / ``tolist``: a finding and a stand-in zero (a sync + tiny copy on device)."""
        t = args[0]
        try:
            value: Any = func(*args, **kwargs)  # a value FakeTensorMode knows (a constant such as Adam's step)
            known = True
        except DataDependentOutputException:
            value = _STAND_IN.get(t.dtype, 0.0 if t.is_floating_point() else 0)
            if t.is_complex():
                value = 0j
            known = False
        if not known or _is_neuron(t):
            what = repr(value) if not known else f"{value!r} (known without the device: a constant)"
            self._finding("item", "aten::_local_scalar_dense (.item(), bool(t), tolist, Python control flow)", what)
        if _is_neuron(t):
            t0 = _perf()
            _d.record_sync(".item()")
            _d.record_transfer("_local_scalar_dense", 0, t.element_size(), _perf() - t0)
        return value

    def _convolution(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self._run(aten.convolution.default, args, kwargs)

    def _convolution_backward(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self._run(aten.convolution_backward.default, convolution_backward_args(*args), {})

    # -- findings -------------------------------------------------------------------------------
    def _finding(self, kind: str, op: str, stand_in: str) -> None:
        source = placement_log.user_source()
        if self.on_data_dependent == "raise":
            raise DryRunError(
                f"{source}: {op} reads device values on the host, which a dry run does not have (on the real "
                "device it is a host sync). Move the value read out of the dry run, or use "
                "trn_notebook.dryrun(on_data_dependent='continue') to go on with a stand-in value."
            )
        key = (kind, op, source)
        seen = self._findings.get(key)
        self._findings[key] = Finding(kind, op, source, stand_in, 1 if seen is None else seen.count + 1)

    def assume(self, statement: str) -> None:
        """Record an assumption a charge made for want of values (stated in the run's output)."""
        self.assumptions[statement] = self.assumptions.get(statement, 0) + 1

    @property
    def findings(self) -> list[Finding]:
        """Value reads so far, one per (kind, op, source line), in first-seen order."""
        return list(self._findings.values())

    def _dynamic_shape(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """An output whose shape depends on values: the largest it can be (an upper bound for memory)."""
        name = func.name().split("::")[-1]
        x = args[0]
        if name in ("nonzero", "argwhere"):
            shape: tuple[int, ...] = (x.numel(), x.dim())
            dtype = torch.int64
        elif name == "masked_select":
            shape, dtype = (torch.broadcast_shapes(x.shape, args[1].shape).numel(),), x.dtype
        else:
            raise DryRunError(
                f"{placement_log.user_source()}: aten::{name} has an output shape that depends on tensor values, "
                "which a dry run does not know (on the real device its shape is read back with a host sync). "
                "Give it a static size (e.g. a mask and torch.where instead of boolean indexing), or run this "
                "step outside trn_notebook.dryrun()."
            )
        self._finding("dynamic_shape", f"aten::{name}", f"its largest possible shape {list(shape)}")
        return torch.empty(shape, dtype=dtype, device=x.device)
