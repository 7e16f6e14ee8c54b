"""A small kernel library written in the NKI subset, each checked against PyTorch in tests/nki.

``matmul_kernel(lhsT, rhs)`` (``lhsT`` is ``[K, M]``, as TensorE wants the contraction on the
partitions), ``softmax_kernel(x)`` (rows), ``rmsnorm_kernel(x, weight)`` and
``flash_attention_kernel(q, k, v)`` (one head, causal optional, online softmax).
"""

from __future__ import annotations

from . import isa as nisa
from . import language as nl
from .jit import jit


@jit
def matmul_kernel(lhsT, rhs, tile_m: int = 128, tile_k: int = 128, tile_n: int = 512):  # noqa: N803
    """``lhsT.T @ rhs`` tiled by 128 x 128 x 512, accumulating over K in one PSUM bank."""
    K, M = lhsT.shape
    K2, N = rhs.shape
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
