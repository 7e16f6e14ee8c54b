"""Run the zoo: every selected model in its own worker process (a crash names its model)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .. import locks as _locks
from .specs import ModelSpec, select
from .stages import STAGES, ModelResult


def _crashed(s: ModelSpec, why: str) -> ModelResult:
    r = ModelResult(s.name, s.family, s.model, crashed=why)
    for stage in STAGES:
        r.stages[stage] = ["fail", f"worker crashed: {why}", 0.0]
    return r


def run_zoo(
    patterns: str | None = None,
    quick: bool = False,
    isolated: bool = True,
    bench: bool = False,
    chunk_size: int = 1,
    jobs: int = 1,
    timeout_s: float = 900.0,
    progress: Callable[[ModelResult], None] | None = None,
) -> list[ModelResult]:
    """Run every stage of every selected model (``patterns``: comma-separated globs; ``quick``: CI subset).

    Models run in ``python -m trn_notebook.zoo.worker`` processes, ``chunk_size`` per worker (1: each
    model alone), ``jobs`` workers at a time, unless ``isolated`` is False. When a worker dies (crash, signal, timeout per model),
    the first model it did not report is re-run alone to confirm and name the crash (a row with
    ``crashed`` set, never a crash of the run), the rest in a new worker. Raises ``ValueError`` when a
    pattern matches no model, :class:`~trn_notebook.extras.MissingExtra` (before any work) when
    ``transformers`` is not installed.
    """
    from trn_notebook.compat.isolate import run_worker
    from trn_notebook.extras import require

    specs = select(patterns, quick)
    require("transformers", "the model zoo")
    if not isolated:
        from .stages import run_model

        out = []
        for s in specs:
            out.append(run_model(s, bench=bench))
            if progress:
                progress(out[-1])
        return out
    cmd = [sys.executable, "-m", "trn_notebook.zoo.worker", *(["--bench"] if bench else [])]
    by_name = {s.name: s for s in specs}
    names = [s.name for s in specs]
    chunks = [names[i : i + chunk_size] for i in range(0, len(names), chunk_size)]
    done: dict[str, ModelResult] = {}
    lock = _locks.make("leaf", "zoo results")

    def report(r: ModelResult) -> None:
        with lock:
            done[r.name] = r
            if progress:
                progress(r)

    def run_chunk(chunk: list[str]) -> None:
        """One worker for ``chunk``; a worker that dies is answered by the suspect alone, then the rest."""
        pending = list(chunk)
        while pending:
            found, died = run_worker(cmd, pending, timeout_s * len(pending))
            reported = set()
            for data in found:
                r = ModelResult.from_json(data)
                reported.add(r.name)
                report(r)
            missing = [n for n in pending if n not in reported]
            if not died or not missing:
                return
            suspect, pending = missing[0], missing[1:]
            if len(missing) + len(reported) > 1:
                alone, died_alone = run_worker(cmd, [suspect], timeout_s)
                report(ModelResult.from_json(alone[0]) if alone else _crashed(by_name[suspect], died_alone or died))
            else:
                report(_crashed(by_name[suspect], died))

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(run_chunk, chunks))  # list(): re-raises an exception of any chunk
    return [done[s.name] for s in specs]
