"""Run a function on N spawned ranks (``torch.multiprocessing`` spawn, never fork), always cleaned up.

Each worker gets the torchrun environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``), joins
``init_process_group("neuron")`` through a file store in a private directory (no TCP store: see
:mod:`.rendezvous`) and runs ``fn(rank, world_size, *args)``.
A rank that raises stops the others and the error names the rank and the line; a run past
``timeout_s`` (e.g. a hung collective) is terminated with a clear message; no process outlives the call.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
from collections.abc import Callable
from typing import Any

import torch.multiprocessing as mp

from .. import envvars
from ..device.source_lines import is_user_file
from ..outfiles import write_text_atomic
from .rendezvous import check_world_size, join_group, loopback_env, private_dir, store_path


class RankError(RuntimeError):
    """A rank raised; ``rank`` is its index, ``location`` the ``file:line`` of the innermost user frame."""

    def __init__(self, message: str, rank: int, location: str = "") -> None:
        super().__init__(message)
        self.rank = rank
        self.location = location


class RanksTimeout(TimeoutError):
    """The ranks did not finish in time (a hung collective, a rank waiting for a peer that left)."""


def free_port() -> int:
    """A free TCP port on localhost for the rendezvous store."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(
    rank: int,
    fn: Callable[..., Any],
    world: int,
    store_file: str,
    collective_timeout_s: float,
    error_dir: str,
    args: tuple[Any, ...],
) -> None:
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_WORLD_SIZE=str(world),
        OMP_NUM_THREADS=envvars.text("OMP_NUM_THREADS") or "1",
        **loopback_env(),
    )
    import torch
    import torch.distributed as dist

    from .rank_setup import prepare_rank

    prepare_rank()  # the device, the "neuron" backend, the compile route, the profiler lanes

    torch.set_num_threads(1)
    _dump_stacks_on_request(error_dir, rank)
    join_group(store_file, rank, world, collective_timeout_s)
    try:
        fn(rank, world, *args)
    except BaseException as exc:
        _write_error(error_dir, rank, exc)
        raise
    finally:
        dist.destroy_process_group()


_STACK_SIGNAL = signal.SIGUSR1


def _dump_stacks_on_request(error_dir: str, rank: int) -> None:
    """Write every thread's Python stack to ``rank<N>.stack`` on SIGUSR1 (a hang) or SIGTERM (being stopped).

    faulthandler writes from the signal handler itself, so a rank stuck inside a C++ call (a collective
    waiting for its peer, a lock) still reports where its Python code was.
    """
    import faulthandler

    # faulthandler's file: written by the interpreter as the rank dies, so not staged (outfiles) like the rest
    fh = open(os.path.join(error_dir, f"rank{rank}.stack"), "w")  # noqa: SIM115 - lives as long as the rank
    faulthandler.register(_STACK_SIGNAL, file=fh, all_threads=True)
    # a crash (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL) writes "Fatal Python error" and every stack there too
    faulthandler.enable(file=fh, all_threads=True)
    # torch's join stops the other ranks with SIGTERM when one fails: dump first, then terminate as before
    faulthandler.register(signal.SIGTERM, file=fh, all_threads=True, chain=True)


def stacks_of_stuck_ranks(processes: list[Any], error_dir: str, wait_s: float = 1.0) -> dict[int, str]:
    """Ask every still-running rank for its Python stacks (SIGUSR1) and read those written by ranks stopped
    with SIGTERM; ``{rank: "file:line in fn; ..."}``: each thread's innermost user frame, for the error
    message of a hung collective."""
    import time

    alive = [i for i, p in enumerate(processes) if p.is_alive()]
    for i in alive:
        try:
            os.kill(processes[i].pid, _STACK_SIGNAL)
        except OSError:
            continue
    time.sleep(wait_s if alive else 0.0)
    found: dict[int, str] = {}
    for i in range(len(processes)):
        try:
            with open(os.path.join(error_dir, f"rank{i}.stack")) as fh:
                text = fh.read()
        except OSError:
            continue
        where = _stack_summary(text)
        if where:
            found[i] = where
    return found


def _stack_summary(text: str) -> str:
    """The innermost user frame of each thread in a faulthandler dump (most recent call first)."""
    threads = []
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", text.strip()):
        m = _user_frame(list(_FRAME.finditer(block))[::-1])  # reversed: innermost last, as in a traceback
        if m is not None:
            threads.append(f"{os.path.basename(m.group(1))}:{m.group(2)} in {m.group(3)}")
    return "; ".join(dict.fromkeys(threads))


def _crash_text(error_dir: str, rank: int) -> str:
    """What faulthandler wrote as ``rank`` crashed (its innermost user frames, then the whole dump), or ""."""
    try:
        with open(os.path.join(error_dir, f"rank{rank}.stack")) as fh:
            text = fh.read().strip()
    except OSError:
        return ""
    if "Fatal Python error" not in text:
        return ""
    where = _stack_summary(text)
    return f"; it crashed at {where or 'a frame outside Python'}:\n{text}"


