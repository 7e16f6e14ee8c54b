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
from .traced import jit

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


@jit
def mamba_v1(delta, u, A, B, C):
    """The fused Mamba-v1 layer of the NKI tutorial (``mamba_v1``): per channel tile and state, exp(delta*A),
    delta*u*B, an associative scan, times C, accumulated over states. Shapes: delta/u ``[batch, channels, seq]``,
    A ``[channels, state]``, B/C ``[batch, state, seq]``.
    """
    batch, channels, seq_len = delta.shape
    _, state_size = A.shape
    output = nl.ndarray((batch, channels, seq_len), dtype=delta.dtype, buffer=nl.shared_hbm)
    for i_batch in nl.affine_range(batch):
        for i_tile in nl.affine_range(channels // 128):
            c0 = i_tile * 128
            accum = nl.zeros((128, seq_len), dtype=delta.dtype)
            for i_state in nl.affine_range(state_size):
                delta_i = nl.load(delta[i_batch, c0 : c0 + 128, :])
                A_i = nl.load(A[c0 : c0 + 128, i_state : i_state + 1])
                deltaA = nl.ndarray((128, seq_len), dtype=delta.dtype)
                nisa.activation(dst=deltaA, op=nl.exp, data=delta_i, scale=A_i)
                u_i = nl.load(u[i_batch, c0 : c0 + 128, :])
                B_i = nl.load(B[i_batch, i_state : i_state + 1, :])
                deltaU = nl.ndarray((128, seq_len), dtype=delta.dtype)
                nisa.tensor_tensor(dst=deltaU, data1=delta_i, data2=u_i, op=nl.multiply)
                deltaBu = nl.ndarray((128, seq_len), dtype=delta.dtype)
                nisa.tensor_tensor(
                    dst=deltaBu, data1=deltaU, data2=nl.broadcast_to(B_i, (128, seq_len)), op=nl.multiply
                )
                scan = nl.ndarray((128, seq_len), dtype=delta.dtype)
                nisa.tensor_tensor_scan(dst=scan, data0=deltaA, data1=deltaBu, initial=0.0, op0=nl.multiply, op1=nl.add)
                C_i = nl.load(C[i_batch, i_state : i_state + 1, :])
                scanC = nl.ndarray((128, seq_len), dtype=delta.dtype)
                nisa.tensor_tensor(dst=scanC, data1=scan, data2=nl.broadcast_to(C_i, (128, seq_len)), op=nl.multiply)
                nisa.tensor_tensor(dst=accum, data1=accum, data2=scanC, op=nl.add)
            nisa.dma_copy(dst=output[i_batch, c0 : c0 + 128, :], src=accum)
    return output


# Published: mamba_v1, FP32, batch 1, seq_len 512, state 16 (fused_mamba.rst L47, L76, L514, L548); the chip
# is not stated on the page.
MAMBA_V1_MS = {256: 0.17293, 4096: 2.34}
