"""Render cost of ``%trn status``, ``%trn ops`` and ``%trn memory`` with 10,000 logged ops (issue 4).

Target: each renders (magic call + HTML + text/plain) in ≤ 50 ms. Each figure is printed with its
ratio to a baseline run in the same process: ``str(placement_log.snapshot())`` (turning the raw log
into one string, the least any view must do). Also printed: the post-cell state refresh when
nothing changed (target ≤ 1 ms) against reading the placement log's version counter.

Run: ``python benchmarks/bench_magics.py`` (``--ops N`` to change the log size).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from IPython.testing.globalipapp import get_ipython

import trn_notebook  # noqa: F401 - registers the device
from trn_notebook.device.placement import placement_log
from trn_notebook.facts.status import state_snapshot
from trn_notebook.magics import hooks, render

BUDGET_MS = 50.0
REFRESH_BUDGET_MS = 1.0
CATEGORIES = ("native", "native", "native", "cpu_fallback", "host_only")


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``fn()`` in milliseconds (after one untimed call)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def fill_log(n: int) -> None:
    """Record ``n`` distinct ops with costs (as a long session would)."""
    placement_log.reset()
    for i in range(n):
        placement_log.record(f"op_{i}", CATEGORIES[i % len(CATEGORIES)], 1e-5 * (i % 97), 1e-6 * (i % 89), 64, 64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()

    ip = get_ipython()
    ip.run_line_magic("load_ext", "trn_notebook")
    fill_log(args.ops)
    baseline = median_ms(lambda: str(placement_log.snapshot()), args.repeats)
    print(f"{args.ops} logged ops; baseline str(placement_log.snapshot()): {baseline:.2f} ms")

    for prefer in (False, True):
        render.prefer_widgets = prefer
        label = "widget when available" if prefer else "result object (HTML + text)"
        print(f"\n%trn views, {label}:")
        for sub in ("status", "ops", "memory"):

            def run(sub: str = sub) -> None:
                out = ip.run_line_magic("trn", sub)
                if hasattr(out, "_repr_mimebundle_"):
                    out._repr_mimebundle_()
                else:
                    out._repr_html_()
                    repr(out)

            ms = median_ms(run, args.repeats)
            verdict = "ok" if ms <= BUDGET_MS else "OVER BUDGET"
            print(
                f"  %trn {sub:<7} {ms:7.2f} ms  ({ms / baseline:5.2f}× baseline; budget {BUDGET_MS:.0f} ms: {verdict})"
            )

    try:
        from trn_notebook.widgets import PlacementView

        ms = median_ms(lambda: PlacementView()._repr_mimebundle_(), 5)
        print(
            f"  (PlacementView itself at {args.ops} ops: {ms:.2f} ms; %trn ops shows the table above "
            f"{render.WIDGET_MAX_OPS} ops)"
        )
    except ImportError:
        pass

    state_snapshot(force=True)
    unchanged = median_ms(lambda: hooks.post_run_cell(None), 200)
    version = median_ms(lambda: placement_log.version, 200)
    verdict = "ok" if unchanged <= REFRESH_BUDGET_MS else "OVER BUDGET"
    print(
        f"\npost_run_cell refresh, nothing changed: {unchanged * 1e3:.1f} µs "
        f"({unchanged / max(version, 1e-6):.0f}× reading placement_log.version; budget 1 ms: {verdict})"
    )
    placement_log.record("op_0", "native", 0.0, 0.0)
    changed = median_ms(lambda: (placement_log.record("op_1", "native", 0.0, 0.0), hooks.post_run_cell(None)), 50)
    print(f"post_run_cell refresh after a new op (recomputes the payload): {changed:.2f} ms")
    placement_log.reset()


if __name__ == "__main__":
    main()