def _write_error(error_dir: str, rank: int, exc: BaseException) -> None:
    import json
    import time
    import traceback

    trace = "".join(traceback.format_exception(exc))
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if is_user_file(f.filename)] or frames  # the one source-line rule
    where = f"{user[-1].filename}:{user[-1].lineno}" if user else ""
    record = {
        "rank": rank,
        "time": time.time(),
        "error": f"{type(exc).__name__}: {exc}",
        "trace": trace,
        "where": where,
    }
    write_text_atomic(os.path.join(error_dir, f"rank{rank}.json"), json.dumps(record))  # read by the parent


_PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")


def first_failure(error_dir: str) -> dict[str, Any] | None:
    """The error that started a failure: the earliest recorded one that is not a peer having gone away."""
    import json

    records = []
    for name in sorted(os.listdir(error_dir)):
        if name.startswith("rank") and name.endswith(".json"):
            with open(os.path.join(error_dir, name)) as fh:
                records.append(json.load(fh))
    if not records:
        return None
    records.sort(key=lambda r: (any(p in r["error"] for p in _PEER_GONE), r["time"]))
    return records[0]


# A traceback frame (`File "f", line 3, in fn`) or a faulthandler frame (`File "f", line 3 in fn`).
_FRAME = re.compile(r'File "([^"]+)", line (\d+),? in (\S+)')


def _user_frame(frames: list[re.Match[str]]) -> re.Match[str] | None:
    """The innermost user frame (the last, traceback order; :func:`~..device.source_lines.is_user_file`), else
    the innermost. For text only a dump gives (a faulthandler stack, a traceback without a record)."""
    user = [m for m in frames if is_user_file(m.group(1))]
    return (user or frames)[-1] if frames else None


def _innermost_user_frame(trace: str) -> str:
    m = _user_frame(list(_FRAME.finditer(trace)))
    return "" if m is None else f"{m.group(1)}:{m.group(2)}"


def run_ranks(
    fn: Callable[..., Any],
    world_size: int = 2,
    args: tuple[Any, ...] = (),
    *,
    timeout_s: float = 300.0,
    collective_timeout_s: float = 60.0,
) -> None:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` spawned ranks of the ``neuron`` backend.

    ``fn`` must be importable by name (defined in a module, not in ``__main__`` of a notebook).
    Raises :class:`RankError` naming the first failing rank and line (the other ranks are stopped),
    :class:`RanksTimeout` after ``timeout_s`` (every rank is killed), ``ValueError`` for a world size outside
    1..16 (:data:`.rendezvous.MAX_WORLD_SIZE`).
    """
    check_world_size(world_size)
    error_dir = private_dir("trn_ranks_")
    ctx = mp.start_processes(
        _rank_main,
        args=(fn, world_size, store_path(error_dir), collective_timeout_s, error_dir, args),
        nprocs=world_size,
        join=False,
        start_method="spawn",
    )
    try:
        import time

        deadline = time.monotonic() + timeout_s
        while not ctx.join(timeout=max(0.0, min(1.0, deadline - time.monotonic())), grace_period=2.0):
            if time.monotonic() >= deadline:
                alive = [i for i, p in enumerate(ctx.processes) if p.is_alive()]
                stuck = _stuck_text(stacks_of_stuck_ranks(ctx.processes, error_dir))
                raise RanksTimeout(
                    f"ranks {alive} still running after {timeout_s:.0f} s (a hung collective? a rank waiting "
                    f"for a peer that exited?); every rank was stopped{stuck}"
                )
    except mp.ProcessRaisedException as exc:
        first = first_failure(error_dir)
        rank, trace, last, where = (
            (first["rank"], first["trace"], first["error"], str(first.get("where", "")))
            if first
            else (exc.error_index, str(exc), str(exc).strip().splitlines()[-1], _innermost_user_frame(str(exc)))
        )
        timed_out = "timed out" in last.lower() or "timeout" in last.lower()
        hint = (
            " — a hung collective: a peer never joined it (a rank skipped, reordered or is stuck before it)"
            + _stuck_text(stacks_of_stuck_ranks(ctx.processes, error_dir))
            if timed_out
            else ""
        )
        raise RankError(
            f"rank {rank} failed at {where}: {last}{hint}\n(the other ranks were stopped)\n{trace}", rank, where
        ) from None
    except mp.ProcessExitedException as exc:
        crash = _crash_text(error_dir, exc.error_index)
        raise RankError(
            f"rank {exc.error_index} exited: {exc} (the other ranks were stopped){crash}", exc.error_index
        ) from None
    finally:
        terminate(ctx.processes)
        shutil.rmtree(error_dir, ignore_errors=True)


def _stuck_text(stacks: dict[int, str]) -> str:
    return "".join(f"; rank {r} was at {where}" for r, where in sorted(stacks.items()))


def terminate(processes: list[Any], grace_s: float = 2.0) -> None:
    """Stop every still-running process: SIGTERM, then SIGKILL after ``grace_s``; reaps them all."""
    for p in processes:
        if p.is_alive():
            p.terminate()
    for p in processes:
        p.join(grace_s)
        if p.is_alive():
            p.kill()
            p.join()
