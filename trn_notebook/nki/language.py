"""``nki.language`` (``nl``): dtypes, buffers, tile allocation, loads/stores and tile math.

The tile functions (``nl.add``, ``nl.exp``, ``nl.sum``, ``nl.matmul``...) allocate a new SBUF (or
PSUM) tile and issue the ISA instruction that computes it, as the NKI front end does. Loops are
Python loops: ``affine_range``/``sequential_range``/``static_range`` are ``range`` (NKI 0.6 makes
them aliases of ``range`` too).
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import torch

from . import isa
from .errors import fail
from .ops import BINARY, UNARY, BinaryOp, UnaryOp
from .simulator import TileSize, current
from .tensor import (
    DynSlice,
    MemoryRegion,
    NkiTensor,
    bfloat16,
    bind_tile_ops,
    bool_,
    ds,
    float8_e4m3,
    float8_e4m3fn,
    float8_e5m2,
    float16,
    float32,
    hbm,
    int8,
    int16,
    int32,
    is_hbm,
    is_on_chip,
    private_hbm,
    psum,
    sbuf,
    shared_hbm,
    tfloat32,
    uint8,
    uint16,
    uint32,
)

_builtin_range = builtins.range


class _TileSizeProxy:
    """``nl.tile_size``: the running kernel's limits, or Trn2's outside a kernel."""

    _default = TileSize()

    def __getattr__(self, name: str) -> Any:
        from .simulator import _local

        ctx = getattr(_local, "ctx", None)
        return getattr(ctx.tile_size if ctx is not None else self._default, name)


tile_size = _TileSizeProxy()


# -- loops and SPMD ---------------------------------------------------------------------------------
def affine_range(start: int, stop: int | None = None, step: int = 1) -> range:
    """Loop iterator for iterations without loop-carried dependencies (a Python ``range`` here)."""
    return _builtin_range(start, stop, step) if stop is not None else _builtin_range(start)


sequential_range = affine_range
static_range = affine_range


def program_id(axis: int = 0) -> int:
    """Index of this program along ``axis`` of the launch grid (``kernel[g](...)``)."""
    return current().program_id(axis)


def num_programs(axes: int = 0) -> int:
    """Number of programs along ``axes`` of the launch grid (1 without a grid)."""
    grid = current().grid
    return grid[axes] if grid else 1


def program_ndim() -> int:
    """Dimensions of the launch grid (0 without a grid)."""
    return len(current().grid)


# -- allocation ---------------------------------------------------------------------------------------
def ndarray(
    shape: Any, dtype: torch.dtype, buffer: MemoryRegion = sbuf, name: str = "", address: Any = None
) -> NkiTensor:
    """A new uninitialised tensor (NaN-filled in the simulator) on ``buffer``."""
    return current().allocate(tuple(shape), dtype, buffer, name)


def full(shape: Any, fill_value: float, dtype: torch.dtype, buffer: MemoryRegion = sbuf, name: str = "") -> NkiTensor:
    """A new on-chip tile filled with ``fill_value`` (a ``memset``)."""
    t = ndarray(shape, dtype, buffer, name)
    if buffer in (sbuf, psum):
        isa.memset(t, fill_value)
    else:
        raise fail("nl.full/zeros/ones allocate on-chip tiles (sbuf/psum); fill an HBM tensor by storing a tile")
    return t


def zeros(shape: Any, dtype: torch.dtype, buffer: MemoryRegion = sbuf, name: str = "") -> NkiTensor:
    """A new on-chip tile of zeros."""
    return full(shape, 0, dtype, buffer, name)


def ones(shape: Any, dtype: torch.dtype, buffer: MemoryRegion = sbuf, name: str = "") -> NkiTensor:
    """A new on-chip tile of ones."""
    return full(shape, 1, dtype, buffer, name)


def empty_like(
    x: NkiTensor, dtype: torch.dtype | None = None, buffer: MemoryRegion | None = None, name: str = ""
) -> NkiTensor:
    """An uninitialised tensor shaped like ``x``."""
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def zeros_like(
    x: NkiTensor, dtype: torch.dtype | None = None, buffer: MemoryRegion | None = None, name: str = ""
) -> NkiTensor:
    """A zero tile shaped like ``x``."""
    return zeros(x.shape, dtype or x.dtype, buffer or (x.buffer if x.buffer in (sbuf, psum) else sbuf), name)


# -- memory -----------------------------------------------------------------------------------------
def load(src: NkiTensor, dtype: torch.dtype | None = None) -> NkiTensor:
    """Copy an HBM region into a new SBUF tile (dim 0 becomes the partition dim) with a DMA."""
    if not isinstance(src, NkiTensor):
        raise fail(f"nl.load takes a kernel tensor (an HBM argument or a slice of one), got {type(src).__name__}")
    if src.buffer in (sbuf, psum):
        raise fail(f"nl.load reads HBM; {src!r} is already on chip (use it directly or nisa.tensor_copy)")
    shape = src.shape if src.ndim >= 2 else (1, *src.shape)
    tile = ndarray(shape, dtype or src.dtype, sbuf)
    isa.dma_copy(dst=tile, src=src)
    return tile


def store(dst: NkiTensor, value: NkiTensor) -> None:
    """Copy an SBUF tile into an HBM region with a DMA (PSUM must be copied to SBUF first)."""
    if not isinstance(dst, NkiTensor) or dst.buffer in (sbuf, psum):
        raise fail("nl.store writes an HBM tensor: nl.store(out[...], tile)")
    if not isinstance(value, NkiTensor):
        raise fail(f"nl.store stores a tile, got {type(value).__name__}")
    if value.buffer is psum:
        raise fail("nl.store: DMA cannot read PSUM; copy the tile to SBUF first (nl.copy(t) or nisa.tensor_copy)")
    isa.dma_copy(dst=dst, src=value)


def device_print(prefix: str, tensor: NkiTensor) -> None:
    """Print a tile's values (simulator only)."""
    print(prefix, tensor.data if not current().meta else f"<meta {tensor.shape}>")


