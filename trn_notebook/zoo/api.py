"""Run the zoo: every selected model in its own worker process (a crash names its model)."""

from __future__ import annotations

import sys
from collections.abc import Callable

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
    timeout_s: float = 900.0,
    progress: Callable[[ModelResult], None] | None = None,
) -> list[ModelResult]:
    """Run every stage of every selected model (``patterns``: comma-separated globs; ``quick``: CI subset).

    Each model runs in its own ``python -m trn_notebook.zoo.worker`` process unless ``isolated`` is
    False; a worker that crashes or times out becomes a row with ``crashed`` set, never a crash of
    the run. Raises ``ValueError`` when a pattern matches no model.
    """
    from trn_notebook.compat.isolate import run_worker

    specs = select(patterns, quick)
    results = []
    for s in specs:
        if isolated:
            cmd = [sys.executable, "-m", "trn_notebook.zoo.worker", *(["--bench"] if bench else [])]
            found, died = run_worker(cmd, [s.name], timeout_s)
            r = ModelResult.from_json(found[0]) if found else _crashed(s, died or "no result")
        else:
            from .stages import run_model

            r = run_model(s, bench=bench)
        results.append(r)
        if progress:
            progress(r)
    return results
