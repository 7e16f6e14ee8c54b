"""Status refresh with a long compile log (issue 29): one warm call, then the next refresh.

Fills the compile log with ``--records`` records (one real compile, copied), makes one warm call of the
compiled function (its record's runs move, so the status payload is recomputed) and times the next
``state_snapshot()``. Target: ≤ 2 ms with 2,000 records (333 ms before the compile log counted cache
results itself and copied only changed records). Printed with its ratio to a baseline run in the same
process: deep-copying every record once (what each refresh used to do), and ``compile_log.snapshot()``
after one warm call (what a view reading the log now pays).

Run: ``python benchmarks/bench_status_compiles.py`` (``--records N``, ``--repeats N``).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import time
from collections.abc import Callable

import torch

import trn_notebook
from trn_notebook.compiler.compile_log import compile_log
from trn_notebook.facts.status import state_snapshot

BUDGET_MS = 2.0


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``fn()`` in milliseconds."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=2_000)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()

    trn_notebook.reset()
    x = torch.ones(8, 8, device="neuron")
    fn = trn_notebook.compile(lambda t: (t * 2).sum())
    fn(x)
    (live,) = compile_log.records
    for i in range(args.records - 1):  # the same graph's facts, as a long session would hold
        compile_log.add(dataclasses.replace(live, graph_name=f"{live.graph_name}_{i}", frozen=None, frozen_at=-1))
    state_snapshot(force=True)
    compile_log.snapshot()

    def warm_then_refresh() -> float:
        fn(x)  # one warm call: a record's runs move
        t0 = time.perf_counter()
        state_snapshot()
        return (time.perf_counter() - t0) * 1e3

    refresh = statistics.median(warm_then_refresh() for _ in range(args.repeats))
    baseline = median_ms(lambda: [copy.deepcopy(dataclasses.asdict(r)) for r in compile_log.snapshot()], 5)

    def warm_then_snapshot() -> float:
        fn(x)
        t0 = time.perf_counter()
        compile_log.snapshot()
        return (time.perf_counter() - t0) * 1e3

    snap = statistics.median(warm_then_snapshot() for _ in range(args.repeats))
    print(f"{len(compile_log.records)} compile records; baseline (deep copy of every record): {baseline:.2f} ms")
    verdict = "ok" if refresh <= BUDGET_MS else "OVER BUDGET"
    print(
        f"  status refresh after one warm call: {refresh:.3f} ms "
        f"({refresh / baseline:.4f}× baseline; budget {BUDGET_MS:.0f} ms: {verdict})"
    )
    print(f"  compile_log.snapshot() after one warm call: {snap:.3f} ms ({snap / baseline:.4f}× baseline)")
    trn_notebook.reset()


if __name__ == "__main__":
    main()
