"""A warm pool of N spawned ranks that run notebook cells (the library behind ``%%trn ranks N``).

Each worker is a spawned process (never forked) that joins ``init_process_group("neuron")`` once,
keeps its own namespace between cells (``rank``, ``world_size``, ``torch``, ``dist`` predefined) and
for each cell streams its output back line by line, then reports per-rank figures and its slice of
the timeline. Workers never outlive the notebook: any error, ``KeyboardInterrupt`` or timeout tears
the pool down (SIGTERM, then SIGKILL, then reaped), an ``atexit`` hook does so at interpreter exit,
and each worker asks the kernel to kill it if its parent dies (``PR_SET_PDEATHSIG``; it exits at once if
the parent died before it could ask) and exits when its pipe closes. What a worker starts goes with the pool
(:mod:`.reaper`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from .. import envvars
from .. import state as _state
from ..device.trace.lanes import thread_names
from .launch import RankError, RanksTimeout
from .netns import PrivateNet, private_net
from .reaper import die_with_parent, kill_descendants, kill_group
from .rendezvous import check_world_size, join_group, loopback_env, private_dir, store_path

CELL_FILE = "<%%trn ranks cell>"
_WORKER = "trn_notebook.distributed._rank_worker"


class _Stream:
    """``sys.stdout`` of a worker: whole lines go to the parent as ``("lines", rank, [text, ...])``.

    Linear in what is written: the unfinished line is kept as a list of parts (``print(x, end=" ")`` 200,000
    times took 91 s when each write copied the whole partial line), and one message carries every line
    finished by one write.
    """

    def __init__(self, conn: Connection, rank: int) -> None:
        self.conn, self.rank, self.parts = conn, rank, list[str]()

    @property
    def buf(self) -> str:
        """The unfinished last line."""
        return "".join(self.parts)

    def write(self, text: str) -> int:
        if "\n" not in text:
            if text:
                self.parts.append(text)
            return len(text)
        lines = text.split("\n")
        if self.parts:
            lines[0] = "".join(self.parts) + lines[0]
        last = lines.pop()
        self.parts = [last] if last else []
        self.conn.send(("lines", self.rank, lines))
        return len(text)

    def flush(self) -> None:
        if self.parts:
            self.conn.send(("out", self.rank, "".join(self.parts)))
            self.parts = []

    def isatty(self) -> bool:
        return False


def _figures(before: Any, placed_before: Any, t0_s: float, wall_s: float, rank: int) -> dict[str, Any]:
    import torch

    from ..device.clocks import clocks
    from ..device.placement import placement_log
    from ..facts.simulator import placement_of
    from .ledger import comm_log, exposed_comm

    # the project's one aggregation: host-only view ops are neither native calls nor CPU fallbacks
    calls = placement_of(placement_log.snapshot().since(placed_before)).calls_by_category

    after = clocks.snapshot()
    comm_s, exposed_s = exposed_comm(t0_s)
    recs = [r for r in comm_log.snapshot() if r["start_s"] + r["modeled_s"] > t0_s]
    return {
        "rank": rank,
        "device": f"neuron:{torch.neuron.current_device()}",
        "native_calls": calls.get("native", 0),
        "fallback_calls": calls.get("cpu_fallback", 0),
        "pid": os.getpid(),
        "wall_s": wall_s,
        "device_s": float(after.sim_device_s) - float(before.sim_device_s),
        "step_s": max(float(after.device_free_at_s), clocks.state.comm_free_at_s) - t0_s,
        "comm_s": comm_s,
        "exposed_comm_s": exposed_s,
        "collectives": len(recs),
        "comm_bytes": sum(r["nbytes"] for r in recs),
        "peak_memory_bytes": torch.neuron.max_memory_allocated(),
        "memory_bytes": torch.neuron.memory_allocated(),
    }


def _plain(value: Any) -> Any:
    """A collected variable as a plain number/string/bool/None (0-d tensors become numbers)."""
    if hasattr(value, "item") and getattr(value, "numel", lambda: 0)() == 1:
        value = value.item()
    return value if isinstance(value, (int, float, str, bool, type(None))) else repr(value)


def _trace_slice(t0_s: float) -> list[dict[str, Any]]:
    from ..device.clocks import clocks

    return [e for e in clocks.chrome_trace(since_s=t0_s)["traceEvents"] if e.get("ph") != "M"]  # lanes: named once


def _worker_main(
    rank: int, world: int, store_file: str, conn: Connection, collective_timeout_s: float, parent_pid: int
) -> None:
    """Body of one rank: join the process group (a private file store), then run cells until told to stop.

    Exits at once when the notebook (``parent_pid``) has already died.
    """
    die_with_parent(parent_pid)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world))
    import torch
    import torch.distributed as dist

    from .rank_setup import prepare_rank

    prepare_rank()  # the device, the "neuron" backend, the compile route, the profiler lanes

    from ..device.clocks import clocks
    from ..device.placement import placement_log

    torch.set_num_threads(1)
    out = _Stream(conn, rank)
    sys.stdout = sys.stderr = out  # type: ignore[assignment]
    try:
        join_group(store_file, rank, world, collective_timeout_s)
    except Exception as exc:  # reported to the parent, which stops every rank
        conn.send(
            ("error", rank, {"error": f"{type(exc).__name__}: {exc}", "line": 0, "trace": traceback.format_exc()})
        )
        return
    conn.send(("ready", rank, None))
    namespace: dict[str, Any] = {"rank": rank, "world_size": world, "torch": torch, "dist": dist}
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            break
        if msg[0] == "stop":
            break
        source: str = msg[1]
        collect: tuple[str, ...] = msg[2] if len(msg) > 2 else ()
        torch.neuron.reset_peak_memory_stats()
        clocks.sync("%%trn ranks cell start")
        before = clocks.snapshot()
        placed_before = placement_log.snapshot()
        t0_s = float(before.device_free_at_s)
        start = time.perf_counter()
        import linecache

        text = "\n" + source  # line 1 is the %%trn line
        linecache.cache[CELL_FILE] = (len(text), None, text.splitlines(True), CELL_FILE)
        try:
            code = compile(text, CELL_FILE, "exec")
            exec(code, namespace)
            clocks.sync("%%trn ranks cell end")
            out.flush()
            figures = _figures(before, placed_before, t0_s, time.perf_counter() - start, rank)
            for name in collect:
                figures[name] = _plain(namespace.get(name))
            conn.send(("done", rank, {"figures": figures, "trace": _trace_slice(t0_s)}))
        except BaseException as exc:  # every failure goes to the parent
            out.flush()
            tb = traceback.extract_tb(exc.__traceback__)
            line = next((f.lineno for f in reversed(tb) if f.filename == CELL_FILE), 0)
            frames = "".join(traceback.format_exception(exc)[1:])  # from the cell's frame on
            cell_part = frames[frames.find(f'File "{CELL_FILE}"') :] if CELL_FILE in frames else frames
            report = {"error": f"{type(exc).__name__}: {exc}", "line": line, "trace": "\n" + cell_part}
            conn.send(("error", rank, report))
    try:
        dist.destroy_process_group()
    finally:
        conn.close()


@dataclass
class CellResult:
    """What one cell produced on every rank: figures per rank and the merged trace events."""

    figures: list[dict[str, Any]]
    trace_events: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    cold: bool = False

    def frame(self) -> Any:
        """Per-rank figures as a pandas DataFrame indexed by rank."""
        import pandas as pd

        return pd.DataFrame(self.figures).set_index("rank").sort_index()

    def chrome_trace(self) -> dict[str, Any]:
        """The ranks' timelines merged into one Chrome/Perfetto trace (one process per rank)."""
        meta = [
            {"name": "process_name", "ph": "M", "pid": f["rank"], "args": {"name": f"rank {f['rank']}"}}
            for f in self.figures
        ]
        from ..device.clocks import CLOCK_LANES

        names = [e for f in self.figures for e in thread_names(f["rank"], CLOCK_LANES)]
        return {"traceEvents": meta + names + self.trace_events, "displayTimeUnit": "ms"}


