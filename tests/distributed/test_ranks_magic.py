"""``%%trn ranks N``: streamed per-rank output, a per-rank DataFrame, one merged trace, warm re-runs,
and workers always stopped — on a raising rank, on KeyboardInterrupt and when the kernel dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from trn_notebook.distributed import pool as rank_pool
from trn_notebook.distributed.launch import RankError
from trn_notebook.magics.ranks import ranks_magic

CELL = """
x = torch.ones(4, device="neuron") * (rank + 1)
dist.all_reduce(x)
print("sum", x.cpu().tolist())
"""

OWN_PLACEMENT = """
from trn_notebook.facts.simulator import placement_of
from trn_notebook.device.placement import placement_log
mark = placement_log.snapshot()
m = torch.ones(4, 4, device="neuron")
v = m.view(16)[2:].unsqueeze(0).t()
inv = torch.linalg.inv(torch.eye(3, device="neuron"))
calls = placement_of(placement_log.snapshot().since(mark)).calls_by_category
own_native, own_fallback, own_host = calls["native"], calls["cpu_fallback"], calls.get("host_only", 0)
"""


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def no_pool():
    rank_pool.shutdown()
    yield
    rank_pool.shutdown()


@pytest.mark.slow
def test_cell_on_two_ranks_streams_output_returns_frame_and_trace_then_interrupt_stops_workers(
    no_pool, tmp_path, capsys
):
    trace = tmp_path / "ranks.json"
    frame = ranks_magic(f"ranks 2 --trace {trace}", CELL)
    out = capsys.readouterr().out
    assert "[rank 0] sum [3.0, 3.0, 3.0, 3.0]" in out and "[rank 1] sum [3.0, 3.0, 3.0, 3.0]" in out
    assert list(frame.index) == [0, 1] and set(frame["device"]) == {"neuron:0"}
    assert (frame["native_calls"] > 0).all()  # placement per rank
    assert (frame["collectives"] == 1).all() and (frame["comm_s"] > 0).all() and (frame["peak_memory_bytes"] > 0).all()
    assert frame.attrs["cold_start"] is True
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["pid"] for e in events if e.get("cat") == "comm"} == {0, 1}  # both ranks' collectives, one file
    pool, _ = rank_pool.get_pool(2)
    pids = pool.pids()

    warm = ranks_magic("ranks 2", "print(rank, x.sum().item())")  # the namespace persists between cells
    assert warm.attrs["cold_start"] is False and pool.pids() == pids
    assert "[rank 1] 1 12.0" in capsys.readouterr().out

    # the per-rank placement columns are the rank's own log aggregated the project's one way (placement_of):
    # view ops (host_only) are neither native calls nor CPU fallbacks
    own = ranks_magic("ranks 2 --collect own_native,own_fallback,own_host", OWN_PLACEMENT)
    assert (own["own_host"] > 0).all() and (own["own_fallback"] >= 1).all()
    assert own["fallback_calls"].tolist() == own["own_fallback"].tolist()
    assert own["native_calls"].tolist() == own["own_native"].tolist()

    stop = threading.Event()

    def interrupt() -> None:  # pressed again until it lands (one can be swallowed inside a finalizer under load)
        while not stop.wait(1.5):
            os.kill(os.getpid(), signal.SIGINT)

    # As in a kernel, an interrupt raises KeyboardInterrupt (an earlier test may have left another handler).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    presser = threading.Thread(target=interrupt, daemon=True)
    presser.start()
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            ranks_magic("ranks 2", "import time\ntime.sleep(60)")
    finally:
        stop.set()
        presser.join()
        signal.signal(signal.SIGINT, previous)
    # Repeated presses must not restart the polite wait each time: the ranks stop long before their cell's 60 s
    # would have run out on its own (they used to live until it did).
    assert time.monotonic() - started < 45
    assert not any(_alive(p) for p in pids)
    assert rank_pool._pools == {}


@pytest.mark.slow
def test_a_raising_rank_names_rank_and_cell_line_and_stops_every_worker(no_pool):
    cell = "x = 1\nif rank == 1:\n    raise ValueError('bad on purpose')\ndist.barrier()\n"
    pool, _ = rank_pool.get_pool(2)
    pids = pool.pids()
    with pytest.raises(RankError, match=r"rank 1 failed at cell line 4: ValueError: bad on purpose") as info:
        ranks_magic("ranks 2", cell)
    assert info.value.rank == 1
    assert not any(_alive(p) for p in pids)


@pytest.mark.slow
def test_workers_die_with_a_killed_kernel(tmp_path):
    script = tmp_path / "kernel.py"
    script.write_text(
        "from trn_notebook.distributed import pool\n"
        "p, _ = pool.get_pool(2)\n"
        "print(*p.pids(), flush=True)\n"
        "import time\n"
        "time.sleep(120)\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    kernel = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = kernel.stdout.readline()  # type: ignore[union-attr]
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        kernel.kill()  # what a kernel restart does in the end
        kernel.wait()
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(p) for p in pids)
    finally:
        kernel.kill()
        kernel.wait()


@pytest.mark.slow
def test_a_rank_started_just_before_the_kernel_died_does_not_outlive_it(tmp_path):
    # Probe: the kernel killed after it started rank 0 and before rank 1 (here: held at that point). Rank 0 asked
    # for PR_SET_PDEATHSIG only after importing torch, by then the kernel was gone, so it joined the group and
    # waited for rank 1 until the collective timeout (69 s at the default 60 s; here 300 s) before dying.
    script = tmp_path / "kernel.py"
    script.write_text(
        "import subprocess, time\n"
        "from trn_notebook.distributed import pool\n"
        "real = subprocess.Popen\n"
        "def first_then_hold(*args, **kwargs):\n"
        "    print(real(*args, **kwargs).pid, flush=True)\n"
        "    time.sleep(300)  # killed here, between starting rank 0 and rank 1\n"
        "pool.subprocess.Popen = first_then_hold\n"
        "pool.get_pool(2, collective_timeout_s=300)\n"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    kernel = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    pid = 0
    try:
        pid = int(kernel.stdout.readline())  # type: ignore[union-attr]
        kernel.kill()
        kernel.wait()
        deadline = time.monotonic() + 90  # its own start-up (importing torch) under load, far below 300 s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pid), "rank 0 outlived the kernel that started it"
    finally:
        kernel.kill()
        kernel.wait()
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_bad_arguments_are_usage_errors():
    for line in ("ranks", "ranks two", "ranks 0", "ranks 99", "ranks 2 --timeout -1", "ranks 2 --bogus"):
        with pytest.raises(UsageError, match="correct form"):
            ranks_magic(line, "pass")
    with pytest.raises(UsageError, match="cell magic"):
        ranks_magic("ranks 2", None)


@pytest.mark.slow
def test_an_interrupted_ranks_cell_shows_one_short_message_not_the_pool_traceback(no_pool, capsys):
    """Issue 30: interrupting ``%%trn ranks`` printed ~40 lines of library traceback (the ranks did stop)."""
    from IPython.testing import globalipapp

    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "trn_notebook")
    stop = threading.Event()

    def interrupt() -> None:  # pressed until it lands, as in the test above
        while not stop.wait(1.5):
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    presser = threading.Thread(target=interrupt, daemon=True)
    presser.start()
    try:
        result = shell.run_cell("%%trn ranks 2\nimport time\ntime.sleep(60)\n")
    finally:
        stop.set()
        presser.join()
        signal.signal(signal.SIGINT, previous)
    captured = capsys.readouterr()
    shown = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert isinstance(result.error_in_exec, KeyboardInterrupt)  # Run All still stops at the interrupted cell
    assert len(shown) <= 3, shown
    assert any("interrupted; all 2 ranks were stopped" in line for line in shown), shown
    assert not any("pool.py" in line or "Traceback" in line for line in shown), shown
    assert rank_pool._pools == {}
