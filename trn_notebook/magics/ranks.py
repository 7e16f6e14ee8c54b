"""``%%trn ranks N [--timeout S] [--trace PATH] [--collect VARS] [--restart]``: run the cell on N ranks.

Output streams as ``[rank k] …``; the cell's value is a pandas DataFrame of per-rank figures
(placement, memory, modeled step and communication time, plus the ``--collect`` variables' values
on each rank); the ranks' timelines are merged into one
Perfetto trace file (``DataFrame.attrs["trace"]``). Workers stay warm between cells and are always
stopped on error, interrupt, ``%trn ranks stop`` and kernel exit (see :mod:`trn_notebook.distributed.pool`).
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError

from ..distributed import pool as rank_pool
from ..distributed.rendezvous import MAX_WORLD_SIZE, private_dir
from ..outfiles import write_text_atomic
from .render import simulator_only

USAGE = "%%trn ranks N [--timeout SECONDS] [--trace PATH] [--collect VAR,VAR] [--restart]   |   %trn ranks stop"


def _parse(line: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="%%trn ranks", add_help=False, exit_on_error=False)
    parser.add_argument("ranks")
    parser.add_argument("n", nargs="?")
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--trace", default=None)
    parser.add_argument("--restart", action="store_true")
    parser.add_argument("--collect", default="")
    try:
        args, extra = parser.parse_known_args(shlex.split(line))
    except (argparse.ArgumentError, ValueError) as exc:
        raise UsageError(f"%%trn ranks: {exc}\ncorrect form: {USAGE}") from None
    if extra:
        raise UsageError(f"%%trn ranks: unexpected {' '.join(extra)!r}\ncorrect form: {USAGE}")
    return args


_private_trace_dir: Path | None = None


def _trace_dir() -> Path:
    """This session's own directory for trace files (``mkdtemp``, mode 0700), never a fixed name in the shared
    temp directory: there another user could plant a symlink to a file of yours, or take the name first."""
    global _private_trace_dir
    if _private_trace_dir is None or not _private_trace_dir.is_dir():
        _private_trace_dir = Path(private_dir("trn_ranks_traces_"))
    return _private_trace_dir


class RanksInterrupted(KeyboardInterrupt):
    """The user interrupted a ``%%trn ranks`` cell: every rank is stopped; IPython shows one short message.

    Still a ``KeyboardInterrupt`` (Run All stops there as for any interrupt), but its traceback is the message
    alone (IPython's ``_render_traceback_`` hook): the frames of the pool's wait loop say nothing to the user.
    """

    def __init__(self, world_size: int) -> None:
        super().__init__(
            f"%%trn ranks {world_size}: interrupted; all {world_size} ranks were stopped "
            "(their namespace is gone: the next %%trn ranks cell starts fresh ranks)"
        )

    def _render_traceback_(self) -> list[str]:
        """The lines IPython prints instead of a traceback."""
        return [f"KeyboardInterrupt: {self.args[0]}"]


def ranks_magic(line: str, cell: str | None) -> Any:
    """Run ``cell`` on N ranks (see the module docstring); raises ``UsageError`` for bad arguments and
    :class:`RanksInterrupted` (a ``KeyboardInterrupt``, every rank stopped) when the user interrupts the cell."""
    args = _parse(line)
    if args.n == "stop" and cell is None:
        rank_pool.shutdown()
        return None
    if cell is None:
        raise UsageError(f"%trn ranks is a cell magic (or `%trn ranks stop`)\ncorrect form: {USAGE}")
    try:
        n = int(args.n)
    except (TypeError, ValueError):
        raise UsageError(f"%%trn ranks: expected a number of ranks, got {args.n!r}\ncorrect form: {USAGE}") from None
    if not 1 <= n <= MAX_WORLD_SIZE:
        raise UsageError(
            f"%%trn ranks: {n} ranks is outside 1–{MAX_WORLD_SIZE} (each rank is a process on this machine)\n"
            f"correct form: {USAGE}"
        )
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError(f"%%trn ranks: --timeout must be > 0 seconds\ncorrect form: {USAGE}")
    refused = simulator_only(
        "%%trn ranks (simulated ranks with modeled collectives)",
        "torchrun --nproc-per-node N script.py with dist.init_process_group('neuron'), one NeuronCore per process",
    )
    if refused is not None:
        return refused
    collect = tuple(name.strip() for name in args.collect.split(",") if name.strip())
    bad = [name for name in collect if not name.isidentifier()]
    if bad:
        raise UsageError(f"%%trn ranks: --collect takes variable names, got {bad}\ncorrect form: {USAGE}")
    if args.restart:
        rank_pool.shutdown()
    try:
        pool, cold = rank_pool.get_pool(n)  # RankError / RanksTimeout propagate: every rank is stopped by then
        result = pool.run(cell, timeout_s=args.timeout, collect=collect)
    except KeyboardInterrupt:  # the pool is closed by now (pool.run / get_pool stop every rank first)
        raise RanksInterrupted(n) from None
    result.cold = cold
    path = Path(args.trace) if args.trace else _trace_dir() / f"ranks_{n}_trace.json"
    try:
        write_text_atomic(path, json.dumps(result.chrome_trace()))
    except OSError as exc:
        raise UsageError(
            f"%%trn ranks: cannot write the trace to {str(path)!r}: {exc.strerror or exc}; pass "
            f"--trace PATH in a directory you can write\ncorrect form: {USAGE}"
        ) from None
    frame = result.frame()
    frame.attrs["trace"] = str(path)
    frame.attrs["cold_start"] = cold
    frame.attrs["wall_s"] = result.wall_s
    return frame