# -- tile math ------------------------------------------------------------------------------------------
def _tile_for(x: NkiTensor, dtype: torch.dtype | None) -> NkiTensor:
    return ndarray(x.shape, dtype or x.dtype, sbuf)


def _need_tile(x: Any, fn: str) -> NkiTensor:
    if not isinstance(x, NkiTensor):
        raise fail(f"nl.{fn}: expected a tile, got {type(x).__name__}")
    if x.buffer not in (sbuf, psum):
        raise fail(f"nl.{fn}: {x!r} is in HBM; load it into SBUF first (nl.load)")
    return x


def binary(op: BinaryOp, x: Any, y: Any, dtype: torch.dtype | None = None) -> NkiTensor:
    """``op(x, y)`` on tiles: tensor_tensor for equal layouts, tensor_scalar for scalars or ``(P, 1)`` vectors."""
    if not isinstance(x, NkiTensor):
        t = _need_tile(y, op.name)
        out = _tile_for(t, dtype)
        isa.tensor_scalar(out, t, op, x, reverse0=True)
        return out
    x = _need_tile(x, op.name)
    if not isinstance(y, NkiTensor):
        out = _tile_for(x, dtype)
        isa.tensor_scalar(out, x, op, y)
        return out
    y = _need_tile(y, op.name)
    if x.shape == y.shape:
        out = ndarray(x.shape, dtype or torch.promote_types(x.dtype, y.dtype), sbuf)
        isa.tensor_tensor(out, x, y, op)
        return out
    if y.free_size == 1 and y.partitions == x.partitions:
        out = _tile_for(x, dtype)
        isa.tensor_scalar(out, x, op, y)
        return out
    if x.free_size == 1 and x.partitions == y.partitions:
        out = _tile_for(y, dtype)
        isa.tensor_scalar(out, y, op, x, reverse0=True)
        return out
    raise fail(
        f"nl.{op.name}: cannot combine tiles {x.shape} and {y.shape}; shapes must match or one must be a "
        "(P, 1) per-partition vector (broadcasting across partitions needs an explicit copy)"
    )


