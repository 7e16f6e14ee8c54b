"""``python -m trn_notebook.zoo --dry [--models CARDS] [--tokens N] [--json FILE] [--out docs/models.md]``."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

from ..outfiles import write_text_atomic
from ..sweep_cli import saved_records
from .dry import CARDS, DRY_STAGES, DRY_TITLES, DryCard, DryWorkload, run_dry
from .dry_table import dry_markdown, splice


def dry_main(args: argparse.Namespace, argv: list[str] | None, parser: argparse.ArgumentParser) -> int:
    """Run (or with ``--from-json`` rebuild) the dry stage; write the JSON and splice the docs section.

    The JSON is rewritten after every stage, so an interrupted sweep keeps what it finished. Exit 1 when a
    stage failed, 2 without ``transformers``.
    """
    from ..extras import MissingExtra, require

    t0 = time.perf_counter()
    if args.from_json:
        cards = merge(args.from_json.split(","))
    else:
        try:
            require("transformers", "the model zoo")
        except MissingExtra as exc:
            print(f"python -m trn_notebook.zoo: {exc}", file=sys.stderr)
            return 2
        done: dict[str, DryCard] = {}

        def show(c: DryCard, stage: str) -> None:
            s = c.stages[stage]
            what = (
                s.detail
                if s.status != "pass"
                else f"step {s.step_s:.4g} s modeled, peak {s.peak_allocated / 2**30:.2f} GiB"
            )
            print(f"{c.name:14s} {DRY_TITLES[stage]:26s} {s.status}: {what} (wall {s.wall_s:.0f} s, RSS {s.rss_mb:.0f} MB)",
                  flush=True)  # fmt: skip
            if args.json:  # partial results survive an interrupted sweep
                done[c.name] = c
                write_text_atomic(args.json + ".partial", json.dumps([d.to_json() for d in done.values()], indent=1))

        try:
            work = DryWorkload(1, args.tokens, args.tokens)
            stages = tuple(args.stages.split(",")) if args.stages else DRY_STAGES
            cards = run_dry(args.models, stages=stages, work=work, progress=show)
        except ValueError as exc:
            parser.error(str(exc))
    print(f"cards: {len(cards)} ({time.perf_counter() - t0:.0f} s)")
    if args.json:  # with --from-json: the merged results
        write_text_atomic(args.json, json.dumps([c.to_json() for c in cards], indent=1))
        if not args.from_json and os.path.exists(args.json + ".partial"):
            os.remove(args.json + ".partial")
    if args.out:
        command = "python -m trn_notebook.zoo " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
        old = ""
        if os.path.exists(args.out):
            with open(args.out, encoding="utf-8") as fh:
                old = fh.read()
        write_text_atomic(args.out, splice(old, dry_markdown(cards, command.strip(), args.note)))
        print(f"wrote {args.out}")
    return 1 if any(s.status != "pass" for c in cards for s in c.stages.values()) else 0


def merge(paths: list[str]) -> list[DryCard]:
    """Saved dry results, later files overriding earlier ones stage by stage, in the cards' order."""
    found: dict[str, DryCard] = {}
    for data in saved_records(paths):
        c = DryCard.from_json(data)
        if c.name in found:
            found[c.name].stages |= c.stages
            found[c.name].params = found[c.name].params or c.params
        else:
            found[c.name] = c
    order = [c.name for c in CARDS]
    for c in found.values():
        c.stages = {s: c.stages[s] for s in DRY_STAGES if s in c.stages}
    return sorted(found.values(), key=lambda c: order.index(c.name) if c.name in order else len(order))
