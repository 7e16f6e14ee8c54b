"""A kernel's HBM tensors are checked where they are allocated: against the device's free HBM and the host
memory backing the simulator. Probe (high): a 4 GiB ``nl.shared_hbm`` output in a 2 GiB memory limit was
allocated for real and the kernel process was OOM-killed."""

from __future__ import annotations

import os

import pytest
import torch

from trn_notebook import nki
from trn_notebook.device.memory import hostmem, runtime
from trn_notebook.nki import language as nl

MiB, GiB = 1 << 20, 1 << 30


@nki.jit
def _huge_output(x):
    out = nl.ndarray((1 << 20, 1024), dtype=nl.float32, buffer=nl.shared_hbm)  # 4 GiB
    nl.store(out[0:128, 0:4], nl.load(x))
    return out


@nki.jit
def _copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))
    return out


def _cgroup_v2(root, limit: int, usage: int) -> str:
    """A cgroup v2 tree as the kernel lays it out, the process in /user.slice/jupyter.scope; returns proc file."""
    scope = root / "user.slice" / "jupyter.scope"
    scope.mkdir(parents=True)
    (root / "memory.max").write_text("max\n")
    (root / "memory.current").write_text(f"{usage}\n")
    (scope / "memory.max").write_text(f"{limit}\n")
    (scope / "memory.current").write_text(f"{usage}\n")
    proc = root.parent / "proc-self-cgroup"
    proc.write_text("0::/user.slice/jupyter.scope\n")
    return str(proc)


def test_an_hbm_output_beyond_the_host_limit_is_refused_before_it_is_allocated(monkeypatch, tmp_path):
    root = tmp_path / "cg"
    proc = _cgroup_v2(root, 2 * GiB, 600 * MiB)  # a 2 GiB limit, 600 MiB used by the notebook
    monkeypatch.setattr(hostmem, "_files", (os.getpid(), hostmem.cgroup_files(proc, str(root))))
    monkeypatch.setattr(hostmem.guard, "probe", hostmem.cgroup_headroom)
    monkeypatch.setattr(hostmem.guard, "_at", -1.0)
    with pytest.raises(nki.NkiCapacityError, match=r"host memory exceeded at allocation: HBM tensor .*asks 4\.00 GiB"):
        _huge_output(torch.ones(128, 4))
    x = torch.randn(128, 8)
    torch.testing.assert_close(_copy(x), x)  # the session goes on


def test_an_hbm_output_beyond_the_device_capacity_is_refused_with_figures():
    before = runtime.allocator.capacity
    runtime.set_memory_capacity(1 * GiB)
    try:
        with pytest.raises(nki.NkiCapacityError, match=r"HBM capacity exceeded at allocation: .*free of 1\.00 GiB"):
            _huge_output(torch.ones(128, 4))
        with pytest.raises(nki.NkiCapacityError, match="HBM capacity exceeded"):
            nki.estimate(_huge_output, ((128, 4), torch.float32))  # shapes only: the device rule still holds
    finally:
        runtime.set_memory_capacity(before)
    report = nki.estimate(_huge_output, ((128, 4), torch.float32))
    assert report.modeled_s > 0
