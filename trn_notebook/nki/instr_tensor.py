"""Tensor Engine instructions: matmul into PSUM and transposes."""

from __future__ import annotations

from typing import Any

import torch

from ..device.numerics.calls import tile_cast
from . import costmodel as cm
from .errors import fail
from .instr_common import (
    _flat,
    _lane,
    _line,
    _on_chip,
    _read_psum,
    _tensor,
    engine,
)
from .simulator import current
from .tensor import MATMUL_DTYPES, NkiTensor, psum, sbuf


# -- Tensor Engine --------------------------------------------------------------------------------
def nc_matmul(
    dst: NkiTensor,
    stationary: NkiTensor,
    moving: NkiTensor,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    tile_position: tuple = (),
    tile_size: tuple = (),
    perf_mode: Any = None,
    name: str | None = None,
) -> None:
    """``dst (PSUM, fp32) [+]= stationary.T @ moving`` on TensorE; the contraction is the partition dim."""
    ctx = current()
    dst = _tensor(dst, "dst", "nc_matmul")
    st = _tensor(stationary, "stationary", "nc_matmul")
    mv = _tensor(moving, "moving", "nc_matmul")
    _on_chip(st, "stationary", "nc_matmul", (sbuf,))
    _on_chip(mv, "moving", "nc_matmul", (sbuf,))
    _on_chip(dst, "dst", "nc_matmul", (psum,))
    for t, what in ((st, "stationary"), (mv, "moving")):
        if t.dtype not in MATMUL_DTYPES:
            raise fail(f"nc_matmul: {what} has dtype {t.dtype}; TensorE takes fp8/bf16/fp16/tf32/fp32 inputs")
    fp32 = torch.float32 in (st.dtype, mv.dtype)
    if fp32 and st.dtype != mv.dtype:
        raise fail(f"nc_matmul: a float32 operand needs a float32 partner (stationary {st.dtype}, moving {mv.dtype})")
    allowed = (torch.float32, torch.bfloat16) if ctx.spec.moving_fmax > 512 else (torch.float32,)
    if dst.dtype not in allowed:
        raise fail(
            f"nc_matmul: dst must be a {' or '.join(map(str, allowed))} PSUM tile on {ctx.spec.name}, got {dst.dtype}"
        )
    if st.partitions != mv.partitions:
        raise fail(
            f"nc_matmul: stationary and moving must share the contraction (partition) size: {st.shape} vs {mv.shape}"
        )
    m, n = st.free_size, mv.free_size
    if m > 128:
        raise fail(f"nc_matmul: stationary free size {m} exceeds 128 (the TensorE has 128 PE columns); tile M by 128")
    if n > ctx.spec.moving_fmax:
        raise fail(
            f"nc_matmul: moving free size {n} exceeds {ctx.spec.moving_fmax} (one PSUM bank of fp32 on "
            f"{ctx.spec.name}); tile N by {ctx.spec.moving_fmax}"
        )
    if dst.partitions != m or dst.free_size != n:
        raise fail(f"nc_matmul: dst must be ({m}, {n}) = (stationary free, moving free), got {dst.shape}")
    bank = ctx.bank_bytes
    lo, _ = dst.region()
    row = dst.storage.data[0].numel() if dst.storage.data.dim() > 1 else 1
    if (lo % row) * 4 // bank != ((lo % row) + dst.free_size - 1) * 4 // bank:
        raise fail(
            f"nc_matmul: dst {dst.shape} crosses a {bank}-byte PSUM bank boundary; an accumulation group lives in one bank"
        )
    if not ctx.meta:
        result = torch.mm(_flat(st).T, _flat(mv)).reshape(dst.shape)
        assert dst.storage.written is not None  # every PSUM storage tracks matmul writes
        mask = dst.storage.written.as_strided(dst.data.shape, dst.data.stride(), dst.data.storage_offset())
        if accumulate is None:  # FP32 PSUM: exact; a BF16 PSUM tile (NC-v4) rounds: RNE or the policy's SR
            dst.data.copy_(tile_cast(torch.where(mask, dst.data.float() + result, result), dst.dtype))
        elif accumulate:
            dst.data.copy_(tile_cast(dst.data.float() + result, dst.dtype))
        else:
            dst.data.copy_(tile_cast(result, dst.dtype))
        mask.fill_(True)
    ctx.scheduler.flops += 2.0 * st.partitions * m * n
    secs = cm.matmul_s(ctx.spec, m, n, fp32)
    ctx.scheduler.engine("nc_matmul", "TensorE", secs, [st, mv], [dst], _line())


def nc_transpose(dst: NkiTensor, data: NkiTensor, engine: engine = engine.unknown, name: str | None = None) -> None:
    """Swap partition and free axes: TensorE (SBUF -> PSUM, up to 128x128) or VectorE (up to 32x32)."""
    ctx = current()
    dst = _tensor(dst, "dst", "nc_transpose")
    data = _tensor(data, "data", "nc_transpose")
    p, f = data.partitions, data.free_size
    lane = _lane(engine, "TensorE" if (p > 32 or f > 32) else "VectorE", ("TensorE", "VectorE"), "nc_transpose")
    if lane == "TensorE":
        _on_chip(data, "data", "nc_transpose", (sbuf,))
        _on_chip(dst, "dst", "nc_transpose", (psum,))
        limit = 128
    else:
        _on_chip(data, "data", "nc_transpose")
        _on_chip(dst, "dst", "nc_transpose")
        limit = 32
    if p > limit or f > limit:
        raise fail(f"nc_transpose on {lane} takes tiles up to {limit}x{limit}, got {p}x{f}")
    if dst.dtype != data.dtype:
        raise fail(f"nc_transpose: dst dtype {dst.dtype} must equal data dtype {data.dtype}")
    if dst.partitions != f or dst.free_size != p:
        raise fail(f"nc_transpose: dst must be ({f}, {p}) for data {data.shape}, got {dst.shape}")
    if not ctx.meta:
        dst.data.copy_(data.data.reshape(p, f).T.reshape(dst.shape))
        _read_psum(ctx, data)
        if dst.storage.written is not None:
            dst.storage.written.as_strided(dst.data.shape, dst.data.stride(), dst.data.storage_offset()).fill_(True)
    secs = cm.transpose_tensor_s(ctx.spec, p, f) if lane == "TensorE" else cm.vector_s(ctx.spec, f, data.dtype)
    ctx.scheduler.engine("nc_transpose", lane, secs, [data], [dst], _line())
