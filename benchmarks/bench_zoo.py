"""The full model zoo on ``neuron``: pass rates per stage, cold compile vs aot_eager, decode per token vs CPU.

Every zoo model (tiny random-weight ``transformers`` models, see ``docs/models.md``) runs all its stages
in its own worker process against CPU PyTorch eager, then the benchmark figures:

1. pass rate per stage (goals: eager forward/backward and training 100%; compiled forward/backward and
   compiled generation >= 95%);
2. cold compile of the forward graph, ``backend="neuron"`` vs ``backend="aot_eager"`` on the same model and
   device (goal <= 1.3x), median and spread over models;
3. compiled static-cache decode, wall time per token vs CPU eager generation (goal <= 1.1x), and the
   simulator's modeled device time per token.

    python benchmarks/bench_zoo.py [--models GLOBS] [--write-docs]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from trn_notebook.zoo.api import run_zoo
from trn_notebook.zoo.table import rates, summary_lines, to_markdown

GOALS = {
    "eager_fwd": 1.0,
    "eager_bwd": 1.0,
    "train": 1.0,
    "compiled_fwd": 0.95,
    "compiled_bwd": 0.95,
    "generate": 1.0,
    "generate_compiled": 0.95,
}


def _spread(values: list[float]) -> str:
    if not values:
        return "no data"
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"median {statistics.median(values):.2f}x (q1 {q[0]:.2f}x, q3 {q[2]:.2f}x, n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", help="comma-separated globs over zoo model names (default: all)")
    parser.add_argument("--write-docs", action="store_true", help="regenerate docs/models.md")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()}")
    t0 = time.perf_counter()
    results = run_zoo(args.models, bench=True, progress=lambda r: print(
        f"  {r.name:12s} " + " ".join(f"{k}={v[0]}" for k, v in r.stages.items()), flush=True))  # fmt: skip
    print(f"{len(results)} models in {time.perf_counter() - t0:.0f} s; load after: {os.getloadavg()}")
    for line, r in zip(summary_lines(results), rates(results), strict=True):
        goal = GOALS[r.stage]
        print(f"{line}   goal {goal:.0%}: {'ok' if r.rate >= goal else 'BELOW GOAL'}")
    compile_ratios = [r.figures["cold_compile_ratio"] for r in results if "cold_compile_ratio" in r.figures]
    decode_ratios = [r.figures["decode_ratio"] for r in results if "decode_ratio" in r.figures]
    modeled = [r.figures["modeled_device_token_s"] * 1e6 for r in results if "modeled_device_token_s" in r.figures]
    print(f"cold compile, neuron vs aot_eager (goal <= 1.3x): {_spread(compile_ratios)}")
    print(f"compiled decode per token vs CPU eager, wall (goal <= 1.1x): {_spread(decode_ratios)}")
    if modeled:
        print(f"modeled device time per decoded token: median {statistics.median(modeled):.1f} us")
    for r in results:
        for note in r.notes:
            print(f"  {r.name:12s} {note}")
        if r.figures:
            figs = ", ".join(f"{k}={v:.4g}" for k, v in sorted(r.figures.items()))
            print(f"  {r.name:12s} {figs}")
    if args.write_docs:
        with open("docs/models.md", "w", encoding="utf-8") as fh:
            fh.write(to_markdown(results, "python benchmarks/bench_zoo.py --write-docs"))
        print("wrote docs/models.md")


if __name__ == "__main__":
    main()
