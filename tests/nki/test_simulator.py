"""The simulator enforces the hardware's rules, each error naming the kernel line (footguns catalogue).

- a tile with more than 128 partitions;
- more live SBUF bytes per partition than the chip has (224 KiB on Trn2), PSUM beyond 8 banks;
- TensorE operands in the wrong buffer or dtype, moving free size beyond one PSUM bank;
- reading memory nobody wrote (NaN sentinel) and returning an output never stored.
"""

from __future__ import annotations

import pytest
import torch

import trn_notebook.nki as nki
import trn_notebook.nki.isa as nisa
import trn_notebook.nki.language as nl
from trn_notebook.nki.kernels import matmul_kernel


def test_tiled_matmul_matches_torch():
    torch.manual_seed(0)
    a, b = torch.randn(256, 384), torch.randn(384, 512)
    out = matmul_kernel(a.T.contiguous(), b)
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
    rep = matmul_kernel.last_report
    assert rep.instructions["TensorE"] == 2 * 3  # M/128 x K/128 tiles, one N tile of 512
    assert rep.modeled_s > 0 and 0 < rep.utilisation["TensorE"] <= 1


def test_partition_limit_names_the_kernel_line():
    @nki.jit
    def too_tall(x):
        t = nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)  # the offending line
        return t

    with pytest.raises(
        nki.NkiError, match=r"partition dimension 256 exceeds 128[\s\S]*test_simulator.py:\d+: t = nl.ndarray"
    ):
        too_tall(torch.zeros(1))


def test_sbuf_overflow_gives_figures():
    @nki.jit
    def hog(x):
        keep = [nl.zeros((128, 16 * 1024), dtype=nl.float32) for _ in range(4)]  # 256 KiB/partition
        return keep

    with pytest.raises(nki.NkiCapacityError, match=r"SBUF overflow.*64.0 KiB per partition.*192.0 KiB of the 224 KiB"):
        hog(torch.zeros(1))


def test_tiles_that_die_free_their_sbuf():
    @nki.jit
    def loop(x):
        out = nl.ndarray((128, 16 * 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        for _ in range(8):  # each iteration's 64 KiB tile is released when `t` is rebound
            t = nl.zeros((128, 16 * 1024), dtype=nl.float32)
        nl.store(out, t)
        return out

    assert float(loop(torch.zeros(1)).sum()) == 0.0
    assert loop.last_report.sbuf_peak_bytes == 2 * 64 * 1024


def test_psum_has_eight_banks():
    @nki.jit
    def banks(x):
        return [nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]

    with pytest.raises(nki.NkiCapacityError, match="8 PSUM banks"):
        banks(torch.zeros(1))


def test_matmul_rules():
    @nki.jit
    def bad(x, dst_buffer, moving_n, dtype):
        a = nl.zeros((128, 128), dtype=dtype)
        b = nl.zeros((128, moving_n), dtype=dtype)
        d = nl.ndarray((128, moving_n), dtype=nl.float32, buffer=dst_buffer)
        nisa.nc_matmul(dst=d, stationary=a, moving=b)

    with pytest.raises(nki.NkiError, match="dst must be in PSUM"):
        bad(torch.zeros(1), nl.sbuf, 128, nl.float32)
    with pytest.raises(nki.NkiError, match="moving free size 1024 exceeds 512"):
        bad(torch.zeros(1), nl.psum, 1024, nl.float32)
    with pytest.raises(nki.NkiError, match="TensorE takes"):
        bad(torch.zeros(1), nl.psum, 128, nl.int32)


def test_uninitialised_memory_reads_as_nan():
    @nki.jit
    def forgot(x):
        t = nl.ndarray((4, 4), dtype=nl.float32)
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.add(t, 1.0))
        return out

    with pytest.warns(nki.UninitializedOutputWarning, match="100.0%"):
        got = forgot(torch.zeros(1))
    assert torch.isnan(got).all()


def test_psum_accumulation_groups_restart_after_a_read():
    @nki.jit
    def twice(a, b):
        out = nl.ndarray((2, 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
        sa, sb = nl.load(a), nl.load(b)
        for i in range(2):
            nisa.nc_matmul(dst=acc, stationary=sa, moving=sb)
            nisa.nc_matmul(dst=acc, stationary=sa, moving=sb)  # accumulates
            nl.store(out[i], nl.copy(acc))  # the read closes the group: the next matmul overwrites
        return out

    a, b = torch.randn(128, 128), torch.randn(128, 128)
    got = twice(a, b)
    torch.testing.assert_close(got[0], 2 * a.T @ b, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(got[1], got[0])


def test_estimate_checks_rules_without_computing():
    rep = nki.estimate(matmul_kernel, ((1024, 1024), torch.bfloat16), ((1024, 2048), torch.bfloat16))
    assert rep.instructions["TensorE"] == 8 * 8 * 4
    assert rep.flops == 2 * 1024**2 * 2048


def test_grid_programs_share_outputs():
    @nki.jit
    def rows(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        t = nl.load(x[i * 128 : (i + 1) * 128, :])
        nl.store(out[i * 128 : (i + 1) * 128, :], nl.multiply(t, 2.0))
        return out

    x = torch.randn(384, 64)
    torch.testing.assert_close(rows[3](x), 2 * x)
    assert rows.last_report.programs == 3


def test_outside_a_kernel_is_a_clear_error():
    with pytest.raises(nki.NkiError, match="run only inside a kernel"):
        nl.ndarray((4, 4), dtype=nl.float32)