class RankPool:
    """N warm worker ranks; :meth:`run` executes a cell on all of them. Use :func:`get_pool`."""

    def __init__(self, world_size: int, *, collective_timeout_s: float = 60.0, start_timeout_s: float = 300.0) -> None:
        check_world_size(world_size, "the number of ranks")
        self.world_size = world_size
        self.collective_timeout_s = collective_timeout_s
        # Nothing listens: the rendezvous is a file store in a 0700 directory, the control channel a
        # socketpair each rank inherits (see .rendezvous).
        self._dir: str | None = private_dir("trn_ranks_")
        self.conns: list[Connection] = []
        self.processes: list[subprocess.Popen[bytes]] = []
        env = dict(os.environ, OMP_NUM_THREADS=envvars.text("OMP_NUM_THREADS") or "1", **loopback_env())
        # One private network namespace for all ranks where the system allows it (see .netns): gloo's listeners
        # are then out of every other process's reach. None: the host's (TRN_NOTEBOOK_RANKS_NETNS=off, or refused).
        self.netns: PrivateNet | None = None
        try:
            self.netns = private_net()
            for rank in range(world_size):
                ours, theirs = socket.socketpair()
                with ours, theirs:
                    # A fresh interpreter per rank (spawned, never forked; the notebook's __main__ is not re-imported).
                    args = [str(rank), str(world_size), store_path(self._dir), str(theirs.fileno())]
                    args += [str(collective_timeout_s), str(os.getpid())]
                    fds: tuple[int, ...] = (theirs.fileno(),)
                    if self.netns is None:
                        cmd = [sys.executable, "-m", _WORKER, *args]
                    else:
                        cmd, fds = self.netns.command(_WORKER, args), fds + self.netns.fds
                    self.processes.append(
                        subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, pass_fds=fds, start_new_session=True)
                    )
                    self.conns.append(Connection(ours.detach()))
            if self.netns is not None:
                self.netns.close()  # every rank holds the namespaces now
            self._collect("ready", start_timeout_s, print_line=print)
        except BaseException:
            self.close()
            raise

    def pids(self) -> list[int]:
        """Process ids of the workers."""
        return [p.pid for p in self.processes]

    def alive(self) -> bool:
        """True while every worker runs."""
        return bool(self.processes) and all(p.poll() is None for p in self.processes)

    def run(
        self,
        source: str,
        *,
        timeout_s: float | None = None,
        print_line: Callable[[str], None] = print,
        collect: tuple[str, ...] = (),
    ) -> CellResult:
        """Run ``source`` on every rank; streams ``[rank k] …`` lines through ``print_line``.

        ``collect`` names variables of the cell whose values (numbers, strings) join the figures.

        Raises :class:`RankError` (the pool is closed: every rank stopped) naming the first failing
        rank and the cell line, :class:`RanksTimeout` past ``timeout_s``; on ``KeyboardInterrupt`` the
        pool is closed and the interrupt re-raised.
        """
        start = time.perf_counter()
        try:
            for conn in self.conns:
                conn.send(("run", source, tuple(collect)))
            done = self._collect("done", timeout_s, print_line)
        except BaseException:
            self.close()
            raise
        figures = [done[r]["figures"] for r in sorted(done)]
        events = [dict(e, pid=r) for r in sorted(done) for e in done[r]["trace"]]
        return CellResult(figures, events, time.perf_counter() - start)

    def _collect(self, kind: str, timeout_s: float | None, print_line: Callable[[str], None]) -> dict[int, Any]:
        results: dict[int, Any] = {}
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while len(results) < self.world_size:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                what = "start" if kind == "ready" else "finish"
                why = "" if kind == "ready" else " (a hung collective?)"
                raise RanksTimeout(
                    f"ranks {sorted(set(range(self.world_size)) - set(results))} did not {what} within "
                    f"{timeout_s:.0f} s{why}; every rank was stopped"
                )
            for conn in wait(self.conns, timeout=1.0 if left is None else min(1.0, left)):
                try:
                    msg: Any = conn.recv()  # type: ignore[union-attr,call-arg]
                except (EOFError, OSError):
                    continue  # the exit check below reports it
                try:
                    self._handle(msg, kind, results, print_line)
                except RankError as failed:
                    self._raise_peer_exit(failed, kind, results)
                    raise
            for rank, p in enumerate(self.processes):
                if p.poll() is not None and rank not in results:
                    conn = self.conns[rank]
                    self._drain(conn, kind, results, print_line)  # what the rank said before it exited
                    if rank not in results:
                        raise self._exit_error(rank, kind)
        return results

    def _exit_error(self, rank: int, kind: str, after: str = "") -> RankError:
        when = " before it connected (its output above says why)" if kind == "ready" else " mid-cell"
        code = self.processes[rank].returncode
        return RankError(f"rank {rank} exited (code {code}){when}; every rank was stopped{after}", rank)

    def _raise_peer_exit(self, failed: RankError, kind: str, results: dict[int, Any], grace_s: float = 0.5) -> None:
        """Raise the exit of another rank if one has exited (waiting up to ``grace_s``), chained to ``failed``.

        A rank that exits mid-cell breaks its peers' collectives (gloo: "Connection reset by peer"), and a peer's
        report of that could arrive before the exit was seen, naming the wrong rank (1 run in 2 on 3.11 and 3.12).
        """
        deadline = time.monotonic() + grace_s
        while True:
            for rank, p in enumerate(self.processes):
                if rank != failed.rank and rank not in results and p.poll() is not None:
                    first = str(failed).split("; every rank was stopped")[0]
                    after = f" (then {first[:200]})"
                    raise self._exit_error(rank, kind, after) from failed
            if time.monotonic() >= deadline:
                return
            time.sleep(0.05)

    def _drain(self, conn: Connection, kind: str, results: dict[int, Any], print_line: Callable[[str], None]) -> None:
        """Handle the messages a rank sent before it exited, up to the end of its channel."""
        try:
            while conn.poll():
                self._handle(conn.recv(), kind, results, print_line)
        except (EOFError, OSError):
            pass

    def _handle(
        self, msg: tuple[str, int, Any], kind: str, results: dict[int, Any], print_line: Callable[[str], None]
    ) -> None:
        what, rank, payload = msg
        if what == "out":
            print_line(f"[rank {rank}] {payload}")
        elif what == "lines":
            for line in payload:
                print_line(f"[rank {rank}] {line}")
        elif what == "error":
            line = payload["line"]
            where = f"cell line {line}" if line else "start-up"
            raise RankError(
                f"rank {rank} failed at {where}: {payload['error']}; every rank was stopped{payload['trace']}",
                rank,
                f"cell:{line}",
            )
        elif what == kind:
            results[rank] = payload

    def close(self) -> None:
        """Stop every worker (ask, then SIGTERM, then SIGKILL) and reap them; idempotent.

        A second ``KeyboardInterrupt`` while stopping (a user pressing interrupt again) does not leave
        workers behind: it skips the polite wait (SIGTERM at once), stopping finishes, then the interrupt is
        re-raised. (Restarting the polite wait on every press kept ranks busy in a cell alive until the
        cell ended.)
        """
        pending: KeyboardInterrupt | None = None
        while True:
            try:
                self._stop_workers(at_once=pending is not None)
                break
            except KeyboardInterrupt as exc:
                pending = exc
        if pending is not None:
            raise pending

    def _stop_workers(self, at_once: bool = False) -> None:
        # first what the ranks started, in any session, while the ranks (their subreapers) still hold them
        kill_descendants([p.pid for p in self.processes if p.poll() is None])
        for conn in self.conns:
            try:
                conn.send(("stop",))
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + (0.0 if at_once else 2.0)
        for p in self.processes:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.terminate()
        for p in self.processes:
            try:
                p.wait(2.0)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            kill_group(p.pid)  # what the rank started in its own process group goes with it
        for conn in self.conns:
            conn.close()
        if self.netns is not None:
            self.netns.close()
        self.processes, self.conns = [], []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if _pools.get(self.world_size) is self:
            del _pools[self.world_size]


_pools: dict[int, RankPool] = {}
_state.register(
    "rank_pools", _state.Globals(__name__, "_pools"), reset=False
)  # live rank processes: shutdown() ends them


def get_pool(world_size: int, **kwargs: Any) -> tuple[RankPool, bool]:
    """The warm pool of ``world_size`` ranks (started if needed); returns ``(pool, started_now)``.

    Pools of other sizes are closed first (the simulated ranks share the machine's cores). Raises
    ``ValueError`` for a size outside 1..16 (the running pool is kept).
    """
    check_world_size(world_size, "the number of ranks")  # before closing the running pool
    pool = _pools.get(world_size)
    if pool is not None and pool.alive():
        return pool, False
    shutdown()
    pool = RankPool(world_size, **kwargs)
    _pools[world_size] = pool
    return pool, True


def shutdown() -> None:
    """Close every pool (no worker is left running)."""
    for pool in list(_pools.values()):
        pool.close()
    _pools.clear()


atexit.register(shutdown)
