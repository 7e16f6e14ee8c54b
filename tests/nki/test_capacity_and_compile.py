"""Issue 28 item 7: on-chip capacity is checked at allocation; ``@nki.jit`` kernels run inside torch.compile."""

from __future__ import annotations

import pytest
import torch

import trn_notebook
import trn_notebook.nki as nki
import trn_notebook.nki.language as nl
from trn_notebook.nki.kernels import rmsnorm_kernel, softmax_kernel


@nki.jit
def _unused_huge_tile(x):
    nl.ndarray((128, 4_000_000), dtype=nl.float32, buffer=nl.sbuf)  # 16 MB per partition, never written
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))
    return out


def test_sbuf_tile_over_capacity_fails_at_allocation_with_figures():
    figures = r"asks 16,000,000 B \(15625.0 KiB\) per partition.*holds 229,376 B on NeuronCore-v3 \(Trn2\).*224 KiB"
    with pytest.raises(nki.NkiCapacityError, match=r"SBUF capacity exceeded at allocation: .*" + figures) as err:
        _unused_huge_tile(torch.ones(128, 4))
    assert "trainium-figures.md" in str(err.value) and "57,344 elements" in str(err.value)
    assert "test_capacity_and_compile.py" in str(err.value)  # names the kernel line
    with pytest.raises(nki.NkiCapacityError, match="SBUF capacity exceeded"):  # shape-only runs check it too
        nki.estimate(_unused_huge_tile, ((128, 4), torch.float32))
    ok = nki.jit(softmax_kernel)(torch.zeros(128, 8))  # the session stays usable
    torch.testing.assert_close(ok, torch.full((128, 8), 1 / 8))


def test_psum_tile_over_capacity_fails_at_allocation():
    @nki.jit
    def big_accumulator(x):
        nl.zeros((128, 8192), dtype=nl.float32, buffer=nl.psum)  # 32 KiB per partition; PSUM has 16 KiB
        return x

    with pytest.raises(nki.NkiCapacityError, match=r"PSUM capacity exceeded.*32,768 B.*16,384 B.*8 banks x 2048 B"):
        big_accumulator(torch.ones(1))


@pytest.mark.slow  # the first (cold) compile of the process: ~4 s
def test_jit_kernel_inside_compile_is_one_kernel_call(fresh_compiler):
    softmax = nki.jit(softmax_kernel)

    def f(x):
        return softmax(x * 2) + 1

    x = torch.randn(128, 64)
    compiled = torch.compile(f, fullgraph=True, backend="neuron")
    got = compiled(x.to("neuron"))
    torch.testing.assert_close(got.cpu(), torch.softmax(x * 2, -1) + 1, rtol=1e-5, atol=1e-5)
    stages = trn_notebook.explain(compiled).stages
    nki_rows = [line for line in stages["schedule"].splitlines() if " NKI " in line]
    assert len(nki_rows) == 1 and nki_rows[0].rstrip().endswith("kernel_call"), stages["schedule"]
    assert "kernel_call('trn_nki_jit::softmax_kernel_" in stages["ir"]
    torch.testing.assert_close(softmax(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-5)  # eager call unchanged


def test_jit_kernel_inside_compile_takes_keywords_and_scalars(fresh_compiler):
    rmsnorm = nki.jit(rmsnorm_kernel)

    @nki.jit
    def scaled(x, factor):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(x), factor))
        return out

    x, w = torch.randn(128, 64), torch.rand(64) + 0.5
    f = torch.compile(lambda a, b: scaled(rmsnorm(a, b, eps=1e-3), 3.0), fullgraph=True, backend="neuron")
    got = f(x.to("neuron"), w.to("neuron"))
    want = torch.nn.functional.rms_norm(x, (64,), w, eps=1e-3) * 3.0
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    # inputs that require grad: no gradient through the kernel, as in eager (nki_op(reference=...) gives one)
    xg = x.to("neuron").requires_grad_()
    assert not f(xg, w.to("neuron")).requires_grad and not scaled(xg, 3.0).requires_grad


def test_grid_chosen_inside_compile_names_nki_op(fresh_compiler):
    softmax = nki.jit(softmax_kernel)
    f = torch.compile(lambda x: softmax[2](x), fullgraph=True, backend="neuron")
    with pytest.raises(Exception, match=r"launch grid was chosen inside the compiled code.*trn_notebook\.nki_op"):
        f(torch.randn(128, 8).to("neuron"))
    softmax2 = softmax[2]  # chosen outside: works
    g = torch.compile(lambda x: softmax2(x), fullgraph=True, backend="neuron")
    x = torch.randn(128, 8)
    torch.testing.assert_close(g(x.to("neuron")).cpu(), torch.softmax(x, -1), rtol=1e-5, atol=1e-5)


def test_simulate_keeps_a_kernels_launch_grid_and_gives_the_compile_aware_kernel():
    from trn_notebook.nki.jit import Kernel
    from trn_notebook.nki.traced import JitKernel

    def fn(x):  # never run: only the wrapping is checked
        return x

    k = nki.simulate(Kernel(fn, (4,)))
    assert isinstance(k, JitKernel) and k.grid == (4,) and k.fn is fn
    j = nki.jit(fn)
    assert nki.simulate(j) is j and isinstance(j[2], JitKernel) and j[2].grid == (2,)