def unary(op: UnaryOp, x: Any, dtype: torch.dtype | None = None) -> NkiTensor:
    """``op(x)`` on a tile with the Scalar Engine (``activation``)."""
    x = _need_tile(x, op.name)
    out = _tile_for(x, dtype)
    isa.activation(out, op, x)
    return out


def _reduce(op: BinaryOp, x: Any, axis: Any, dtype: torch.dtype | None, keepdims: bool, fn: str) -> NkiTensor:
    x = _need_tile(x, fn)
    axes = tuple(sorted(a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis)))
    shape = [s if i not in axes else 1 for i, s in enumerate(x.shape)]
    if not keepdims:
        shape = [s for i, s in enumerate(shape) if i not in axes] or [x.partitions]
        if len(shape) == 1:
            shape.append(1)
    out = ndarray(tuple(shape), dtype or x.dtype, sbuf)
    isa.tensor_reduce(out, op, x, axes, keepdims=keepdims)
    return out


def sum(x: Any, axis: Any, dtype: torch.dtype | None = None, keepdims: bool = False) -> NkiTensor:
    """Sum over free axes (VectorE ``tensor_reduce``)."""
    return _reduce(BINARY["add"], x, axis, dtype, keepdims, "sum")


def max(x: Any, axis: Any, dtype: torch.dtype | None = None, keepdims: bool = False) -> NkiTensor:
    """Maximum over free axes."""
    return _reduce(BINARY["maximum"], x, axis, dtype, keepdims, "max")


def min(x: Any, axis: Any, dtype: torch.dtype | None = None, keepdims: bool = False) -> NkiTensor:
    """Minimum over free axes."""
    return _reduce(BINARY["minimum"], x, axis, dtype, keepdims, "min")


def prod(x: Any, axis: Any, dtype: torch.dtype | None = None, keepdims: bool = False) -> NkiTensor:
    """Product over free axes."""
    return _reduce(BINARY["multiply"], x, axis, dtype, keepdims, "prod")


def mean(x: Any, axis: Any, dtype: torch.dtype | None = None, keepdims: bool = False) -> NkiTensor:
    """Mean over free axes (a sum, then a multiply by ``1/n``)."""
    s = sum(x, axis, torch.float32, keepdims)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = math.prod(x.shape[a] for a in axes)
    out = ndarray(s.shape, dtype or x.dtype, sbuf)
    isa.tensor_scalar(out, s, BINARY["multiply"], 1.0 / n)
    return out


def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False) -> NkiTensor:
    """``x @ y`` into a new fp32 PSUM tile; ``transpose_x=True`` means ``x`` is already ``[K, M]``."""
    x = _need_tile(x, "matmul")
    y = _need_tile(y, "matmul")
    stationary = x if transpose_x else unary(UNARY["copy"], transpose(x), x.dtype)
    out = ndarray((stationary.free_size, y.free_size), float32, psum)
    isa.nc_matmul(out, stationary, y)
    return out


def transpose(x: NkiTensor, dtype: torch.dtype | None = None) -> NkiTensor:
    """Swap partition and free axes (TensorE for tiles above 32x32, VectorE below) into PSUM."""
    x = _need_tile(x, "transpose")
    out = ndarray((x.free_size, x.partitions), x.dtype, psum)
    isa.nc_transpose(out, x)
    return out


