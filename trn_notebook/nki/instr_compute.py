"""Vector, Scalar and GpSimd engine instructions: elementwise math, reductions, activations."""

from __future__ import annotations

import math
from typing import Any

import torch

from ..device.numerics.calls import check_activation_range
from . import costmodel as cm
from .errors import fail
from .instr_common import (
    _flat,
    _lane,
    _line,
    _on_chip,
    _operand,
    _read_psum,
    _same_layout,
    _store,
    _tensor,
    engine,
    reduce_cmd,
)
from .ops import BinaryOp, UnaryOp
from .simulator import PMAX, current
from .tensor import FLOAT_DTYPES, NkiTensor, psum


# -- Vector / Scalar / GpSimd ------------------------------------------------------------------------
def tensor_tensor(
    dst: NkiTensor,
    data1: NkiTensor,
    data2: NkiTensor,
    op: BinaryOp,
    engine: engine = engine.unknown,
    name: str | None = None,
) -> None:
    """``dst = data1 <op> data2`` elementwise on VectorE (GpSimdE for ``nl.power``)."""
    ctx = current()
    dst = _tensor(dst, "dst", "tensor_tensor")
    a = _tensor(data1, "data1", "tensor_tensor")
    b = _tensor(data2, "data2", "tensor_tensor")
    if not isinstance(op, BinaryOp):
        raise fail(f"tensor_tensor: op must be a binary ALU operator such as nl.add or nl.multiply, got {op!r}")
    for t, what in ((dst, "dst"), (a, "data1"), (b, "data2")):
        _on_chip(t, what, "tensor_tensor")
    _same_layout(a, b, "tensor_tensor", "data1 and data2")
    _same_layout(dst, a, "tensor_tensor", "dst and data1")
    if a.buffer is psum and b.buffer is psum:
        raise fail("tensor_tensor: data1 and data2 cannot both be in PSUM; copy one to SBUF first")
    lane = _lane(engine, "GpSimdE" if op.name == "power" else "VectorE", ("VectorE", "GpSimdE"), "tensor_tensor")
    if lane == "GpSimdE" and psum in (dst.buffer, a.buffer, b.buffer):
        raise fail("tensor_tensor: GpSimdE (used for nl.power) cannot access PSUM")
    _check_bitvec(op, (dst, a, b), "tensor_tensor")
    if not ctx.meta:
        _store(dst, op.fn(_flat(a), _flat(b)))
        _read_psum(ctx, a, b)
    fast = psum in (a.buffer, b.buffer) or (
        all(t.dtype == torch.bfloat16 for t in (a, b, dst)) and op.name in ("add", "subtract", "multiply")
    )
    secs = cm.vector_s(ctx.spec, a.free_size, a.dtype, 1.0 if fast else 2.0)
    ctx.scheduler.engine(f"tensor_tensor[{op.name}]", lane, secs, [a, b], [dst], _line())


def _check_bitvec(op: BinaryOp, tensors: tuple[NkiTensor, ...], instr: str) -> None:
    if op.bitvec and any(t.dtype in FLOAT_DTYPES for t in tensors):
        raise fail(f"{instr}: bitvec operator {op!r} needs integer tiles, got {[str(t.dtype) for t in tensors]}")


def _apply(op: Any, x: torch.Tensor, operand: torch.Tensor | float, reverse: bool) -> torch.Tensor:
    if isinstance(op, UnaryOp):
        return op.fn(x)
    if reverse:
        return op.fn(operand if isinstance(operand, torch.Tensor) else torch.full_like(x, operand), x)
    return op.fn(x, operand)


