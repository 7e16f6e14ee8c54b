"""Run the sweep in worker subprocesses, so an interpreter crash on one op is found, not fatal.

Ops are swept in chunks, one ``python -m trn_notebook.compat.isolate`` worker per chunk, which prints one
``RESULT <json>`` line per op as it finishes. When a worker dies (segfault, abort, timeout), the ops it did
not report are retried: the first of them alone (to confirm the crash and name it), the rest in a new chunk.
A crash confirmed alone is a row with ``crashed`` set — a device bug to fix, never a silent skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from typing import Any

from .sweep import OpResult, run_op

_PREFIX = "RESULT "


def _worker_cmd(quick: bool, compiled: bool = False) -> list[str]:
    flags = [*(["--quick"] if quick else []), *(["--compiled"] if compiled else [])]
    return [sys.executable, "-m", "trn_notebook.compat.isolate", *flags]


def run_worker(cmd: list[str], names: list[str], timeout_s: float) -> tuple[list[dict], str]:
    """Run one worker process on ``names`` (one per stdin line); returns the ``RESULT`` JSON objects it
    printed and, if it did not finish cleanly (crash, signal, timeout), why. Shared with the model zoo."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    try:
        proc = subprocess.run(cmd, input="\n".join(names), capture_output=True, text=True, timeout=timeout_s, env=env)
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err, rc = f"timed out after {timeout_s:.0f} s", None
    results = [json.loads(line[len(_PREFIX) :]) for line in out.splitlines() if line.startswith(_PREFIX)]
    if rc == 0 and len(results) == len(names):
        return results, ""
    if rc is None:
        return results, err
    tail = err.strip().splitlines()[-1:] if err.strip() else []
    how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
    return results, how + (f" ({tail[0][:200]})" if tail else "")


def emit(result: dict) -> None:
    """Worker side of :func:`run_worker`: print one result line."""
    sys.stdout.write(_PREFIX + json.dumps(result) + "\n")
    sys.stdout.flush()


def _run_chunk(names: list[str], quick: bool, timeout_s: float, compiled: bool = False) -> tuple[dict[str, Any], str]:
    """Run one worker; returns the results it reported and, if it died, why."""
    from .compiled import CompiledResult

    found, died = run_worker(_worker_cmd(quick, compiled), names, timeout_s)
    results: dict[str, Any] = {}
    for data in found:
        r = CompiledResult.from_json(data) if compiled else OpResult.from_json(data)
        results[r.op] = r
    return results, died


def run_isolated(
    names: list[str],
    quick: bool = False,
    chunk_size: int = 60,
    timeout_s: float = 1800.0,
    progress: Callable[[Any], None] | None = None,
    compiled: bool = False,
) -> list[Any]:
    """Sweep ``names`` in worker subprocesses; every op gets a result, crashed ones with ``crashed`` set.

    ``compiled``: the compiled sweep (:mod:`.compiled`), whose results are :class:`CompiledResult`; a
    crashed op is then a result whose forward tally holds the crash."""
    from .compiled import CompiledResult
    from .sweep import Tally, _op_db

    done: dict[str, Any] = {}
    pending = list(names)
    while pending:
        chunk, pending = pending[:chunk_size], pending[chunk_size:]
        got, died = _run_chunk(chunk, quick, timeout_s, compiled)
        for r in got.values():
            done[r.op] = r
            if progress:
                progress(r)
        if not died:
            continue
        missing = [n for n in chunk if n not in got]
        suspect, rest = missing[0], missing[1:]
        alone, died_alone = _run_chunk([suspect], quick, timeout_s, compiled)
        if died_alone and compiled:
            r = CompiledResult(suspect, Tally(0, 1, f"worker crashed: {died_alone}"))
        elif died_alone:
            op = _op_db().get(suspect)
            r = OpResult(suspect, (op.aten_name or op.name) if op else suspect, crashed=died_alone)
        else:  # it only died in company: the crash is an interaction, report it on the suspect
            r = alone[suspect]
            r.crashed = f"worker died after it in a chunk ({died}); passes alone"
        done[suspect] = r
        if progress:
            progress(r)
        pending = rest + pending
    return [done[n] for n in names]


def _worker(lines: Iterable[str], quick: bool, compiled: bool = False) -> None:
    import warnings

    warnings.simplefilter("ignore")
    if compiled:
        from .compiled import run_compiled_op
    for line in lines:
        name = line.strip()
        if name:
            emit((run_compiled_op(name, quick=quick) if compiled else run_op(name, quick=quick)).to_json())


if __name__ == "__main__":
    _worker(sys.stdin.read().splitlines(), "--quick" in sys.argv[1:], "--compiled" in sys.argv[1:])
