"""A small kernel library written in the NKI subset, each checked against PyTorch in tests/nki.

``matmul_kernel(lhsT, rhs)`` (``lhsT`` is ``[K, M]``, as TensorE wants the contraction on the
partitions), ``softmax_kernel(x)`` (rows), ``rmsnorm_kernel(x, weight)`` and
``flash_attention_kernel(q, k, v)`` (one head, causal optional, online softmax).
"""

from __future__ import annotations

import math

from . import isa as nisa
from . import language as nl
from .traced import jit


@jit
def matmul_kernel(lhsT, rhs, tile_m: int = 128, tile_k: int = 128, tile_n: int = 512):
    """``lhsT.T @ rhs`` tiled by 128 x 128 x 512, accumulating over K in one PSUM bank."""
    K, M = lhsT.shape
    _, N = rhs.shape
    tile_n = min(tile_n, N)
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // tile_m):
        for n in nl.affine_range(N // tile_n):
            acc = nl.ndarray((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // tile_k):
                a = nl.ndarray((tile_k, tile_m), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((tile_k, tile_n), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * tile_k : (k + 1) * tile_k, m * tile_m : (m + 1) * tile_m])
                nisa.dma_copy(dst=b, src=rhs[k * tile_k : (k + 1) * tile_k, n * tile_n : (n + 1) * tile_n])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            res = nl.ndarray((tile_m, tile_n), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * tile_m : (m + 1) * tile_m, n * tile_n : (n + 1) * tile_n], src=res)
    return out


@jit
def softmax_kernel(x):
    """Row softmax of ``x`` [R, C]: 128 rows per tile; max (VectorE), exp with fused row sum (ScalarE), scale."""
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(math.ceil(R / 128)):
        rows = min(128, R - i * 128)
        t = nl.load(x[i * 128 : i * 128 + rows, :])
        neg_max = nl.ndarray((rows, 1), dtype=nl.float32)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=t, axis=1, negate=True)
        e = nl.ndarray((rows, C), dtype=nl.float32)
        total = nl.ndarray((rows, 1), dtype=nl.float32)
        nisa.activation(
            dst=e,
            op=nl.exp,
            data=t,
            bias=neg_max,
            reduce_op=nl.add,
            reduce_res=total,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        inv = nl.ndarray((rows, 1), dtype=nl.float32)
        nisa.reciprocal(dst=inv, data=total)
        y = nl.ndarray((rows, C), dtype=x.dtype)
        nisa.tensor_scalar(dst=y, data=e, op0=nl.multiply, operand0=inv)
        nl.store(out[i * 128 : i * 128 + rows, :], y)
    return out


@jit
def rmsnorm_kernel(x, weight, eps: float = 1e-6):
    """``x * rsqrt(mean(x^2, -1) + eps) * weight`` for ``x`` [R, D], ``weight`` [D]; fused per 128-row tile."""
    R, D = x.shape
    out = nl.ndarray((R, D), dtype=x.dtype, buffer=nl.shared_hbm)
    w = nl.ndarray((128, D), dtype=weight.dtype)
    nisa.dma_copy(dst=w, src=weight.reshape((1, D)).broadcast(0, 128))  # one row, read by every partition
    for i in nl.affine_range(math.ceil(R / 128)):
        rows = min(128, R - i * 128)
        t = nl.load(x[i * 128 : i * 128 + rows, :])
        sq = nl.ndarray((rows, D), dtype=nl.float32)
        ss = nl.ndarray((rows, 1), dtype=nl.float32)
        nisa.activation(
            dst=sq, op=nl.square, data=t, reduce_op=nl.add, reduce_res=ss, reduce_cmd=nisa.reduce_cmd.reset_reduce
        )
        r = nl.ndarray((rows, 1), dtype=nl.float32)
        nisa.tensor_scalar(dst=r, data=ss, op0=nl.multiply, operand0=1.0 / D, op1=nl.add, operand1=eps)
        nisa.activation(dst=r, op=nl.rsqrt, data=r)
        y = nl.ndarray((rows, D), dtype=nl.float32)
        nisa.tensor_scalar(dst=y, data=t, op0=nl.multiply, operand0=r)
        res = nl.ndarray((rows, D), dtype=x.dtype)
        nisa.tensor_tensor(dst=res, data1=y, data2=w[0:rows, :], op=nl.multiply)
        nl.store(out[i * 128 : i * 128 + rows, :], res)
    return out


def _transposed(src, dtype):
    """An SBUF copy of ``src`` [P, F] transposed to [F, P] through TensorE and PSUM."""
    p, f = src.shape
    tp = nl.ndarray((f, p), dtype=src.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=tp, data=src)
    out = nl.ndarray((f, p), dtype=dtype)
    nisa.tensor_copy(dst=out, src=tp)
    return out


@jit
def flash_attention_kernel(q, k, v, causal: bool = False, scale: float | None = None):
    """One attention head ``softmax(q k^T * scale) v`` for [S, d] inputs (S % 128 == 0, d <= 128).

    Flash-style: 128-query x 128-key blocks, online softmax (running max and sum per query), the
    score matrix never leaves the chip. Causal blocks above the diagonal are skipped.
    """
    S, d = q.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    out = nl.ndarray((S, d), dtype=q.dtype, buffer=nl.shared_hbm)
    mask = None
    if causal:  # 0 on and below the diagonal, -inf above: (key - query > 0) * -inf via iota
        diff = nl.ndarray((128, 128), dtype=nl.float32)
        nisa.iota(dst=diff, pattern=[[1, 128]], offset=0, channel_multiplier=-1)
        mask = nl.ndarray((128, 128), dtype=nl.float32)
        nisa.tensor_scalar(dst=mask, data=diff, op0=nl.greater, operand0=0.0, op1=nl.multiply, operand1=-3.0e38)
    for i in nl.affine_range(S // 128):
        qT = _transposed(nl.load(q[i * 128 : (i + 1) * 128, :]), q.dtype)  # [d, 128 queries]
        m = nl.full((128, 1), -3.0e38, dtype=nl.float32)
        l_sum = nl.zeros((128, 1), dtype=nl.float32)
        acc = nl.zeros((128, d), dtype=nl.float32)
        for j in nl.sequential_range(i + 1 if causal else S // 128):
            kT = _transposed(nl.load(k[j * 128 : (j + 1) * 128, :]), k.dtype)  # [d, 128 keys]
            vj = nl.load(v[j * 128 : (j + 1) * 128, :])
            s_ps = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_ps, stationary=qT, moving=kT)
            s = nl.ndarray((128, 128), dtype=nl.float32)
            nisa.activation(dst=s, op=nl.copy, data=s_ps, scale=scale)
            if mask is not None and j == i:
                nisa.tensor_tensor(dst=s, data1=s, data2=mask, op=nl.add)
            m_new = nl.ndarray((128, 1), dtype=nl.float32)
            nisa.tensor_reduce(dst=m_new, op=nl.maximum, data=s, axis=1)
            nisa.tensor_tensor(dst=m_new, data1=m_new, data2=m, op=nl.maximum)
            neg = nl.ndarray((128, 1), dtype=nl.float32)
            nisa.tensor_scalar(dst=neg, data=m_new, op0=nl.multiply, operand0=-1.0)
            p = nl.ndarray((128, 128), dtype=q.dtype)
            rowsum = nl.ndarray((128, 1), dtype=nl.float32)
            nisa.activation(
                dst=p,
                op=nl.exp,
                data=s,
                bias=neg,
                reduce_op=nl.add,
                reduce_res=rowsum,
                reduce_cmd=nisa.reduce_cmd.reset_reduce,
            )
            corr = nl.ndarray((128, 1), dtype=nl.float32)
            nisa.activation(dst=corr, op=nl.exp, data=m, bias=neg)  # exp(m_old - m_new)
            nisa.tensor_scalar(dst=l_sum, data=l_sum, op0=nl.multiply, operand0=corr, op1=nl.add, operand1=0.0)
            nisa.tensor_tensor(dst=l_sum, data1=l_sum, data2=rowsum, op=nl.add)
            pT = _transposed(p, q.dtype)  # [128 keys, 128 queries]
            pv = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=pv, stationary=pT, moving=vj)
            nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=corr)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=pv, op=nl.add)
            m = m_new
        inv = nl.ndarray((128, 1), dtype=nl.float32)
        nisa.reciprocal(dst=inv, data=l_sum)
        o = nl.ndarray((128, d), dtype=q.dtype)
        nisa.tensor_scalar(dst=o, data=acc, op0=nl.multiply, operand0=inv)
        nl.store(out[i * 128 : (i + 1) * 128, :], o)
    return out