def tensor_scalar(
    dst: NkiTensor,
    data: NkiTensor,
    op0: BinaryOp,
    operand0: Any,
    reverse0: bool = False,
    op1: BinaryOp | None = None,
    operand1: Any = None,
    reverse1: bool = False,
    engine: engine = engine.unknown,
    name: str | None = None,
) -> None:
    """``dst = (data <op0> operand0) <op1> operand1`` with scalar or per-partition ``(P, 1)`` operands."""
    ctx = current()
    dst = _tensor(dst, "dst", "tensor_scalar")
    data = _tensor(data, "data", "tensor_scalar")
    _on_chip(dst, "dst", "tensor_scalar")
    _on_chip(data, "data", "tensor_scalar")
    _same_layout(dst, data, "tensor_scalar", "dst and data")
    ops = [(op0, operand0, reverse0)] + ([(op1, operand1, reverse1)] if op1 is not None else [])
    for op, _, _ in ops:
        if not isinstance(op, BinaryOp) and not (isinstance(op, UnaryOp) and op.alu):
            raise fail(f"tensor_scalar: {op!r} is not an ALU operator (nl.add, nl.multiply, nl.maximum, ...)")
        if isinstance(op, BinaryOp):
            _check_bitvec(op, (dst, data), "tensor_scalar")
    if op1 is None and operand1 is not None:
        raise fail("tensor_scalar: operand1 is given but op1 is None")
    lane = _lane(engine, "VectorE", ("VectorE", "ScalarE", "GpSimdE"), "tensor_scalar")
    vals = [
        _operand(v, data, "tensor_scalar", f"operand{i}") if not isinstance(op, UnaryOp) else 0.0
        for i, (op, v, _) in enumerate(ops)
    ]
    reads = [data, *(v for _, v, _ in ops if isinstance(v, NkiTensor))]
    if not ctx.meta:
        x = _flat(data)
        for (op, _, rev), v in zip(ops, vals):
            x = _apply(op, x, v, rev)
        _store(dst, x)
        _read_psum(ctx, data)
    secs = (
        cm.scalar_s(ctx.spec, data.free_size)
        if lane == "ScalarE"
        else cm.vector_s(ctx.spec, data.free_size, data.dtype)
    )
    ctx.scheduler.engine("tensor_scalar", lane, secs, reads, [dst], _line())


def tensor_reduce(
    dst: NkiTensor,
    op: BinaryOp,
    data: NkiTensor,
    axis: int | tuple | list,
    negate: bool = False,
    keepdims: bool = False,
    name: str | None = None,
) -> None:
    """Reduce the last free axes of ``data`` with ``op`` (VectorE); the partition axis cannot be reduced."""
    ctx = current()
    dst = _tensor(dst, "dst", "tensor_reduce")
    data = _tensor(data, "data", "tensor_reduce")
    _on_chip(dst, "dst", "tensor_reduce")
    _on_chip(data, "data", "tensor_reduce")
    if not isinstance(op, BinaryOp) or op.reduce is None:
        raise fail(
            f"tensor_reduce: {op!r} is not a reduction operator (nl.add, nl.maximum, nl.minimum, nl.multiply, bitwise)"
        )
    axes = tuple(sorted(a % data.ndim for a in ((axis,) if isinstance(axis, int) else axis)))
    if not axes or 0 in axes:
        raise fail(f"tensor_reduce: axis {axis} reduces the partition dim; only free axes reduce (transpose first)")
    if axes != tuple(range(axes[0], data.ndim)):
        raise fail(
            f"tensor_reduce: axis {axis} must be the last contiguous free dims of {data.shape}, e.g. ({data.ndim - 1},)"
        )
    kept = math.prod(data.shape[1 : axes[0]])
    if dst.partitions != data.partitions or dst.free_size != kept:
        raise fail(
            f"tensor_reduce: dst {dst.shape} must hold {data.partitions}x{kept} results for data {data.shape} over axis {axis}"
        )
    _check_bitvec(op, (dst, data), "tensor_reduce")
    if not ctx.meta:
        x = data.data.float() if not op.bitvec else data.data
        r = op.reduce(x, axes)
        _store(dst, -r.float() if negate else r.float())
        _read_psum(ctx, data)
    fast = data.dtype == torch.bfloat16 and op.name in ("add", "maximum")
    secs = cm.vector_s(ctx.spec, data.free_size, torch.float32, 0.5 if fast else 1.0)
    ctx.scheduler.engine(f"tensor_reduce[{op.name}]", "VectorE", secs, [data], [dst], _line())


