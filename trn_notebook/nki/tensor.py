"""Kernel tensors: dtypes, memory regions and :class:`NkiTensor` (a typed view of one buffer allocation).

An ``NkiTensor`` wraps a torch view of a :class:`Storage` (one allocation in HBM, SBUF or PSUM).
Views (slicing, ``reshape``, ``permute``) share the storage, as in NKI. On-chip tensors keep their
partition dimension (dim 0): an integer index there gives a size-1 slice, never removes it.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from typing import Any

import torch

from .. import state as _state
from .errors import fail

# -- dtypes: NKI names -> torch dtypes (NKI 0.6.0 / Neuron SDK 2.32 nki.language) ----------------
bool_ = torch.bool
int8 = torch.int8
int16 = torch.int16
int32 = torch.int32
uint8 = torch.uint8
uint16 = torch.uint16
uint32 = torch.uint32
float16 = torch.float16
float32 = torch.float32
bfloat16 = torch.bfloat16
tfloat32 = torch.float32  # stored as float32 here (TensorE reads tf32 at bf16 speed on hardware)
float8_e4m3 = torch.float8_e4m3fn  # NKI's legacy e4m3 and OCP e4m3fn both map to torch's e4m3fn
float8_e4m3fn = torch.float8_e4m3fn
float8_e5m2 = torch.float8_e5m2

FLOAT_DTYPES = frozenset({float16, float32, bfloat16, float8_e4m3fn, float8_e5m2})
MATMUL_DTYPES = FLOAT_DTYPES
SUPPORTED_DTYPES = FLOAT_DTYPES | {bool_, int8, int16, int32, uint8, uint16, uint32}


class MemoryRegion(enum.Enum):
    """Where a tensor lives: on-chip SBUF/PSUM or device HBM."""

    sbuf = "sbuf"
    psum = "psum"
    hbm = "hbm"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"


sbuf = MemoryRegion.sbuf
psum = MemoryRegion.psum
hbm = MemoryRegion.hbm
private_hbm = MemoryRegion.private_hbm
shared_hbm = MemoryRegion.shared_hbm
ON_CHIP = frozenset({sbuf, psum})


def is_on_chip(buffer: MemoryRegion) -> bool:
    """True for SBUF and PSUM."""
    return buffer in ON_CHIP


def is_hbm(buffer: MemoryRegion) -> bool:
    """True for any HBM region."""
    return buffer not in ON_CHIP


def sentinel(dtype: torch.dtype) -> float | int | bool:
    """The value uninitialised memory holds in the simulator: NaN for floats, an extreme for integers."""
    if dtype.is_floating_point:
        return float("nan")
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).min if torch.iinfo(dtype).min < 0 else torch.iinfo(dtype).max


_ids = itertools.count(1)
_state.register("nki_tensor_ids", _state.Globals(__name__, "_ids"), reset=False)  # ids stay unique

TILE_OPS: dict[str, Callable[..., NkiTensor]] = {}
"""The ``nl`` function behind each tile operator (``a + b`` is ``nl.add``), by name. :mod:`.language` binds its
functions here when it is imported, so this module never imports it (the registry shape of
``torch/_dynamo/backends/registry.py``)."""


def bind_tile_ops(ops: dict[str, Callable[..., NkiTensor]]) -> None:
    """Make ``ops`` the functions the tile operators call (called once, by :mod:`.language` at import)."""
    TILE_OPS.update(ops)


class Storage:
    """One allocation: its backing torch tensor, buffer, per-partition bytes and PSUM bookkeeping."""

    __slots__ = ("__weakref__", "banks", "buffer", "data", "id", "name", "pending", "per_partition", "written")

    def __init__(self, data: torch.Tensor, buffer: MemoryRegion, name: str = "") -> None:
        self.data = data
        self.buffer = buffer
        self.name = name
        self.id = next(_ids)
        self.per_partition = data[0].numel() * data.element_size() if data.dim() and buffer in ON_CHIP else 0
        self.banks = 0
        self.pending: str | None = None  # on-chip: allocation line until first use reserves the space
        # PSUM: which elements hold a matmul result (accumulate=None starts a group where this is False)
        self.written: torch.Tensor | None = None


class DynSlice:
    """``nl.ds(start, size)``: a slice of ``size`` elements from ``start``."""

    __slots__ = ("size", "start")

    def __init__(self, start: int, size: int) -> None:
        self.start = int(start)
        self.size = int(size)

    def as_slice(self) -> slice:
        return slice(self.start, self.start + self.size)


def ds(start: int, size: int) -> DynSlice:
    """A dynamic slice ``start : start + size`` for indexing tensors."""
    return DynSlice(start, size)


class NkiTensor:
    """A typed view of a :class:`Storage`; ``shape``, ``dtype``, ``buffer`` as in NKI's ``NkiTensor``."""

    __slots__ = ("buffer", "data", "storage")

    def __init__(self, data: torch.Tensor, storage: Storage) -> None:
        self.data = data
        self.storage = storage
        self.buffer = storage.buffer

    # -- metadata ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return self.data.dim()

    @property
    def size(self) -> int:
        return self.data.numel()

    @property
    def name(self) -> str:
        return self.storage.name

    @property
    def partitions(self) -> int:
        """Size of the partition dimension (dim 0) for on-chip tensors."""
        return int(self.data.shape[0]) if self.data.dim() else 1

    @property
    def free_size(self) -> int:
        """Elements per partition (product of the free dimensions)."""
        n = 1
        for s in self.data.shape[1:]:
            n *= int(s)
        return n

    def region(self) -> tuple[int, int]:
        """``[lo, hi)`` element range of the storage this view touches (for dependency tracking)."""
        base = int(self.storage.data.storage_offset())
        lo = int(self.data.storage_offset()) - base
        if self.data.numel() == 0:
            return lo, lo
        hi = lo + 1
        for s, st in zip(self.data.shape, self.data.stride()):
            hi += (int(s) - 1) * int(st)
        return lo, hi

    def __repr__(self) -> str:
        where = self.buffer.value
        return (
            f"NkiTensor(shape={self.shape}, dtype={self.dtype}, buffer={where}{', ' + self.name if self.name else ''})"
        )

    # -- views --------------------------------------------------------------------------------
    def _view(self, data: torch.Tensor) -> NkiTensor:
        return NkiTensor(data, self.storage)

    def __getitem__(self, key: Any) -> NkiTensor:
        """NumPy-style basic indexing (ints, slices, ``...``, ``nl.ds``); on-chip dim 0 is never dropped."""
        if not isinstance(key, tuple):
            key = (key,)
        norm: list[Any] = []
        for i, k in enumerate(key):
            if isinstance(k, DynSlice):
                k = k.as_slice()
            elif isinstance(k, (torch.Tensor | NkiTensor, list | tuple)):
                raise fail(
                    "kernel tensors take basic indexing only (int, slice, ..., nl.ds); gather with "
                    "nisa.dma_copy on an .ap(...) view or nl.gather_flattened on hardware"
                )
            if isinstance(k, int) and i >= self.data.dim():
                raise fail(f"too many indices: {self!r} has {self.data.dim()} dims")
            if isinstance(k, int) and not -self.data.shape[i] <= k < self.data.shape[i]:
                raise fail(f"index {k} is out of range for dim {i} of size {self.data.shape[i]} ({self!r})")
            if i == 0 and isinstance(k, int) and self.buffer in ON_CHIP:
                k = slice(k, k + 1 if k != -1 else None)  # the partition dim is kept
            elif isinstance(k, slice):
                _check_slice(k, int(self.data.shape[i]) if i < self.data.dim() else 0, i, self)
            norm.append(k)
        return self._view(self.data[tuple(norm)])

    def __setitem__(self, key: Any, value: Any) -> None:
        raise fail(
            "kernel tensors cannot be assigned with `t[...] = value`; write them with an instruction "
            "(nisa.tensor_copy(dst=t[...], src=value), nl.store(t[...], value) or nisa.memset)"
        )

    def reshape(self, shape: tuple[int, ...] | list[int]) -> NkiTensor:
        """Same storage, new shape; on-chip tensors keep their partition size; raises if the layout forbids it."""
        shape = tuple(int(s) for s in shape)
        if self.buffer in ON_CHIP and shape[0] != self.shape[0]:
            raise fail(f"reshape of an on-chip tensor must keep the partition dim {self.shape[0]}, got {shape}")
        try:
            return self._view(self.data.view(shape))
        except RuntimeError as exc:
            raise fail(f"cannot reshape {self!r} to {shape} without a copy: {exc}") from None

    def permute(self, dims: tuple[int, ...] | list[int]) -> NkiTensor:
        """Reorder dims (no copy); on-chip tensors must keep dim 0 first."""
        dims = tuple(dims)
        if self.buffer in ON_CHIP and dims[0] != 0:
            raise fail("permute of an on-chip tensor must keep the partition dim first (dims[0] == 0)")
        return self._view(self.data.permute(dims))

    def broadcast(self, dim: int, size: int) -> NkiTensor:
        """Expand a size-1 free dim to ``size`` (no copy)."""
        if self.shape[dim] != 1 or (self.buffer in ON_CHIP and dim == 0):
            raise fail(f"broadcast needs a size-1 free dim, got dim {dim} of {self.shape}")
        shape = list(self.shape)
        shape[dim] = size
        return self._view(self.data.expand(shape))

    @property
    def T(self) -> NkiTensor:
        raise fail("on-chip transposes are instructions: use nisa.nc_transpose(dst=..., data=t) or nl.transpose(t)")

    # -- operators: NKI's tile arithmetic, each the nl function of the same name (a new SBUF tile) -------------
    def _binary(self, name: str, other: Any, reverse: bool = False) -> NkiTensor:
        fn = TILE_OPS[name]  # bound when nki.language was imported (the package's __init__ imports it)
        return fn(other, self) if reverse else fn(self, other)

    def __add__(self, other: Any) -> NkiTensor:
        """``a + b``: ``nl.add(a, b)``."""
        return self._binary("add", other)

    def __radd__(self, other: Any) -> NkiTensor:
        return self._binary("add", other, reverse=True)

    def __sub__(self, other: Any) -> NkiTensor:
        """``a - b``: ``nl.subtract(a, b)``."""
        return self._binary("subtract", other)

    def __rsub__(self, other: Any) -> NkiTensor:
        return self._binary("subtract", other, reverse=True)

    def __mul__(self, other: Any) -> NkiTensor:
        """``a * b``: ``nl.multiply(a, b)``."""
        return self._binary("multiply", other)

    def __rmul__(self, other: Any) -> NkiTensor:
        return self._binary("multiply", other, reverse=True)

    def __truediv__(self, other: Any) -> NkiTensor:
        """``a / b``: ``nl.divide(a, b)``."""
        return self._binary("divide", other)

    def __rtruediv__(self, other: Any) -> NkiTensor:
        return self._binary("divide", other, reverse=True)

    def __mod__(self, other: Any) -> NkiTensor:
        """``a % b``: ``nl.mod(a, b)``."""
        return self._binary("mod", other)

    def __rmod__(self, other: Any) -> NkiTensor:
        return self._binary("mod", other, reverse=True)

    def __pow__(self, other: Any) -> NkiTensor:
        """``a ** b``: ``nl.power(a, b)``."""
        return self._binary("power", other)

    def __rpow__(self, other: Any) -> NkiTensor:
        return self._binary("power", other, reverse=True)

    def __and__(self, other: Any) -> NkiTensor:
        """``a & b``: ``nl.bitwise_and(a, b)`` (integer tiles)."""
        return self._binary("bitwise_and", other)

    def __rand__(self, other: Any) -> NkiTensor:
        return self._binary("bitwise_and", other, reverse=True)

    def __or__(self, other: Any) -> NkiTensor:
        """``a | b``: ``nl.bitwise_or(a, b)`` (integer tiles)."""
        return self._binary("bitwise_or", other)

    def __ror__(self, other: Any) -> NkiTensor:
        return self._binary("bitwise_or", other, reverse=True)

    def __xor__(self, other: Any) -> NkiTensor:
        """``a ^ b``: ``nl.bitwise_xor(a, b)`` (integer tiles)."""
        return self._binary("bitwise_xor", other)

    def __rxor__(self, other: Any) -> NkiTensor:
        return self._binary("bitwise_xor", other, reverse=True)

    def __lshift__(self, other: Any) -> NkiTensor:
        """``a << b``: ``nl.left_shift(a, b)`` (integer tiles)."""
        return self._binary("left_shift", other)

    def __rshift__(self, other: Any) -> NkiTensor:
        """``a >> b``: ``nl.right_shift(a, b)`` (integer tiles)."""
        return self._binary("right_shift", other)

    def __lt__(self, other: Any) -> NkiTensor:
        """``a < b``: ``nl.less(a, b)``."""
        return self._binary("less", other)

    def __le__(self, other: Any) -> NkiTensor:
        """``a <= b``: ``nl.less_equal(a, b)``."""
        return self._binary("less_equal", other)

    def __gt__(self, other: Any) -> NkiTensor:
        """``a > b``: ``nl.greater(a, b)``."""
        return self._binary("greater", other)

    def __ge__(self, other: Any) -> NkiTensor:
        """``a >= b``: ``nl.greater_equal(a, b)``."""
        return self._binary("greater_equal", other)

    def __neg__(self) -> NkiTensor:
        """``-a``: ``nl.negative(a)``."""
        return TILE_OPS["negative"](self)

    def __matmul__(self, other: Any) -> NkiTensor:
        raise fail("`a @ b` is not a tile operator in NKI; use nl.matmul(a, b) (into PSUM) or nisa.nc_matmul")

    def __bool__(self) -> bool:
        raise fail(
            "a kernel tile has no truth value (`if tile:`, `if a < b:`): its values exist only when the kernel runs; "
            "compare element-wise with nl.less / nl.equal ... and combine with arithmetic, or branch on Python "
            "values (shapes, constants)"
        )


def _check_slice(k: slice, n: int, dim: int, t: NkiTensor) -> None:
    start, stop = k.start, k.stop
    if k.step is not None and not 1 <= k.step <= max(n, 1):
        raise fail(
            f"slice step must be between 1 and the dim's size {n}, got {k.step} (dim {dim} of {t!r}); "
            "a larger step selects one element: index it (or use nl.ds(start, 1))"
        )
    if (start is not None and not -n <= start <= n) or (stop is not None and not -n <= stop <= n):
        raise fail(f"slice {start}:{stop} is out of range for dim {dim} of size {n} ({t!r})")
    lo = 0 if start is None else (start + n if start < 0 else start)
    hi = n if stop is None else (stop + n if stop < 0 else stop)
    if hi <= lo:
        raise fail(f"slice {start}:{stop} of dim {dim} (size {n}) is empty ({t!r})")


def wrap_hbm(t: torch.Tensor, name: str = "") -> NkiTensor:
    """An HBM kernel tensor aliasing torch tensor ``t`` (a kernel argument)."""
    st = Storage(t, hbm, name)
    return NkiTensor(t, st)
