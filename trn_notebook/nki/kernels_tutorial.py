"""The four matmul kernels of the NKI matrix-multiplication tutorial, written in this subset.

Same loop structure, tile sizes and data movement as the tutorial's kernels (SDK docs at commit
7c165a3e, ``nki/tutorials/matrix_multiplication.rst``), so their modeled times can be set beside
the latencies it publishes for ``[4096, 8192] @ [8192, 8192]`` BF16 on Trn1 (``docs/fidelity.md``).
Differences: block-of-tiles buffers put the partition dim first (``(128, blocks, free)``) because
this subset keeps the partition dim at dim 0; ``+=`` on tiles is spelled as the instruction it is.
"""

from __future__ import annotations

from . import isa as nisa
from . import language as nl
from .jit import jit

TM, TK, TN = 128, 128, 512


@jit
def matmul_tiled(lhsT, rhs):
    """Original tiled: both operand tiles are loaded inside the K loop."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            res_psum = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                lhsT_tile = nl.load(lhsT[k * TK : (k + 1) * TK, m * TM : (m + 1) * TM])
                rhs_tile = nl.load(rhs[k * TK : (k + 1) * TK, n * TN : (n + 1) * TN])
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile, accumulate=True)
            res_sb = nl.copy(res_psum, dtype=result.dtype)
            nl.store(result[m * TM : (m + 1) * TM, n * TN : (n + 1) * TN], res_sb)
    return result


@jit
def matmul_hoist_load(lhsT, rhs):
    """Optimization 1: the lhsT column block is loaded once per M tile, rhs once per (M, N) tile."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        lhsT_tiles = nl.ndarray((TK, K // TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // TK):
            nisa.dma_copy(dst=lhsT_tiles[:, k, :], src=lhsT[k * TK : (k + 1) * TK, m * TM : (m + 1) * TM])
        for n in nl.affine_range(N // TN):
            rhs_tiles = nl.ndarray((TK, K // TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // TK):
                nisa.dma_copy(dst=rhs_tiles[:, k, :], src=rhs[k * TK : (k + 1) * TK, n * TN : (n + 1) * TN])
            res_psum = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tiles[:, k, :], moving=rhs_tiles[:, k, :], accumulate=True)
            res_sb = nl.copy(res_psum, dtype=result.dtype)
            nl.store(result[m * TM : (m + 1) * TM, n * TN : (n + 1) * TN], res_sb)
    return result


@jit
def matmul_block_free(lhsT, rhs, tiles_m: int = 2, tiles_n: int = 2):
    """Optimization 2: blocks of 2 x 2 output tiles reuse each loaded operand tile twice."""
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // (TM * tiles_m)):
        lhsT_tiles = nl.ndarray((TK, tiles_m, K // TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
        for bm in nl.affine_range(tiles_m):
            for k in nl.affine_range(K // TK):
                col = (m * tiles_m + bm) * TM
                nisa.dma_copy(dst=lhsT_tiles[:, bm, k, :], src=lhsT[k * TK : (k + 1) * TK, col : col + TM])
        for n in nl.affine_range(N // (TN * tiles_n)):
            rhs_tiles = nl.ndarray((TK, tiles_n, K // TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
            for bn in nl.affine_range(tiles_n):
                for k in nl.affine_range(K // TK):
                    col = (n * tiles_n + bn) * TN
                    nisa.dma_copy(dst=rhs_tiles[:, bn, k, :], src=rhs[k * TK : (k + 1) * TK, col : col + TN])
            for bm in nl.affine_range(tiles_m):
                for bn in nl.affine_range(tiles_n):
                    res_psum = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // TK):
                        nisa.nc_matmul(
                            dst=res_psum,
                            stationary=lhsT_tiles[:, bm, k, :],
                            moving=rhs_tiles[:, bn, k, :],
                            accumulate=True,
                        )
                    res_sb = nl.copy(res_psum, dtype=result.dtype)
                    r, c = (m * tiles_m + bm) * TM, (n * tiles_n + bn) * TN
                    nl.store(result[r : r + TM, c : c + TN], res_sb)
    return result


@jit
def matmul_fully_optimized(lhsT, rhs, tiles_m: int = 16, tiles_n: int = 2, tiles_k: int = 8):
    """Optimization 3: blocks along M, N and K; partial sums accumulate in SBUF; wide stores."""
    K, M = lhsT.shape
    _, N = rhs.shape
    bm_size, bn_size, bk_size = TM * tiles_m, TN * tiles_n, TK * tiles_k
    nbm, nbn, nbk = M // bm_size, N // bn_size, K // bk_size
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for n in nl.affine_range(nbn):
        result_tiles = nl.zeros((TM, nbm, tiles_m, tiles_n, TN), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.sequential_range(nbk):
            rhs_tiles = nl.ndarray((TK, tiles_k, bn_size), dtype=rhs.dtype, buffer=nl.sbuf)
            for bk in nl.affine_range(tiles_k):
                row = (tiles_k * k + bk) * TK
                nisa.dma_copy(dst=rhs_tiles[:, bk, :], src=rhs[row : row + TK, bn_size * n : bn_size * (n + 1)])
            for m in nl.affine_range(nbm):
                lhsT_tiles = nl.ndarray((TK, tiles_k, bm_size), dtype=lhsT.dtype, buffer=nl.sbuf)
                for bk in nl.affine_range(tiles_k):
                    row = (tiles_k * k + bk) * TK
                    nisa.dma_copy(dst=lhsT_tiles[:, bk, :], src=lhsT[row : row + TK, bm_size * m : bm_size * (m + 1)])
                for bn in nl.affine_range(tiles_n):
                    for bm in nl.affine_range(tiles_m):
                        res_tile = nl.zeros((TM, TN), dtype=nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(tiles_k):
                            nisa.nc_matmul(
                                dst=res_tile,
                                stationary=lhsT_tiles[:, bk, bm * TM : (bm + 1) * TM],
                                moving=rhs_tiles[:, bk, bn * TN : (bn + 1) * TN],
                                accumulate=True,
                            )
                        acc = result_tiles[:, m, bm, bn, :]
                        nisa.tensor_tensor(dst=acc, data1=acc, data2=res_tile, op=nl.add)
        for m in nl.affine_range(nbm):
            for bm in nl.affine_range(tiles_m):
                packed = nl.ndarray((TM, bn_size), dtype=result_tiles.dtype, buffer=nl.sbuf)
                for bn in nl.affine_range(tiles_n):
                    nisa.tensor_copy(dst=packed[:, bn * TN : (bn + 1) * TN], src=result_tiles[:, m, bm, bn, :])
                r = (tiles_m * m + bm) * TM
                nl.store(result[r : r + TM, bn_size * n : bn_size * (n + 1)], packed)
    return result


TUTORIAL_KERNELS = {
    "Original Tiled": matmul_tiled,
    "Optimization 1": matmul_hoist_load,
    "Optimization 2": matmul_block_free,
    "Optimization 3": matmul_fully_optimized,
}
# Published latencies (ms) for [4096, 8192] @ [8192, 8192] BF16 on Trn1.32xlarge (one NeuronCore-v2),
# sdk@7c165a3e nki/tutorials/matrix_multiplication.rst L339-348.
TUTORIAL_MS = {"Original Tiled": 51.80, "Optimization 1": 42.96, "Optimization 2": 22.07, "Optimization 3": 6.97}
