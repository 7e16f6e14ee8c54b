"""Kernel indexing is bounded and an interrupted kernel leaves the simulator usable (issue 31's NKI probes)."""

from __future__ import annotations

import _thread
import threading
import time

import pytest
import torch

import trn_notebook.nki as nki
import trn_notebook.nki.language as nl


@nki.jit
def double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x) * 2.0)
    return out


def _index_kernel(index):
    @nki.jit
    def kernel(x):
        t = nl.load(x)
        out = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, index(t))
        return out

    return kernel


@pytest.mark.parametrize(
    ("index", "match"),
    [
        (lambda t: t[200], r"index 200 is out of range for dim 0 of size 128"),
        (lambda t: t[-129], r"index -129 is out of range for dim 0 of size 128"),
        (lambda t: t[0 : 4 : 2**62], r"slice step must be between 1 and the dim's size 128, got 4611686018427387904"),
        (lambda t: t[0, 0, 0], r"too many indices"),
    ],
    ids=["partition-200", "partition-neg", "huge-step", "too-many"],
)
def test_out_of_bounds_indexing_on_a_tile_is_refused(index, match):
    # Probes of issue 31: t[200] on a 128-partition SBUF tile gave an empty (0, 4) tile; a[0:4:2**62] a view
    # whose stride overflows int64. Both are refused naming the bound.
    with pytest.raises(nki.NkiError, match=match):
        _index_kernel(index)(torch.zeros(128, 4))
    torch.testing.assert_close(double(torch.ones(128, 4)), torch.full((128, 4), 2.0))


def test_in_range_indexing_still_works():
    x = torch.arange(512.0).reshape(128, 4)
    torch.testing.assert_close(_index_kernel(lambda t: t[127])(x), x[127:128])
    torch.testing.assert_close(_index_kernel(lambda t: t[-1])(x), x[127:128])
    torch.testing.assert_close(_index_kernel(lambda t: t[5:6, 0:4:1])(x), x[5:6])


def test_an_interrupted_endless_kernel_leaves_the_simulator_usable():
    # Issue 31: interrupting a `while True` kernel broke the simulator (IndexError on the next kernel).
    deadline = time.monotonic() + 30

    @nki.jit
    def spin(x):
        t = nl.load(x)
        while True:
            t = nl.add(t, 1.0)
            if time.monotonic() > deadline:
                raise RuntimeError("never interrupted")

    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            spin(torch.zeros(128, 4))
    finally:
        timer.cancel()
    torch.testing.assert_close(double(torch.ones(128, 4)), torch.full((128, 4), 2.0))
    assert double.last_report.instructions
