"""Bad input: a raising rank, a hung collective, a gloo-only group, neuron:1 — clear errors, nothing left running."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from trn_notebook.distributed.launch import RankError, run_ranks

from . import workers


def _children() -> list[str]:
    """Command lines of this process's children (any worker left behind shows up here).

    Python's multiprocessing ``resource_tracker`` (one per parent, exits with it) is not a worker.
    """
    me, out = os.getpid(), []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if "resource_tracker" not in cmd:
                    out.append(cmd)
    return out


def _line_of(marker: str) -> int:
    lines = Path(workers.__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line)


@pytest.mark.slow
def test_a_hung_collective_times_out_with_a_clear_message_and_no_zombie():
    with pytest.raises(RankError) as info:
        run_ranks(workers.hangs_on_rank_1, 2, timeout_s=120, collective_timeout_s=3)
    assert info.value.rank == 0
    assert info.value.location.endswith(f"workers.py:{_line_of('HANG-LINE')}")  # the rank and its line
    assert "other ranks were stopped" in str(info.value)
    assert "timed out" in str(info.value).lower() and "a peer never joined" in str(info.value)
    assert f"rank 1 was at workers.py:{_line_of('STUCK-LINE')} in hangs_on_rank_1" in str(info.value)  # the peer
    assert _children() == []


@pytest.mark.slow
def test_a_rank_that_crashes_names_its_line_and_gives_its_stacks():
    # A rank died of SIGSEGV once in a suite run (test_fsdp2_full_tensor_many_times_never_hangs) and said only
    # "terminated with signal SIGSEGV": faulthandler now writes the crash's stacks, and the error carries them.
    with pytest.raises(RankError) as info:
        run_ranks(workers.crashes_on_rank_1, 2, timeout_s=120, collective_timeout_s=30)
    text = str(info.value)
    assert info.value.rank == 1 and "SIGSEGV" in text and "Fatal Python error: Segmentation fault" in text, text
    assert f"it crashed at workers.py:{_line_of('CRASH-LINE')} in crashes_on_rank_1" in text, text
    assert _children() == []


def test_a_rank_that_dies_before_connecting_fails_the_pool_at_once(tmp_path, monkeypatch):
    # A broken install seen by the ranks only: their `python -m trn_notebook.distributed._rank_worker` dies at
    # import. The pool used to wait the whole start timeout (300 s) for a connection that never came.
    from trn_notebook.distributed.pool import RankPool

    broken = tmp_path / "trn_notebook"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('broken install (test)')\n")
    monkeypatch.chdir(tmp_path)  # `python -m` puts the working directory first on the ranks' path
    start = time.monotonic()
    with pytest.raises(RankError, match=r"exited \(code 1\) before it connected"):
        RankPool(2, start_timeout_s=120)
    assert time.monotonic() - start < 60
    assert _children() == []


def test_invalid_world_size_is_refused():
    with pytest.raises(ValueError, match="world_size"):
        run_ranks(workers.collectives, 0)


@pytest.fixture
def gloo_only_group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_neuron_tensors_on_a_gloo_only_group_get_a_clear_error(gloo_only_group):
    with pytest.raises(RuntimeError, match="init_process_group\\('neuron'\\)"):
        dist.all_reduce(torch.ones(2, device="neuron"))
    t = torch.ones(2)
    dist.all_reduce(t)  # the session stays usable
    assert t.tolist() == [1.0, 1.0]


def test_second_device_in_one_process_is_refused_with_the_torchrun_hint():
    with pytest.raises(RuntimeError, match="torchrun"):
        torch.ones(2, device="neuron:1")
    with pytest.raises(RuntimeError, match="torchrun"):
        torch.neuron.set_device(1)
