"""Shared pieces of the ISA instructions: engine enums, operand checks, float32 engine math."""

from __future__ import annotations

import enum
from typing import Any

import torch

from ..device.numerics.calls import tile_cast
from .errors import describe, fail, kernel_line
from .simulator import SimContext
from .tensor import NkiTensor, psum, sbuf


class engine(enum.Enum):
    """NeuronCore engines (``nki.isa.engine``)."""

    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6
    unknown = 0


class reduce_cmd(enum.Enum):
    """ScalarE accumulator commands of ``activation`` (``nki.isa.reduce_cmd``)."""

    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3


_LANES = {engine.tensor: "TensorE", engine.vector: "VectorE", engine.scalar: "ScalarE", engine.gpsimd: "GpSimdE"}


def _line() -> str:
    loc = kernel_line()
    return "" if loc is None else describe(loc[0], loc[1])


def _tensor(x: Any, what: str, instr: str) -> NkiTensor:
    if not isinstance(x, NkiTensor):
        raise fail(f"{instr}: {what} must be a kernel tensor (nl.ndarray / a kernel argument), got {type(x).__name__}")
    return x


def _on_chip(t: NkiTensor, what: str, instr: str, allowed: tuple = (sbuf, psum)) -> None:
    if t.buffer not in allowed:
        names = " or ".join(b.value.upper() for b in allowed)
        raise fail(f"{instr}: {what} must be in {names}, it is in {t.buffer.value.upper()} {t.shape}")


def _flat(t: NkiTensor) -> torch.Tensor:
    """``(partitions, elements per partition)`` float32 copy of ``t`` for engine math."""
    return t.data.reshape(t.partitions, -1).float()


def _same_layout(a: NkiTensor, b: NkiTensor, instr: str, what: str) -> None:
    if a.partitions != b.partitions or a.free_size != b.free_size:
        raise fail(
            f"{instr}: {what} must have the same partitions and elements per partition: "
            f"{a.shape} vs {b.shape} ({a.partitions}x{a.free_size} vs {b.partitions}x{b.free_size})"
        )


def _store(dst: NkiTensor, value: torch.Tensor) -> None:
    """Write float32 ``value`` (same element count) into ``dst`` with the engine's cast."""
    dst.data.copy_(tile_cast(value.reshape(dst.shape), dst.dtype))  # RNE, or the numerics policy's SR


def _read_psum(ctx: SimContext, *tensors: NkiTensor) -> None:
    """Reading a PSUM region closes its matmul accumulation group (the next ``accumulate=None`` overwrites)."""
    if ctx.meta:
        return
    for t in tensors:
        if isinstance(t, NkiTensor) and t.buffer is psum and t.storage.written is not None:
            t.storage.written.as_strided(t.data.shape, t.data.stride(), t.data.storage_offset()).fill_(False)


def _lane(requested: engine, default: str, allowed: tuple[str, ...], instr: str) -> str:
    if requested in (engine.unknown, None):
        return default
    lane = _LANES.get(requested)
    if lane not in allowed:
        raise fail(f"{instr} runs on {', '.join(allowed)}, not {requested}")
    return lane


def _operand(x: Any, data: NkiTensor, instr: str, what: str) -> torch.Tensor | float:
    """A scalar, or a ``(P, 1)`` vector broadcast along the free dims of ``data``."""
    if isinstance(x, int | float | bool):
        return float(x)
    t = _tensor(x, what, instr)
    _on_chip(t, what, instr)
    if t.partitions != data.partitions or t.free_size != 1:
        raise fail(f"{instr}: {what} must be a scalar or a ({data.partitions}, 1) vector, got {t.shape}")
    return t.data.reshape(t.partitions, 1).float()