def activation(
    dst: NkiTensor,
    op: UnaryOp,
    data: NkiTensor,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: BinaryOp | None = None,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: reduce_cmd = reduce_cmd.idle,
    name: str | None = None,
) -> None:
    """``dst = op(data * scale + bias)`` on ScalarE, optionally add-reducing the result per partition."""
    ctx = current()
    dst = _tensor(dst, "dst", "activation")
    data = _tensor(data, "data", "activation")
    if not isinstance(op, UnaryOp):
        raise fail(f"activation: op must be an activation function such as nl.exp or nl.gelu, got {op!r}")
    _on_chip(dst, "dst", "activation")
    _on_chip(data, "data", "activation")
    _same_layout(dst, data, "activation", "dst and data")
    s = _operand(scale, data, "activation", "scale")
    b = _operand(bias, data, "activation", "bias") if bias is not None else 0.0
    if reduce_op is not None and getattr(reduce_op, "name", "") != "add":
        raise fail(f"activation: reduce_op must be nl.add, got {reduce_op!r}")
    if reduce_res is not None:
        reduce_res = _tensor(reduce_res, "reduce_res", "activation")
        if reduce_res.partitions != data.partitions or reduce_res.free_size != 1:
            raise fail(f"activation: reduce_res must be ({data.partitions}, 1), got {reduce_res.shape}")
    reads = [data, *(v for v in (scale, bias) if isinstance(v, NkiTensor))]
    if not ctx.meta:
        x = _flat(data) * s + b
        check_activation_range(op.name, x)  # trainium numerics: the documented valid input range
        out = op.fn(x)
        _store(dst, out)
        _read_psum(ctx, data)
        regs = ctx.__dict__.setdefault("act_regs", torch.zeros(PMAX, 1))
        if reduce_cmd in (reduce_cmd.reset, reduce_cmd.reset_reduce):
            regs.zero_()
        if reduce_op is not None and reduce_cmd in (reduce_cmd.reduce, reduce_cmd.reset_reduce):
            regs[: data.partitions] += out.sum(dim=1, keepdim=True)
        elif reduce_op is not None and reduce_cmd is reduce_cmd.idle and reduce_res is not None:
            regs[: data.partitions] = out.sum(dim=1, keepdim=True)
        if reduce_res is not None:
            _store(reduce_res, regs[: data.partitions])
    secs = cm.scalar_s(ctx.spec, data.free_size)
    writes = [dst] if reduce_res is None else [dst, reduce_res]
    ctx.scheduler.engine(f"activation[{op.name}]", "ScalarE", secs, reads, writes, _line())


def reciprocal(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> None:
    """``dst = 1 / data`` on VectorE (``max(MIN_II, 8N)`` cycles)."""
    ctx = current()
    dst = _tensor(dst, "dst", "reciprocal")
    data = _tensor(data, "data", "reciprocal")
    _on_chip(dst, "dst", "reciprocal")
    _on_chip(data, "data", "reciprocal")
    _same_layout(dst, data, "reciprocal", "dst and data")
    if not ctx.meta:
        _store(dst, torch.reciprocal(_flat(data)))
        _read_psum(ctx, data)
    secs = cm.vector_s(ctx.spec, data.free_size, torch.float32, 8.0)
    ctx.scheduler.engine("reciprocal", "VectorE", secs, [data], [dst], _line())


def tensor_tensor_scan(
    dst: NkiTensor,
    data0: NkiTensor,
    data1: NkiTensor,
    initial: Any,
    op0: BinaryOp,
    op1: BinaryOp,
    reverse0: bool = False,
    reverse1: bool = False,
    name: str | None = None,
) -> None:
    """Scan along the free axis: ``h[i] = (data0[i] <op0> h[i-1]) <op1> data1[i]``, ``h[-1] = initial`` (VectorE)."""
    ctx = current()
    dst = _tensor(dst, "dst", "tensor_tensor_scan")
    a = _tensor(data0, "data0", "tensor_tensor_scan")
    b = _tensor(data1, "data1", "tensor_tensor_scan")
    for t, what in ((dst, "dst"), (a, "data0"), (b, "data1")):
        _on_chip(t, what, "tensor_tensor_scan")
    _same_layout(a, b, "tensor_tensor_scan", "data0 and data1")
    _same_layout(dst, a, "tensor_tensor_scan", "dst and data0")
    for op in (op0, op1):
        if not isinstance(op, BinaryOp):
            raise fail(f"tensor_tensor_scan: {op!r} is not an ALU operator")
    h0 = _operand(initial, a, "tensor_tensor_scan", "initial")
    reads = [a, b, *([initial] if isinstance(initial, NkiTensor) else [])]
    if not ctx.meta:
        x, y = _flat(a), _flat(b)
        h = h0 if isinstance(h0, torch.Tensor) else torch.full((a.partitions, 1), h0)
        cols = []
        for i in range(x.shape[1]):
            xi = x[:, i : i + 1]
            h = op0.fn(h, xi) if reverse0 else op0.fn(xi, h)
            h = op1.fn(y[:, i : i + 1], h) if reverse1 else op1.fn(h, y[:, i : i + 1])
            cols.append(h)
        _store(dst, torch.cat(cols, dim=1))
        _read_psum(ctx, a, b)
    secs = cm.vector_s(ctx.spec, a.free_size, torch.float32, 2.0)
    ctx.scheduler.engine("tensor_tensor_scan", "VectorE", secs, reads, [dst], _line())
