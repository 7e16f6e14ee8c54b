"""Compiled OpInfo coverage: every k-th OpInfo entry under ``torch.compile(backend="neuron", fullgraph=True)``.

Prints forward/backward coverage (entries passing compiled over entries passing eagerly) and writes the
raw results as JSON, so that two runs (e.g. before and after a compiler change, ``PYTHONPATH`` selecting
the older tree) compare entry by entry with ``--compare OLD.json``.

    python benchmarks/bench_compiled_sweep.py [--every K] [--json OUT] [--compare OLD.json] [--out docs/compatibility.md]

``--out`` writes the compiled section of ``docs/compatibility.md`` (the eager table above it is kept); the
quick subset (``python -m trn_notebook.compat --compiled --quick``) runs in CI as a test instead.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from trn_notebook.compat.compiled import CompiledResult
from trn_notebook.compat.compiled_table import (
    CompiledSummary,
    compiled_markdown,
    splice,
    summarize_compiled,
    summary_lines,
)
from trn_notebook.compat.isolate import run_isolated
from trn_notebook.compat.sweep import Tally, select_ops


def _with_progress(names: list[str], path: str, report_only: bool) -> list[CompiledResult]:
    """The results of ``names`` kept in JSON-lines file ``path``: those already there are read, the others
    (unless ``report_only``) swept in this process one by one and appended as each is done."""
    import warnings

    from trn_notebook.compat.compiled import run_compiled_op

    warnings.simplefilter("ignore")  # as the isolated workers do (fallback warnings, once per op)
    order = {n: i for i, n in enumerate(names)}
    done: dict[str, CompiledResult] = {}
    started: list[str] = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    data = json.loads(line)
                    if "started" in data:
                        started.append(data["started"])
                        continue
                    r = CompiledResult.from_json(data)
                    done[r.op] = r
    for name in set(started):  # began twice and never reported (the second time first in a fresh process): a crash
        if name not in done and started.count(name) >= 2:
            done[name] = CompiledResult(name, Tally(0, 1, "crashed: the sweep process died in this entry twice"))
    retry = [n for n in names if n in started and n not in done]  # died once: first in this fresh process
    names = retry + [n for n in names if n not in retry]
    if not report_only:
        with open(path, "a", encoding="utf-8") as fh:
            for name in names:
                if name not in done:
                    fh.write(json.dumps({"started": name}) + "\n")
                    fh.flush()
                    done[name] = run_compiled_op(name)
                    fh.write(json.dumps(done[name].to_json()) + "\n")
                    fh.flush()
    return [done[n] for n in sorted(names, key=order.__getitem__) if n in done]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--every", type=int, default=1, help="sweep every k-th OpInfo entry (default: all)")
    parser.add_argument("--ops", help="comma-separated globs over OpInfo names instead")
    parser.add_argument("--json", help="write the per-entry results here")
    parser.add_argument("--compare", help="results of an earlier run (JSON) to print ratios against")
    parser.add_argument("--out", help="splice the compiled section into this markdown file (docs/compatibility.md)")
    parser.add_argument(
        "--progress",
        help="JSON-lines file: run in this process, append each entry's result as it is done, skip entries "
        "already there (a resumed run retries first an entry the process died in, and counts it crashed if it "
        "dies again); with --report-only, "
        "only summarise it",
    )
    parser.add_argument("--report-only", action="store_true", help="with --progress: no sweeping, report the file")
    args = parser.parse_args()
    names = select_ops(args.ops)[:: max(1, args.every)]
    print(f"load before: {os.getloadavg()}; {len(names)} entries")
    t0 = time.perf_counter()
    if args.progress:
        results = _with_progress(names, args.progress, args.report_only)
    else:
        results = run_isolated(names, compiled=True, chunk_size=40)
    print(f"{len(results)} entries in {time.perf_counter() - t0:.0f} s; load after: {os.getloadavg()}")
    s = summarize_compiled(results)
    for line in summary_lines(s):
        print(line)
    for reason, _ in s.reasons:
        print("  ", reason)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump([r.to_json() for r in results], fh, indent=1)
    if args.out:
        with open(args.out, encoding="utf-8") as fh:
            document = fh.read()
        command = "python benchmarks/bench_compiled_sweep.py" + (f" --every {args.every}" if args.every > 1 else "")
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(splice(document, compiled_markdown(results, command)))
        print(f"wrote the compiled section of {args.out}")
    if args.compare:
        with open(args.compare, encoding="utf-8") as fh:
            old = summarize_compiled([CompiledResult.from_json(d) for d in json.load(fh)])
        rate = CompiledSummary.rate
        for what, a, b in (("forward", old.forward_entries, s.forward_entries),
                           ("backward", old.backward_entries, s.backward_entries)):  # fmt: skip
            print(f"{what}: before {rate(a):.2%} ({a[0]}/{a[1]}), after {rate(b):.2%} ({b[0]}/{b[1]}), "
                  f"ratio {rate(b) / max(rate(a), 1e-9):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
