"""NKI kernels stay in user namespaces: ``nki_op`` may not replace or join PyTorch's own operators."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.nki import language as nl
from trn_notebook.nki.bridge import nki_op


def _double(x):
    return nl.multiply(nl.load(x), 2.0)


@pytest.mark.parametrize("name", ["aten::add", "aten::my_new_op", "prims::mul", "c10d::allreduce_", "_x::y"])
def test_a_kernel_may_not_register_into_pytorchs_namespaces(name):
    # Probe: nki_op("aten::add") registered: a kernel replaced an ATen op for the whole process.
    before = torch.add(torch.ones(2), torch.ones(2))
    with pytest.raises(ValueError, match="namespace|namespace::op_name"):
        nki_op(name)(_double)
    torch.testing.assert_close(torch.add(torch.ones(2), torch.ones(2)), before)
    assert not hasattr(torch.ops.aten, "my_new_op")


@pytest.mark.parametrize(
    ("name", "error"), [("add", ValueError), ("::add", ValueError), ("my lib::add", ValueError), (3, TypeError)]
)
def test_a_malformed_name_says_the_form(name, error):
    with pytest.raises(error, match="namespace::op_name"):  # a name that is not a string is a TypeError
        nki_op(name)(_double)  # type: ignore[arg-type]


def test_a_tile_larger_than_sbuf_is_refused_before_it_is_allocated():
    # Probe: a kernel allocating a 4 GiB SBUF tile (SBUF is 24 MiB) made the simulator ask the host for 4 GiB
    # (and fill it) before the capacity check.
    import resource

    import trn_notebook.nki as nki

    @nki.jit
    def hog(x):
        t = nl.ndarray((128, 8 * 1024 * 1024), dtype=nl.float32, buffer=nl.sbuf)  # 32 MiB per partition
        return t

    @nki.jit
    def psum_hog(x):
        return nl.ndarray((128, 1 << 20), dtype=nl.float32, buffer=nl.psum)

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    with pytest.raises(
        nki.NkiCapacityError, match=r"SBUF capacity exceeded at allocation.*32768.0 KiB\) per partition.*229,376 B"
    ):
        hog(torch.zeros(1))
    with pytest.raises(nki.NkiCapacityError, match="PSUM capacity exceeded at allocation"):
        psum_hog(torch.zeros(1))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 256 * 1024  # no 4 GiB were touched

    @nki.jit
    def fine(x):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.zeros((128, 4), dtype=nl.float32))
        return out

    assert float(fine(torch.zeros(1)).sum()) == 0.0  # the simulator goes on
