"""Data-movement instructions: DMA copies, on-chip copies, memset and iota."""

from __future__ import annotations

import math
from typing import Any

import torch

from . import costmodel as cm
from .errors import fail
from .instr_common import (
    _flat,
    _lane,
    _line,
    _on_chip,
    _read_psum,
    _same_layout,
    _store,
    _tensor,
    engine,
)
from .simulator import PMAX, current
from .tensor import NkiTensor, psum, sbuf


# -- data movement ------------------------------------------------------------------------------
def _contiguous_bytes(t: NkiTensor) -> int:
    """Bytes of the innermost contiguous run of ``t`` (per partition for on-chip tensors)."""
    run = 1
    expect = 1
    dims = list(zip(t.data.shape, t.data.stride()))
    stop = 1 if t.buffer in (sbuf, psum) else 0
    for size, stride in reversed(dims[stop:]):
        if size == 1:
            continue
        if stride != expect:
            break
        run *= size
        expect *= size
    return run * t.data.element_size()


def dma_copy(dst: NkiTensor, src: NkiTensor, *, name: str | None = None, **_: Any) -> None:
    """``dst = src`` with the DMA engines between HBM and SBUF (any dtype; cast through float32)."""
    ctx = current()
    dst = _tensor(dst, "dst", "dma_copy")
    src = _tensor(src, "src", "dma_copy")
    for t, what in ((dst, "dst"), (src, "src")):
        if t.buffer is psum:
            raise fail(
                f"dma_copy: {what} is in PSUM; DMA reaches HBM and SBUF only (copy PSUM out with nisa.tensor_copy)"
            )
    if dst.size != src.size:
        raise fail(f"dma_copy: src has {src.size} elements {src.shape}, dst {dst.size} {dst.shape}; they must match")
    if not ctx.meta:
        value = src.data if src.dtype == dst.dtype else src.data.float()
        dst.data.copy_(value.reshape(dst.shape))
    on_chip = dst if dst.buffer is sbuf else src
    partitions = on_chip.partitions if on_chip.buffer is sbuf else max(1, min(PMAX, src.shape[0] if src.ndim else 1))
    contiguous = min(_contiguous_bytes(src), _contiguous_bytes(dst))
    nbytes = max(src.size * src.data.element_size(), dst.size * dst.data.element_size())
    ctx.scheduler.dma("dma_copy", nbytes, contiguous, partitions, [src], [dst], _line())


def tensor_copy(dst: NkiTensor, src: NkiTensor, engine: engine = engine.unknown, name: str | None = None) -> None:
    """Copy an on-chip tile (SBUF/PSUM) with VectorE (default), ScalarE or GpSimdE, casting to ``dst.dtype``."""
    ctx = current()
    dst = _tensor(dst, "dst", "tensor_copy")
    src = _tensor(src, "src", "tensor_copy")
    _on_chip(dst, "dst", "tensor_copy")
    _on_chip(src, "src", "tensor_copy")
    _same_layout(dst, src, "tensor_copy", "dst and src")
    lane = _lane(engine, "VectorE", ("VectorE", "ScalarE", "GpSimdE"), "tensor_copy")
    if lane == "GpSimdE" and psum in (dst.buffer, src.buffer):
        raise fail("tensor_copy: GpSimdE cannot access PSUM; use engine=nisa.engine.vector or scalar")
    if not ctx.meta:
        if src.dtype == dst.dtype:
            dst.data.copy_(src.data.reshape(dst.shape))
        else:
            _store(dst, _flat(src))
        _read_psum(ctx, src)
    n = src.free_size
    secs = cm.scalar_s(ctx.spec, n) if lane == "ScalarE" else cm.vector_s(ctx.spec, n, src.dtype)
    ctx.scheduler.engine("tensor_copy", lane, secs, [src], [dst], _line())


def memset(dst: NkiTensor, value: float | int, engine: engine = engine.unknown, name: str | None = None) -> None:
    """Fill an on-chip tile with a constant (VectorE or GpSimdE)."""
    ctx = current()
    dst = _tensor(dst, "dst", "memset")
    _on_chip(dst, "dst", "memset")
    lane = _lane(engine, "VectorE", ("VectorE", "GpSimdE"), "memset")
    if not ctx.meta:
        dst.data.fill_(value)
    half = value == 0 and dst.dtype in (torch.bfloat16, torch.float16)
    secs = cm.vector_s(ctx.spec, dst.free_size, dst.dtype, 0.5 if half else 1.0)
    ctx.scheduler.engine("memset", lane, secs, [], [dst], _line())


def iota(
    dst: NkiTensor, pattern: list[list[int]], offset: int = 0, channel_multiplier: int = 0, name: str | None = None
) -> None:
    """``dst[c, ...] = offset + c * channel_multiplier + sum(step_i * idx_i)`` (GpSimdE, int32 math, SBUF)."""
    ctx = current()
    dst = _tensor(dst, "dst", "iota")
    _on_chip(dst, "dst", "iota", (sbuf,))
    steps = [int(s) for s, _ in pattern]
    nums = [int(n) for _, n in pattern]
    if math.prod(nums) != dst.free_size:
        raise fail(f"iota: pattern covers {math.prod(nums)} elements per partition, dst has {dst.free_size}")
    if not ctx.meta:
        vals = torch.zeros(nums, dtype=torch.int64)
        for i, (s, n) in enumerate(zip(steps, nums)):
            shape = [1] * len(nums)
            shape[i] = n
            vals = vals + (torch.arange(n, dtype=torch.int64) * s).reshape(shape)
        chan = torch.arange(dst.partitions, dtype=torch.int64).reshape(-1, 1) * channel_multiplier
        dst.data.copy_((offset + chan + vals.reshape(1, -1)).reshape(dst.shape).to(dst.dtype))
    ctx.scheduler.engine("iota", "GpSimdE", cm.gpsimd_s(ctx.spec, dst.free_size), [], [dst], _line())
