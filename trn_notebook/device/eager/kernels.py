"""Direct PrivateUse1 kernels: copies, factories, value reads, storage ops and hot ops.

Which ops get a direct kernel is the ``direct`` field of their record (:mod:`..ops.op_table`).
Everything else goes through the boxed fallback (:func:`trn_notebook.device.eager.dispatch.run_op`).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from .. import config as _config
from ..memory.runtime import _CPU_KEYSET, _set_storage, empty, host_storage, host_view, new_storage
from ..numerics.policy import numerics as _numerics
from ..ops.policy import REJECTED_DTYPES, policy, registry
from ..ops.registry import memory_format_error
from .dispatch import DirectKernel, _reject_dtype, _run, flags, op_info, record_sync, record_transfer, run_op
from .foreach_fast import NOT_TAKEN, fresh_outputs, run_foreach

_perf = time.perf_counter


def _check_dtype(name: str, dtype: torch.dtype | None) -> torch.dtype:
    dtype = dtype or torch.get_default_dtype()
    if dtype in REJECTED_DTYPES and not (_config._current.allow_float64 or flags.formatting):
        raise _reject_dtype(name, dtype)
    return dtype


def _check_size(size: list[int]) -> None:
    """PyTorch's own error for a negative dimension (before any memory is asked for)."""
    if any(s < 0 for s in size):
        neg = next(s for s in size if s < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {neg}: {list(size)}")


def empty_memory_format(
    size: list[int],
    dtype: torch.dtype | None = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = None,
    memory_format: torch.memory_format | None = None,
) -> torch.Tensor:
    """``aten::empty.memory_format`` on the device (only contiguous/preserve formats, as on Trainium)."""
    _check_index(device)
    _check_size(size)
    dtype = _check_dtype("empty", dtype)
    if memory_format not in (None, torch.contiguous_format, torch.preserve_format):
        raise memory_format_error(memory_format, "empty.memory_format")
    return empty(tuple(size), dtype)


def empty_strided(
    size: list[int],
    stride: list[int],
    dtype: torch.dtype | None = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> torch.Tensor:
    """``aten::empty_strided`` on the device; channels_last strides are stored contiguous (the only format)."""
    _check_index(device)
    _check_size(size)
    dtype = _check_dtype("empty_strided", dtype)
    if len(size) in (4, 5) and _is_channels_last(size, stride):
        return empty(tuple(size), dtype)  # e.g. a channels_last CPU tensor moved with .to("neuron")
    return empty(tuple(size), dtype, tuple(stride))


ONE_DEVICE = (
    "trn_notebook simulates one NeuronCore per process: use 'neuron' (= neuron:0). TorchNeuron runs one "
    "device per process too; for several cores, start one process per core (torchrun)"
)


def _check_index(device: Any) -> None:
    """Refuse ``neuron:N`` for N > 0 with the reason (see :data:`ONE_DEVICE`)."""
    if device is not None and (torch.device(device).index or 0) != 0:
        raise RuntimeError(f"{torch.device(device)} is not available: {ONE_DEVICE}")


def _is_channels_last(size: list[int], stride: list[int]) -> bool:
    c = max(size[1], 1)
    acc = c  # channels_last: channels innermost (stride 1), then the spatial dims from last to first, then N
    expected = [0] * len(size)
    expected[1] = 1
    for d in range(len(size) - 1, 1, -1):
        expected[d] = acc
        acc *= max(size[d], 1)
    expected[0] = acc
    return list(stride) == expected and c > 1


def copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """``aten::_copy_from``: host->device, device->host (a sync point) and device->device copies."""
    t0 = _perf()
    if dst.is_cpu:
        record_sync("copy to host (.cpu()/.to('cpu'))")
        dst.copy_(host_view(src))
        record_transfer("_copy_from", 0, src.nbytes, _perf() - t0)
        return dst
    if dst.dtype in REJECTED_DTYPES and not (_config._current.allow_float64 or flags.formatting):
        raise _reject_dtype("_copy_from", dst.dtype)
    if src.is_cpu:
        host_view(dst).copy_(src)
        record_transfer("_copy_from", src.nbytes, 0, _perf() - t0)
        return dst
    return run_op(torch.ops.aten.copy_.default, dst, src)


def copy_from_and_resize(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """``aten::_copy_from_and_resize``: resize ``dst`` to ``src``'s shape, then copy."""
    if dst.is_cpu:
        dst.resize_(src.shape)
    else:
        resize_(dst, list(src.shape))
    return copy_from(src, dst)


def local_scalar_dense(t: torch.Tensor) -> Any:
    """``aten::_local_scalar_dense`` (``.item()``): a sync point and a tiny device->host copy."""
    t0 = _perf()
    record_sync(".item()")
    value = host_view(t).item()
    record_transfer("_local_scalar_dense", 0, t.element_size(), _perf() - t0)
    return value


def resize_(t: torch.Tensor, size: list[int], memory_format: Any = None) -> torch.Tensor:
    """``aten::resize_`` on the device: grows into new device memory when the storage is too small."""
    numel = 1
    for s in size:
        numel *= s
    needed = (t.storage_offset() + numel) * t.element_size()
    if needed > t.untyped_storage().nbytes():
        fresh = empty((numel + t.storage_offset(),), t.dtype)
        old = host_storage(t)
        if old is not None:
            n = min(old.nbytes(), needed)
            dst = torch.empty(0, dtype=torch.uint8, device="cpu").set_(host_storage(fresh), 0, (n,), (1,))
            dst.copy_(torch.empty(0, dtype=torch.uint8, device="cpu").set_(old, 0, (n,), (1,)))
        storage = fresh.untyped_storage()
    else:
        storage = t.untyped_storage()
    stride = []
    acc = 1
    for s in reversed(size):
        stride.append(acc)
        acc *= max(s, 1)
    _set_storage(_CPU_KEYSET, t, storage, t.storage_offset(), tuple(size), tuple(reversed(stride)))
    return t


def set_source_storage_offset(
    t: torch.Tensor, source: torch.UntypedStorage, offset: int, size: list[int], stride: list[int] | None = None
) -> torch.Tensor:
    """``aten::set_.source_Storage_storage_offset``: metadata only (used by torch.load and deepcopy)."""
    if source.device.type != "neuron":
        raise RuntimeError("set_ on a neuron tensor needs a neuron storage; move it with .to('neuron')")
    if not stride:  # the schema's default `stride=[]` (0-dim tensors, or contiguous) arrives omitted
        stride = [1] * len(size)
        for i in range(len(size) - 2, -1, -1):
            stride[i] = stride[i + 1] * max(size[i + 1], 1)
    _set_storage(_CPU_KEYSET, t, source, offset, tuple(size), tuple(stride))
    return t


def set_source_storage(t: torch.Tensor, source: torch.UntypedStorage) -> torch.Tensor:
    """``aten::set_.source_Storage``: view the whole storage as a 1-d tensor."""
    return set_source_storage_offset(t, source, 0, [source.nbytes() // t.element_size()], [1])


def set_source_tensor(t: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``aten::set_.source_Tensor``: share ``source``'s storage and geometry."""
    return set_source_storage_offset(
        t, source.untyped_storage(), source.storage_offset(), list(source.shape), list(source.stride())
    )


def convolution_overrideable(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    transposed: bool,
    output_padding: list[int],
    groups: int,
) -> torch.Tensor:
    """Convolution on the device (the composite kernel for a new backend raises, so we provide it)."""
    return run_op(
        torch.ops.aten.convolution.default,
        input,
        weight,
        bias,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
    )


def convolution_backward_overrideable(
    *args: Any,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """Gradients of :func:`convolution_overrideable` with respect to input, weight and bias (the schema's
    ``grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask``)."""
    return run_op(torch.ops.aten.convolution_backward.default, *convolution_backward_args(*args))


def convolution_backward_args(*args: Any) -> tuple[Any, ...]:
    """``aten::convolution_backward``'s arguments from an overrideable convolution's backward (eager and dry): the
    same ten, with the bias sizes (from the weight, if ``output_mask`` asks for a bias gradient) after ``weight``."""
    weight, transposed, output_mask = args[2], args[6], args[9]
    bias_sizes = [weight.shape[1] if transposed else weight.shape[0]] if output_mask[2] else None
    return (*args[:3], bias_sizes, *args[3:])


def efficient_zero_tensor(
    size: list[int], dtype: torch.dtype | None = None, layout: Any = None, device: Any = None, pin_memory: Any = None
) -> torch.Tensor:
    """``aten::_efficientzerotensor`` (autograd's zero gradients, e.g. of sgn): a materialised zero tensor."""
    t = empty(tuple(size), _check_dtype("_efficientzerotensor", dtype))
    host_view(t).zero_()
    return t


def to_copy(self: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    """``aten::_to_copy`` of a neuron tensor: ATen's own kernel, but never asks for pinned host memory.

    ``x.to("cpu", non_blocking=True)`` would otherwise need a pinned-memory allocator, which a Python backend
    cannot register; the simulator's host copies are synchronous anyway.
    """
    kwargs["non_blocking"] = False
    return _TO_COPY._op_dk(torch._C.DispatchKey.CompositeExplicitAutograd, self, **kwargs)


_TO_COPY = torch.ops.aten._to_copy.default


def pin_memory(self: torch.Tensor, device: Any = None) -> torch.Tensor:
    """``aten::_pin_memory`` (CPU) for the neuron device: a plain host copy, as the simulator has no pinned pool.

    ``x.pin_memory()`` otherwise raises: a Python backend cannot register a pinned-memory allocator.
    """
    if device is None or torch.device(device).type in ("neuron", "privateuseone"):
        return self.clone()
    return _PIN_MEMORY._op_dk(torch._C.DispatchKey.CompositeExplicitAutograd, self, device)


_PIN_MEMORY = torch.ops.aten._pin_memory.default


def neuron_storage(nbytes: int) -> torch.UntypedStorage:
    """A fresh neuron UntypedStorage of ``nbytes`` (PyTorch's constructor would segfault without a C++ allocator)."""
    host = torch.UntypedStorage(nbytes, device="cpu")
    return new_storage(host)


class ForeachKernel(DirectKernel):
    """A foreach overload's kernel: the steady-state path of :mod:`.foreach_fast` when its arguments are
    lists of neuron tensors of one native dtype (torch.optim's foreach steps), else :func:`run_op`'s general
    path (and always under the trainium numerics policy, which rounds each written tensor there)."""

    __slots__ = ("fresh",)

    def __init__(self, op: torch._ops.OpOverload) -> None:
        super().__init__(op)
        self.fresh = fresh_outputs(op)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        info = self.info
        if info is None or info.version != policy.version:
            info = self.info = op_info(self.op)
        if not _numerics.active:
            out = run_foreach(info, self.fresh, args, kwargs)
            if out is not NOT_TAKEN:
                return out
        return _run(info, args, kwargs)


def direct_overloads() -> list[str]:
    """Overloads whose record asks for a direct kernel (``"add.Tensor"``): hot functional ops skip
    ``empty`` + ``.out`` (roughly halving their cost); ops whose generic (CompositeExplicitAutograd)
    kernel would round differently from the CPU's get the CPU kernel instead."""
    return [
        r.name + ("" if ov == "default" else f".{ov}") for r in registry.records() if r.ns == "aten" for ov in r.direct
    ]


def register_kernels(lib: torch.library.Library) -> list[str]:
    """Register the direct kernels on ``lib`` (an ``aten`` IMPL library); returns the overload names."""
    direct = {
        "empty.memory_format": empty_memory_format,
        "empty_strided": empty_strided,
        "_copy_from": copy_from,
        "_copy_from_and_resize": copy_from_and_resize,
        "_local_scalar_dense": local_scalar_dense,
        "resize_": resize_,
        "set_.source_Storage_storage_offset": set_source_storage_offset,
        "set_.source_Storage": set_source_storage,
        "set_.source_Tensor": set_source_tensor,
        "convolution_overrideable": convolution_overrideable,
        "convolution_backward_overrideable": convolution_backward_overrideable,
        "_efficientzerotensor": efficient_zero_tensor,
        "_to_copy": to_copy,
    }
    names = []
    for name, fn in direct.items():
        lib.impl(name, fn, "PrivateUse1")
        names.append(name)
    lib.impl("_pin_memory", pin_memory, "CPU")  # pinning happens on a CPU tensor, for the neuron device
    for name in direct_overloads():
        base, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, base)
        op = getattr(packet, overload or "default")
        kernel = ForeachKernel(op) if base.startswith("_foreach_") else DirectKernel(op)
        lib.impl(name, kernel, "PrivateUse1")  # foreach ops: one launch, under trainium too
        names.append(name)
    return names
