"""The host-memory guard sees the limit of the cgroup the process is in, and of each ancestor (v1 and v2).

Probe: 8 x 512 MiB on neuron inside a nested 1.5 GiB memory cgroup (a container without a cgroup
namespace, JupyterHub/systemd, Slurm) was OOM-killed after 1 GiB: the guard read only the root's files.
Creating a real cgroup needs privileges the test machine lacks, so each test builds the cgroup file
system as the kernel lays it out and points the guard at it.
"""

from __future__ import annotations

import os

import pytest
import torch

from trn_notebook.device.memory import hostmem
from trn_notebook.device.memory.runtime import allocator

MiB, GiB = 1 << 20, 1 << 30
UNLIMITED_V1 = "9223372036854771712"


def _cgroup(root, rel: str, limit_name: str, usage_name: str, limit, usage) -> None:
    d = root.joinpath(*[p for p in rel.split("/") if p])
    d.mkdir(parents=True, exist_ok=True)
    (d / limit_name).write_text(f"{limit}\n")
    (d / usage_name).write_text(f"{usage}\n")


@pytest.fixture
def v1(tmp_path):
    """cgroup v1: memory controller at <root>/memory, the process in /slurm/job_7/step_0 (1.5 GiB), its job at 2 GiB."""
    root = tmp_path / "sys-fs-cgroup"
    names = ("memory.limit_in_bytes", "memory.usage_in_bytes")
    _cgroup(root / "memory", "/", *names, UNLIMITED_V1, 30 * GiB)
    _cgroup(root / "memory", "/slurm", *names, UNLIMITED_V1, 3 * GiB)
    _cgroup(root / "memory", "/slurm/job_7", *names, 2 * GiB, 300 * MiB)
    _cgroup(root / "memory", "/slurm/job_7/step_0", *names, int(1.5 * GiB), 200 * MiB)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text("5:cpu,cpuacct:/slurm/job_7/step_0\n4:memory:/slurm/job_7/step_0\n0::/\n")
    return str(proc), str(root)


@pytest.fixture
def v2(tmp_path):
    """cgroup v2 (unified at <root>): the kernel in user.slice/.../jupyter.scope; the limit sits two levels up."""
    root = tmp_path / "sys-fs-cgroup"
    names = ("memory.max", "memory.current")
    (root).mkdir()
    _cgroup(root, "/user.slice", *names, "max", 5 * GiB)
    _cgroup(root, "/user.slice/user-1000.slice", *names, int(1.5 * GiB), GiB)
    _cgroup(root, "/user.slice/user-1000.slice/jupyter.scope", *names, "max", 900 * MiB)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text("0::/user.slice/user-1000.slice/jupyter.scope\n")
    return str(proc), str(root)


def _use(monkeypatch, files) -> None:
    monkeypatch.setattr(hostmem, "_files", (os.getpid(), hostmem.cgroup_files(*files)))


def test_v1_nested_cgroup_gives_the_tightest_headroom_on_the_way_up(monkeypatch, v1):
    _use(monkeypatch, v1)
    assert hostmem.cgroup_headroom() == int(1.5 * GiB) - 200 * MiB  # not the root's "unlimited"
    assert hostmem.available_bytes() <= int(1.5 * GiB) - 200 * MiB


def test_v2_limit_of_an_ancestor_counts(monkeypatch, v2):
    _use(monkeypatch, v2)
    assert hostmem.cgroup_headroom() == int(0.5 * GiB)


def test_a_cgroup_namespace_root_is_read_when_the_path_is_not_under_the_mount(tmp_path, monkeypatch):
    # Docker with cgroup v1 and no namespace: /proc/self/cgroup names /docker/<id>, the mount is that cgroup.
    root = tmp_path / "cg"
    _cgroup(root / "memory", "/", "memory.limit_in_bytes", "memory.usage_in_bytes", GiB, 100 * MiB)
    proc = tmp_path / "proc"
    proc.write_text("4:memory:/docker/abc123\n")
    _use(monkeypatch, (str(proc), str(root)))
    assert hostmem.cgroup_headroom() == GiB - 100 * MiB


def test_the_device_refuses_inside_a_nested_cgroup_instead_of_being_killed(fresh_device, monkeypatch, tmp_path, v1):
    # The nested cgroup's usage grows with what the device takes (as the kernel's counter would).
    _use(monkeypatch, v1)
    usage_file = os.path.join(v1[1], "memory", "slurm", "job_7", "step_0", "memory.usage_in_bytes")
    start = allocator.counters.active
    real_read_int = hostmem._read_int

    def read_int(path):
        if path == usage_file:
            return 200 * MiB + (allocator.counters.active - start)
        return real_read_int(path)

    monkeypatch.setattr(hostmem, "_read_int", read_int)
    monkeypatch.setattr(hostmem.guard, "probe", hostmem.cgroup_headroom)
    monkeypatch.setattr(hostmem.guard, "_at", -1.0)
    kept = []
    with pytest.raises(torch.OutOfMemoryError, match="host memory backing the simulator"):
        for _ in range(8):
            kept.append(torch.empty(512 * MiB // 4, device="neuron"))
    assert len(kept) == 1  # 1.5 GiB - 200 MiB used - 512 MiB reserve holds one 512 MiB tensor
    del kept
    assert torch.ones(3, device="neuron").sum().item() == 3.0
