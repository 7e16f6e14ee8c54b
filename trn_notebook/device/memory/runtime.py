"""Device memory of the simulator: neuron tensors over host bytes, with allocator accounting.

A neuron tensor is a plain ``torch.Tensor`` whose dispatch key is PrivateUse1 and whose storage is
a *non-owning* storage pointing at the bytes of a host (CPU) storage that this module keeps alive.
``wrap`` turns a CPU tensor into a neuron tensor aliasing the same bytes; ``host_view`` gives the
CPU alias of a neuron tensor, so CPU kernels compute on device memory in place. Storage death is
observed with a weak reference on the neuron storage (PyTorch preserves that Python object), which
frees the simulated block exactly when the last tensor, view or saved tensor goes away.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch

from ... import locks as _locks
from ... import state as _state
from .. import config as _config
from ..chips import ChipSpec, get_chip_spec, with_cores
from .allocator import Block, CachingAllocator

DEVICE = torch.device("privateuseone", 0)  # prints as neuron:0 once renamed
_CPU_KEYSET = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_set_storage = torch.ops.aten.set_.source_Storage_storage_offset._handle.redispatch_boxed
_construct_storage = torch._C._construct_storage_from_data_pointer
_create_empty = torch._C._acc.create_empty_tensor
_lock = _locks.make("runtime", "device runtime (live storages)", reentrant=True)
_EMPTY = (0,)
_DEVICE_TYPES = ("neuron", "privateuseone")

# data_ptr of a live neuron storage -> [host UntypedStorage, weakref to the neuron storage, Block | None,
#                                      {geometry: cached read-only-metadata CPU view}]
_owners: dict[int, list[Any]] = {}


class _State:
    chip: ChipSpec = get_chip_spec(_config.get_config().chip)
    current_device: int = 0
    accounting: bool = True  # False only inside benchmarks measuring the accounting's own cost


state = _State()
allocator = CachingAllocator(_config.get_config().hbm_bytes or state.chip.device_hbm_bytes)
_state.register("allocator", allocator)
# live storages (a reset keeps live tensors), the device settings (chip, device index) and the lock
_state.register("device_runtime", _state.Globals(__name__, "_owners", "state"), reset=False)


def set_chip(name: str = "trn2", *, cores: int | None = None, hbm_bytes: int | None = None) -> ChipSpec:
    """Select the chip model (``"trn2"``, ``"trn3"``, ``"trn1"`` or ``"trn1n"``); optionally the logical cores and a capacity.

    Raises ``ValueError`` for an unknown chip, a core count out of range, or a capacity below what is
    already reserved.
    """
    spec = get_chip_spec(name)
    if cores is not None:
        spec = with_cores(spec, cores)
    _set_capacity(hbm_bytes or _config.get_config().hbm_bytes or spec.device_hbm_bytes)
    state.chip = spec
    return spec


def get_chip() -> ChipSpec:
    """The chip model in force."""
    return state.chip


def set_memory_capacity(nbytes: int | None) -> int:
    """Set the simulated HBM of the device in bytes (``None`` = the chip's); returns the capacity.

    Raises ``ValueError`` if it is below the memory already reserved.
    """
    return _set_capacity(nbytes if nbytes is not None else state.chip.device_hbm_bytes)


def _set_capacity(capacity: int) -> int:
    with allocator.section:
        if capacity < allocator.counters.reserved:
            raise ValueError(
                f"capacity {capacity} B is below the {allocator.counters.reserved} B already reserved; "
                "free tensors and call torch.neuron.empty_cache() first"
            )
        allocator.capacity = capacity
    return capacity


@contextlib.contextmanager
def runtime_reservation(nbytes: int, what: str) -> Iterator[None]:
    """HBM the Neuron runtime holds outside PyTorch's allocator while the block runs (the profiler's DEVICE-mode
    buffers): tensors have ``nbytes`` less capacity meanwhile (``mem_get_info``, the memory counters, an OOM).

    Raises ``ValueError`` naming ``what`` when the memory already reserved leaves no room for it.
    """
    with allocator.section:
        if allocator.capacity - nbytes < allocator.counters.reserved:
            raise ValueError(
                f"{what} needs {nbytes} B of HBM, but tensors already reserve {allocator.counters.reserved} B of the "
                f"{allocator.capacity} B capacity; free tensors and call torch.neuron.empty_cache(), or leave "
                "ProfileMode.DEVICE out of the NeuronConfig (RUNTIME and HOST_MEMORY reserve nothing)"
            )
        allocator.capacity -= nbytes
    try:
        yield
    finally:
        with allocator.section:
            allocator.capacity += nbytes


def _release(ptr: int) -> None:
    entry = _owners.pop(ptr, None)
    if entry is not None and entry[2] is not None:
        allocator.free(entry[2])


class _StorageRef(weakref.ref):  # type: ignore[type-arg]
    """Weak reference to a neuron storage that remembers its pointer (one object, no closure, per storage)."""

    __slots__ = ("ptr",)
    ptr: int


def _on_storage_death(ref: _StorageRef) -> None:
    # a weakref callback: the collector may run it inside any section of any lock, so the block is freed through
    # release_from_finalizer (never waits for the allocator's lock, never frees inside a running section)
    entry = _owners.pop(ref.ptr, None)  # runs once per dying eager result
    if entry is not None and entry[2] is not None:
        allocator.free_from_finalizer(entry[2])


def _storage_ref(st: torch.UntypedStorage, ptr: int) -> _StorageRef:
    ref = _StorageRef(st, _on_storage_death)
    ref.ptr = ptr
    return ref


def new_storage(host: torch.UntypedStorage, block: Block | None = None) -> torch.UntypedStorage:
    """Register ``host`` bytes as device memory and return the neuron storage aliasing them.

    Raises ``torch.OutOfMemoryError`` (with figures) if the simulated HBM is exhausted.
    """
    nbytes = host.nbytes()
    ptr = host.data_ptr()
    if nbytes == 0 or ptr == 0:
        return _construct_storage(0, DEVICE, 0)
    if block is None and state.accounting:
        block = allocator.malloc(nbytes)
    st = _construct_storage(ptr, DEVICE, nbytes)
    _owners[ptr] = [host, _storage_ref(st, ptr), block, None]
    return st


def wrap(cpu: torch.Tensor, seed: bool = False) -> torch.Tensor:
    """A neuron tensor aliasing the bytes of CPU tensor ``cpu`` (same sizes, strides and offset).

    If ``cpu`` already views device memory, the result shares that neuron storage (a view);
    otherwise its bytes become new device memory. With ``seed``, ``cpu`` itself becomes the cached host
    view (:func:`cached_host_view`) of the result's geometry, so the next read of the result (a compiled
    backward reading its saved activations, an optimizer reading the gradients) builds no view: only for
    a ``cpu`` nobody else holds or changes (a compiled program's result, an eager CPU kernel's fresh result or
    view: ~8 us of ``set_`` saved on the op that reads it next); math-bit, grad-requiring and
    inference tensors are not seeded. Raises ``torch.OutOfMemoryError`` when full, and
    ``NotImplementedError`` for a sparse result (the device holds only strided tensors).
    """
    try:
        host = cpu.untyped_storage()
    except NotImplementedError as exc:
        raise NotImplementedError(
            f"neuron holds only strided (dense) tensors, this result is {cpu.layout}: keep sparse tensors on "
            "the CPU (x.cpu().to_sparse()) or use dense ones (.to_dense())"
        ) from exc
    ptr = host.data_ptr()
    entry = _owners.get(ptr)
    st = entry[1]() if entry is not None else None
    if st is None:  # new_storage inlined: a fresh result is the common case of every eager op
        nbytes = host.nbytes()
        if nbytes == 0 or ptr == 0:
            st = _construct_storage(0, DEVICE, 0)
            entry = None
        else:
            block = allocator.malloc(nbytes) if state.accounting else None
            st = _construct_storage(ptr, DEVICE, nbytes)
            ref = _StorageRef(st, _on_storage_death)
            ref.ptr = ptr
            entry = _owners[ptr] = [host, ref, block, None]
    t = _create_empty(_EMPTY, cpu.dtype)
    _set_storage(_CPU_KEYSET, t, st, cpu.storage_offset(), cpu.size(), cpu.stride())
    if cpu.is_conj() or cpu.is_neg():  # lazy conjugate/negative views (e.g. fft.ifft results)
        _copy_math_bits(cpu, t)
    elif seed and entry is not None and entry[0] is host and not cpu.requires_grad and not cpu.is_inference():
        views = entry[3]
        if views is None:
            views = entry[3] = {}
        elif len(views) > 64:
            views.clear()
        views.setdefault((cpu.storage_offset(), cpu.shape, cpu.stride(), cpu.dtype), cpu)  # cached_host_view's key
    return t


def _copy_math_bits(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    torch._C._set_conj(dst, src.is_conj())
    torch._C._set_neg(dst, src.is_neg())
    return dst


def rebind(t: torch.Tensor, cpu: torch.Tensor) -> None:
    """Point neuron tensor ``t`` at the storage and geometry of CPU tensor ``cpu`` (after a resize)."""
    host = cpu.untyped_storage()
    entry = _owners.get(host.data_ptr())
    st = entry[1]() if entry is not None else None
    if st is None:
        st = new_storage(host)
    _set_storage(_CPU_KEYSET, t, st, cpu.storage_offset(), cpu.size(), cpu.stride())


def host_view(t: torch.Tensor) -> torch.Tensor:
    """The CPU tensor aliasing neuron tensor ``t``'s bytes (writes go through to the device tensor).

    Raises ``RuntimeError`` if ``t``'s storage is not device memory of this simulator.
    """
    ptr = t.untyped_storage().data_ptr()
    if ptr == 0:
        return torch.empty(t.size(), dtype=t.dtype, device="cpu")
    entry = _owners.get(ptr)
    if entry is None:
        raise RuntimeError(
            "this neuron tensor's storage is not device memory of the trn_notebook simulator "
            "(was it created before the device was reset?)"
        )
    view = torch.empty(0, dtype=t.dtype, device="cpu").set_(entry[0], t.storage_offset(), t.size(), t.stride())
    return _copy_math_bits(t, view) if t.is_conj() or t.is_neg() else view


def cached_host_view(t: torch.Tensor) -> torch.Tensor:
    """Like :func:`host_view`, but reuses one CPU view per geometry (offset, sizes, strides, dtype).

    A caller whose op may change a view's geometry in place (``resize_`` of an output, ``set_``) checks it
    afterwards and calls :func:`forget_host_views`; :func:`~trn_notebook.device.eager.dispatch.run_op` does.
    """
    ptr = t.untyped_storage().data_ptr()
    entry = _owners.get(ptr)
    if entry is None or t.is_conj() or t.is_neg():
        return host_view(t)
    key = (t.storage_offset(), t.shape, t.stride(), t.dtype)
    views = entry[3]
    if views is None:
        views = entry[3] = {}
    view = views.get(key)
    if view is None:
        if len(views) > 64:
            views.clear()
        view = views[key] = torch.empty(0, dtype=t.dtype, device="cpu").set_(entry[0], key[0], key[1], key[2])
    return view


def forget_host_views(t: torch.Tensor) -> None:
    """Drop the cached CPU views of ``t``'s storage (after an op changed a view's geometry in place)."""
    entry = _owners.get(t.untyped_storage().data_ptr())
    if entry is not None:
        entry[3] = None


def host_storage(t: torch.Tensor) -> torch.UntypedStorage | None:
    """The host UntypedStorage behind a neuron tensor (``None`` for an empty storage)."""
    entry = _owners.get(t.untyped_storage().data_ptr())
    return None if entry is None else entry[0]


def empty(size: tuple[int, ...] | list[int], dtype: torch.dtype, stride: tuple[int, ...] | None = None) -> torch.Tensor:
    """Allocate an uninitialised neuron tensor; reserves simulated HBM before touching host memory.

    Raises ``torch.OutOfMemoryError`` (simulated) when the device is full.
    """
    if stride is None:
        cpu_nbytes = dtype.itemsize
        for s in size:
            cpu_nbytes *= s
    else:
        extent = 1 + sum((s - 1) * st for s, st in zip(size, stride) if s > 0) if all(size) else 0
        cpu_nbytes = extent * dtype.itemsize
    block = allocator.malloc(cpu_nbytes) if cpu_nbytes > 0 else None
    try:
        cpu = (
            torch.empty(size, dtype=dtype, device="cpu")
            if stride is None
            else torch.empty_strided(size, stride, dtype=dtype, device="cpu")
        )
    except RuntimeError as exc:  # the host itself ran out of memory
        if block is not None:
            allocator.free(block)
        raise torch.OutOfMemoryError(
            f"host memory backing the simulator could not hold {cpu_nbytes} bytes; "
            "lower the simulated capacity with trn_notebook.set_memory_capacity()"
        ) from exc
    host = cpu.untyped_storage()
    st = new_storage(host, block) if block is not None else _construct_storage(0, DEVICE, 0)
    t = _create_empty((0,), dtype)
    _set_storage(_CPU_KEYSET, t, st, 0, cpu.size(), cpu.stride())
    return t


def block_address(t: torch.Tensor) -> int | None:
    """Address of the allocator block holding neuron tensor ``t``'s storage (the ``address`` of its block in
    ``torch.neuron.memory._snapshot()``), or ``None`` when ``t`` is not simulator device memory with bytes
    (a CPU or meta tensor, an empty storage, a fake tensor). Raises nothing."""
    if t.device.type not in _DEVICE_TYPES:
        return None
    try:
        ptr = t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # tensor subclasses without a storage
        return None
    entry = _owners.get(ptr)
    block = entry[2] if entry is not None else None
    return None if block is None else int(block.addr)


def check_representable(out: torch.Tensor) -> None:
    """Raise ``NotImplementedError`` with the fix for a host result the device cannot hold (quantized, MKL-DNN)."""
    if out.is_quantized:
        raise NotImplementedError(
            f"neuron holds no quantized tensors (this result is {out.dtype}, PyTorch's eager quantization runs on "
            "the CPU): quantize on the CPU with torch.quantize_per_tensor(x.cpu(), ...), or keep the model in "
            "bfloat16 on the device"
        )
    if out.layout == torch._mkldnn:  # type: ignore[attr-defined]
        raise NotImplementedError(
            "neuron holds no MKL-DNN (oneDNN) tensors; to_mkldnn() is a CPU layout: call x.cpu().to_mkldnn()"
        )
