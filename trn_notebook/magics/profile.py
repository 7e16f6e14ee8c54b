"""``%%trn profile [--steps N] [--warmup N] [--save trace.json]``: profile a cell with torch.profiler.

The cell is compiled once under its own cell number (so sources read ``cell [N] line L``), run
``--warmup`` times unprofiled, then ``--steps`` times inside ``trn_notebook.profile()``, each step
marked ``%%trn profile step i`` in the trace. Shows the timeline widget and the "why is it slow"
summary. A cell that raises keeps (and shows) its partial trace, then fails like the cell would.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from IPython.core.error import UsageError
from IPython.display import display

from ..display.results import Message
from ..outfiles import check_writable
from ..profiling import profile
from ..profiling.run import NO_DEVICE_MESSAGE
from .cells import current_cell_number
from .render import simulator_only


def add_arguments(p: argparse.ArgumentParser, positive: Any, nonnegative: Any) -> None:
    """The options of ``%%trn profile``."""
    p.add_argument("--steps", type=positive, default=1, help="profiled runs of the cell (default 1)")
    p.add_argument("--warmup", type=nonnegative, default=0, help="unprofiled runs first (default 0)")
    p.add_argument("--save", metavar="PATH", help="write the merged trace JSON (open it in ui.perfetto.dev)")
    p.add_argument("--top", type=positive, default=10, help="rows in the summary tables (default 10)")
    p.add_argument("--no-widget", action="store_true", help="show the summary only")


def cmd_profile(self: Any, args: argparse.Namespace, cell: str) -> Any:
    """Run the cell under the profiler and display the timeline and the summary."""
    refused = simulator_only(
        "%%trn profile (modeled device lanes)",
        "torch.profiler.profile(activities=[CPU, PrivateUse1]) around the code, viewed in the Neuron profiler",
    )
    if refused is not None:
        return refused
    shell = self.shell
    count = current_cell_number(shell)
    source = shell.transform_cell(f"# %%trn {args.line}\n{cell}")
    code = compile(source, shell.compile.cache(source, count), "exec")
    ns = shell.user_ns
    if args.save is not None and not str(args.save).endswith(".json"):
        raise UsageError(f"%%trn profile: --save takes a .json path, got {args.save!r}")
    if args.save is not None:
        try:  # before the cell runs: a bad path must not cost the profile
            check_writable(args.save, "trace")
        except OSError as exc:
            raise UsageError(f"%%trn profile --save: {exc}") from None
    for _ in range(args.warmup):
        exec(code, ns)
    error: BaseException | None = None
    with profile(record_shapes=True) as result:
        try:
            for i in range(args.steps):
                with torch.profiler.record_function(f"%%trn profile step {i}"):
                    exec(code, ns)
        except Exception as exc:  # keep the partial trace, show it, then fail the cell
            error = exc
            result.error = f"{type(exc).__name__}: {exc}"
    if result.records == 0:
        display(Message(f"%%trn profile: {NO_DEVICE_MESSAGE}", "warning"))
    else:
        if error is not None:
            display(
                Message(
                    f"%%trn profile: the cell raised {type(error).__name__}; showing the partial trace "
                    f"({result.records} device events before the error)",
                    "error",
                )
            )
        if args.save:
            path = result.save(args.save)
            display(Message(f"trace written to {path} (open it in https://ui.perfetto.dev)", "info"))
        if not args.no_widget:
            display(result.widget())
        display(result.summary(top=args.top))
    shell.user_ns["_trn_profile"] = result
    if error is not None:
        raise error
    return None


def memory_snapshot() -> Any:
    """``%trn memory --snapshot``: the snapshot widget, or how to start recording (``UsageError``)."""
    from ..profiling.memory import NOT_RECORDING, history
    from ..widgets.memory_snapshot import MemorySnapshotWidget

    if history.entries is None:
        raise UsageError(f"%trn memory --snapshot: {NOT_RECORDING}")
    return MemorySnapshotWidget()
