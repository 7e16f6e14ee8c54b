"""``python -m trn_notebook.zoo [--quick] [--models GLOBS] [--out docs/models.md] [--json FILE]``."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

from ..extras import MissingExtra
from .api import run_zoo
from .specs import SPECS
from .stages import ModelResult
from .table import summary_lines, to_markdown


def main(argv: list[str] | None = None) -> int:
    """Run the zoo, print pass rates per stage, optionally write the markdown table; exit 1 on a crash.

    Exits 2 with a message naming the extra to install when ``transformers`` is missing (before any work).
    """
    parser = argparse.ArgumentParser(prog="python -m trn_notebook.zoo", description=__doc__)
    parser.add_argument("--models", help="comma-separated globs over zoo model names, e.g. 'llama,gpt*'")
    parser.add_argument("--quick", action="store_true", help="the CI subset (6 architectures, all stages)")
    parser.add_argument("--out", help="write the markdown table here (e.g. docs/models.md)")
    parser.add_argument("--json", help="also write the raw per-model results as JSON here")
    parser.add_argument("--in-process", action="store_true", help="no worker subprocesses (not crash-safe)")
    parser.add_argument("--per-worker", type=int, default=1, help="models per worker process (default 1)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes at a time (default 1)")
    parser.add_argument("--from-json", metavar="FILES", help="no run: rebuild the table from saved --json results")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()

    def show(r) -> None:
        marks = " ".join(f"{k}={v[0]}" for k, v in r.stages.items())
        print(f"{r.name:12s} {marks}", flush=True)

    try:
        results = _load(args.from_json.split(",")) if args.from_json else _run(args, show, parser)
    except MissingExtra as exc:
        print(f"python -m trn_notebook.zoo: {exc}", file=sys.stderr)
        return 2
    _report(results, args, argv, t0)
    return 1 if any(r.crashed for r in results) else 0


def _load(paths: list[str]) -> list[ModelResult]:
    """Saved results, later files overriding earlier ones per model, in the zoo's order."""
    found: dict[str, ModelResult] = {}
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for data in json.load(fh):
                r = ModelResult.from_json(data)
                found[r.name] = r
    order = [s.name for s in SPECS]
    return sorted(found.values(), key=lambda r: order.index(r.name) if r.name in order else len(order))


def _run(args: argparse.Namespace, show, parser: argparse.ArgumentParser) -> list[ModelResult]:
    try:
        return run_zoo(
            args.models,
            args.quick,
            isolated=not args.in_process,
            chunk_size=max(1, args.per_worker),
            jobs=args.jobs,
            progress=show,
        )
    except ValueError as exc:
        parser.error(str(exc))


def _report(results: list[ModelResult], args: argparse.Namespace, argv: list[str] | None, t0: float) -> None:
    print(f"models: {len(results)}   crashes: {sum(bool(r.crashed) for r in results)}   "
          f"({time.perf_counter() - t0:.0f} s)")  # fmt: skip
    for line in summary_lines(results):
        print(line)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump([r.to_json() for r in results], fh, indent=1)
    if args.out:
        command = "python -m trn_notebook.zoo " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(to_markdown(results, command.strip()))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
