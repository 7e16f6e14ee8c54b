"""The simulated ranks open nothing another user can reach: no socket on a public interface, no TCP store
anybody may write, no fixed file name in the shared temp directory, a bounded world size everywhere."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import psutil
import pytest

from trn_notebook.distributed import pool as rank_pool
from trn_notebook.distributed.launch import run_ranks
from trn_notebook.distributed.rendezvous import MAX_WORLD_SIZE, check_world_size
from trn_notebook.magics.ranks import ranks_magic

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
CELL = """
x = torch.ones(4, device="neuron") * (rank + 1)
dist.all_reduce(x)
print("sum", x.cpu().tolist())
"""


@pytest.fixture
def no_pool():
    rank_pool.shutdown()
    yield
    rank_pool.shutdown()


def _listening(pids: list[int]) -> list[tuple[int, str, int]]:
    found = []
    for pid in pids:
        for c in psutil.Process(pid).net_connections(kind="inet"):
            if c.status == psutil.CONN_LISTEN:
                found.append((pid, c.laddr.ip, c.laddr.port))
    return found


@pytest.mark.slow
def test_ranks_listen_on_loopback_only_use_a_private_store_and_no_fixed_temp_name(tmp_path, monkeypatch, no_pool):
    # Probe: another user plants <tmp>/trn_ranks_2_trace.json -> a file of ours; `%%trn ranks 2` (no --trace)
    # used to follow it and overwrite the target. While the ranks ran, torch's TCPStore listened on *:PORT.
    shared_tmp = tmp_path / "shared-tmp"
    shared_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared_tmp))
    victim = tmp_path / "precious.txt"
    victim.write_text("mine")
    (shared_tmp / "trn_ranks_2_trace.json").symlink_to(victim)

    frame = ranks_magic("ranks 2", CELL)

    assert victim.read_text() == "mine"  # the planted link was not followed
    trace = Path(frame.attrs["trace"])
    assert trace.is_file() and not trace.is_symlink()
    assert stat.S_IMODE(trace.parent.stat().st_mode) == 0o700  # a private mkdtemp directory
    assert trace.parent.parent == shared_tmp and trace.parent.name != "trn_ranks_2_trace.json"

    pool, _ = rank_pool.get_pool(2)
    sockets = _listening(pool.pids())
    assert sockets, "gloo's pair listeners should show up"
    public = [s for s in sockets if s[1] not in LOOPBACK]
    assert public == [], f"rank sockets on a non-loopback address: {public}"
    assert _listening([os.getpid()]) == []  # the notebook side listens on nothing (a socketpair per rank)
    store_dir = Path(pool._dir or "")
    assert stat.S_IMODE(store_dir.stat().st_mode) == 0o700
    pool.close()
    assert not store_dir.exists()  # the private directory goes with the pool


def test_world_size_is_bounded_in_every_entry_point(no_pool):
    # Probe: RankPool(64) / compare_ranks(world_size=64) through the API started 64 processes.
    from trn_notebook.distributed.compare import compare_ranks

    before = len(psutil.Process().children(recursive=True))
    for call in (
        lambda: rank_pool.RankPool(64),
        lambda: rank_pool.get_pool(MAX_WORLD_SIZE + 1),
        lambda: run_ranks(print, 64),
        lambda: compare_ranks(lambda: None, lambda b, s: None, world_size=64, global_batch=64),
    ):
        with pytest.raises(ValueError, match=f"between 1 and {MAX_WORLD_SIZE}"):
            call()
    assert len(psutil.Process().children(recursive=True)) == before
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError):
            check_world_size(bad)  # type: ignore[arg-type]
