"""The ranks' gloo listeners live in a private network namespace: no process of the host can reach them
(gloo authenticates nothing). Where the system refuses one, the ranks run as before with one warning."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from trn_notebook.distributed import netns
from trn_notebook.distributed import pool as rank_pool

CELL = """
x = torch.ones(4, device="neuron") * (rank + 1)
dist.all_reduce(x)
print("sum", x.cpu().tolist())
"""
BOOT = Path(netns.__file__).with_name("_netns_boot.py")


@pytest.fixture
def no_pool():
    rank_pool.shutdown()
    yield
    rank_pool.shutdown()


def _socket_inodes(pid: int | str) -> set[str]:
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            found.add(link[8:-1])
    return found


def _tcp_table(pid: int | str) -> dict[str, tuple[int, str]]:
    """``{inode: (port, state)}`` of the TCP sockets in the network namespace of ``pid`` (as ``ss`` shows)."""
    rows = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            rows[cols[9]] = (int(cols[1].rsplit(":", 1)[1], 16), cols[3])
    return rows


def _gloo_listeners(pid: int) -> dict[str, int]:
    """``{inode: port}`` of the sockets ``pid`` listens on (state 0A), read from its own namespace's table."""
    mine = _socket_inodes(pid)
    return {ino: port for ino, (port, st) in _tcp_table(pid).items() if st == "0A" and ino in mine}


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="network namespaces are Linux-only")
def test_ranks_gloo_listeners_are_invisible_and_unreachable_from_the_host(monkeypatch, no_pool):
    # Probe: gloo's pair listeners were on the host's loopback, where another local user could connect and, with
    # bytes shaped like a pair's sequence number, fail a collective. Now the host's TCP table (what `ss` reads)
    # does not show them, a connection to their ports from the host reaches none of them, and the collectives agree.
    monkeypatch.setenv(netns.ENV, "on")  # a refusal is an error here: CI runs where user namespaces work
    pool, _ = rank_pool.get_pool(2)
    assert pool.netns is not None
    host_ns = os.readlink("/proc/self/ns/net")
    rank_ns = {os.readlink(f"/proc/{pid}/ns/net") for pid in pool.pids()}
    assert len(rank_ns) == 1 and host_ns not in rank_ns  # one namespace, shared by every rank, not ours

    listeners = {ino: port for pid in pool.pids() for ino, port in _gloo_listeners(pid).items()}
    assert listeners, "each rank's own table should show gloo's pair listeners"
    host = _tcp_table("self")
    assert set(listeners) & set(host) == set()  # not one of them is in the host's table

    host_listening = {port for port, st in host.values() if st == "0A"}
    refused = 0
    for port in sorted(set(listeners.values()) - host_listening):  # a host socket may have the same number
        with socket.socket() as s:
            try:
                s.connect(("127.0.0.1", port))
                s.sendall(struct.pack("<Q", 0) + struct.pack("<Q", 1))  # a pair's sequence number, as a stranger
            except ConnectionRefusedError:
                refused += 1
    assert refused == len(set(listeners.values()) - host_listening) > 0

    lines: list[str] = []
    result = pool.run(CELL, timeout_s=120, print_line=lines.append)
    expected = (torch.ones(4) * 1 + torch.ones(4) * 2).tolist()  # the all-reduce on CPU
    assert sorted(lines) == [f"[rank {r}] sum {expected}" for r in (0, 1)]
    assert [f["collectives"] for f in result.figures] == [1, 1]


@pytest.mark.slow
def test_off_runs_the_ranks_in_the_host_namespace_without_a_warning(monkeypatch, no_pool, recwarn):
    monkeypatch.setenv(netns.ENV, "off")
    pool, _ = rank_pool.get_pool(2)
    assert pool.netns is None
    assert {os.readlink(f"/proc/{pid}/ns/net") for pid in pool.pids()} == {os.readlink("/proc/self/ns/net")}
    lines: list[str] = []
    pool.run(CELL, timeout_s=120, print_line=lines.append)
    assert sorted(lines) == ["[rank 0] sum [3.0, 3.0, 3.0, 3.0]", "[rank 1] sum [3.0, 3.0, 3.0, 3.0]"]
    assert not [w for w in recwarn if issubclass(w.category, netns.RanksIsolationWarning)]


def test_a_bad_mode_is_refused_naming_the_variable(monkeypatch, no_pool):
    monkeypatch.setenv(netns.ENV, "maybe")
    with pytest.raises(ValueError, match=r"TRN_NOTEBOOK_RANKS_NETNS='maybe' is not one of auto, on, off"):
        rank_pool.RankPool(2)
    assert rank_pool._pools == {}


# Runs in a user namespace of its own whose limit of nested user namespaces is 0: a real refusal (ENOSPC),
# as on a system with unprivileged user namespaces off. The namespace is made before torch is imported
# (unshare needs a single-threaded process).
_REFUSED = textwrap.dedent(
    """
    import importlib.util, os, sys, warnings
    spec = importlib.util.spec_from_file_location("boot", sys.argv[1])
    boot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(boot)
    uid, gid = os.getuid(), os.getgid()
    boot._libc_call("unshare", boot.CLONE_NEWUSER)
    boot._write("/proc/self/setgroups", "deny")
    boot._write("/proc/self/uid_map", f"{uid} {uid} 1")
    boot._write("/proc/self/gid_map", f"{gid} {gid} 1")
    boot._write("/proc/sys/user/max_user_namespaces", "0")
    from trn_notebook.distributed import netns
    os.environ[netns.ENV] = "auto"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = netns.private_net(), netns.private_net()
    print("auto", first, second, len(caught), caught[0].category.__name__, caught[0].message)
    os.environ[netns.ENV] = "on"
    try:
        netns.private_net()
    except netns.RanksIsolationError as exc:
        print("on", type(exc).__name__, exc)
    """
)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="network namespaces are Linux-only")
def test_where_the_system_refuses_auto_warns_once_and_on_is_an_error():
    proc = subprocess.run(
        [sys.executable, "-c", _REFUSED, str(BOOT)], capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0 and "max_user_namespaces" in proc.stderr:
        pytest.skip(f"cannot make a user namespace to refuse in: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    auto, on = proc.stdout.strip().splitlines()
    assert auto.startswith("auto None None 1 RanksIsolationWarning")  # fallback, one warning for two pools
    assert "No space left on device" in auto and "another local user can connect" in auto
    assert "TRN_NOTEBOOK_RANKS_NETNS=off to silence" in auto
    assert on.startswith("on RanksIsolationError TRN_NOTEBOOK_RANKS_NETNS=on but this system refuses")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="network namespaces are Linux-only")
def test_the_namespace_descriptors_are_fresh_and_not_inherited_by_other_children(monkeypatch):
    # Probe: descriptors received over SCM_RIGHTS are inheritable: a program the notebook started while a pool
    # started (os.system, a fork) would have held the ranks' namespaces. Only the ranks get them (pass_fds).
    monkeypatch.setenv(netns.ENV, "on")
    made = netns.private_net()
    assert made is not None
    try:
        links = [os.readlink(f"/proc/self/fd/{fd}") for fd in made.fds]
        assert links[0].startswith("user:[") and links[1].startswith("net:[")
        assert links[1] != os.readlink("/proc/self/ns/net")
        assert [os.get_inheritable(fd) for fd in made.fds] == [False, False]
    finally:
        made.close()
    assert made.fds == ()