def broadcast_to(x: NkiTensor, shape: Any, dtype: torch.dtype | None = None) -> NkiTensor:
    """A view of ``x`` with size-1 dims (the partition dim included) repeated to ``shape`` (no copy)."""
    if not isinstance(x, NkiTensor):
        raise fail(f"nl.broadcast_to takes a tile, got {type(x).__name__}")
    shape = tuple(int(s) for s in shape)
    if len(shape) != x.ndim or any(a != b and a != 1 for a, b in zip(x.shape, shape)):
        raise fail(f"nl.broadcast_to: cannot broadcast {x.shape} to {shape} (only size-1 dims repeat)")
    if shape[0] > 128:
        raise fail(f"nl.broadcast_to: {shape[0]} partitions exceed 128")
    return NkiTensor(x.data.expand(shape), x.storage)


# -- operators: ALU operators and activation functions, by their NKI names ----------------------------
class TileBinaryOp(BinaryOp):
    """``nl.<name>``: the ALU operator of :data:`.ops.BINARY`, also callable on tiles (``nl.add(x, y)``)."""

    def __call__(self, x: Any, y: Any, dtype: torch.dtype | None = None) -> NkiTensor:
        return binary(self, x, y, dtype)


class TileUnaryOp(UnaryOp):
    """``nl.<name>``: the activation function of :data:`.ops.UNARY`, also callable on a tile (``nl.exp(x)``)."""

    def __call__(self, x: Any, dtype: torch.dtype | None = None) -> NkiTensor:
        return unary(self, x, dtype)


def _b(name: str) -> TileBinaryOp:
    op = BINARY[name]
    return TileBinaryOp(op.name, op.fn, op.reduce, op.bitvec)


def _u(name: str) -> TileUnaryOp:
    op = UNARY[name]
    return TileUnaryOp(op.name, op.fn, op.alu)


add = _b("add")
subtract = _b("subtract")
multiply = _b("multiply")
divide = _b("divide")
maximum = _b("maximum")
minimum = _b("minimum")
power = _b("power")
equal = _b("equal")
not_equal = _b("not_equal")
less = _b("less")
less_equal = _b("less_equal")
greater = _b("greater")
greater_equal = _b("greater_equal")
bitwise_and = _b("bitwise_and")
bitwise_or = _b("bitwise_or")
bitwise_xor = _b("bitwise_xor")
left_shift = _b("left_shift")
right_shift = _b("right_shift")
logical_and = _b("logical_and")
logical_or = _b("logical_or")
logical_xor = _b("logical_xor")
fmod = _b("fmod")
mod = _b("mod")
copy = _u("copy")
exp = _u("exp")
log = _u("log")
sqrt = _u("sqrt")
rsqrt = _u("rsqrt")
reciprocal = _u("reciprocal")
tanh = _u("tanh")
sigmoid = _u("sigmoid")
relu = _u("relu")
gelu = _u("gelu")
gelu_apprx_tanh = _u("gelu_apprx_tanh")
gelu_apprx_sigmoid = _u("gelu_apprx_sigmoid")
gelu_dx = _u("gelu_dx")
silu = _u("silu")
silu_dx = _u("silu_dx")
softplus = _u("softplus")
mish = _u("mish")
erf = _u("erf")
erf_dx = _u("erf_dx")
sin = _u("sin")
cos = _u("cos")
tan = _u("tan")
arctan = _u("arctan")
square = _u("square")
abs = _u("abs")
negative = _u("negative")
sign = _u("sign")
ceil = _u("ceil")
floor = _u("floor")
trunc = _u("trunc")

bind_tile_ops({name: globals()[name] for name in (*BINARY, "negative")})  # a + b is add(a, b), -a is negative(a)

__all__ = [
    "bool_", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32", "bfloat16",
    "tfloat32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2",
    "sbuf", "psum", "hbm", "private_hbm", "shared_hbm", "tile_size", "is_hbm", "is_on_chip",
    "ndarray", "zeros", "ones", "full", "empty_like", "zeros_like", "load", "store", "device_print",
    "affine_range", "sequential_range", "static_range", "program_id", "num_programs", "program_ndim", "ds",
    "sum", "max", "min", "mean", "prod", "matmul", "transpose", "broadcast_to", "NkiTensor", "DynSlice",
    *BINARY, *UNARY,
]  # fmt: skip
