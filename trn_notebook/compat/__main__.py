"""``python -m trn_notebook.compat [--ops PATTERN] [--quick] [--out docs/compatibility.md]``; with ``--compiled``
[--every K] the compiled sweep, whose ``--out`` replaces (or appends) the compiled section of that file and keeps
the eager table; the eager sweep's ``--out`` keeps the file's compiled section likewise."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from typing import Any

from ..extras import MissingExtra
from ..outfiles import write_text_atomic
from ..sweep_cli import sweep_parser
from .api import sweep
from .table import summarize, to_markdown


def main(argv: list[str] | None = None) -> int:
    """Run the sweep, print the figures, optionally write the markdown table; exit 1 on an interpreter crash.

    Exits 2 with a message naming the extra to install when ``expecttest`` is missing (before any work).
    """
    parser = sweep_parser(
        "python -m trn_notebook.compat",
        __doc__,
        select=("--ops", "comma-separated globs over OpInfo names, e.g. 'add,nn.functional.*'"),
        quick_help="two samples per dtype; a representative op subset",
        out_example="docs/compatibility.md",
    )
    parser.add_argument("--compiled", action="store_true", help='the compiled sweep (torch.compile(backend="neuron"))')
    parser.add_argument("--every", type=int, default=1, help="with --compiled: every k-th selected entry")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    if args.compiled:
        return _compiled(args, parser, argv, t0)
    results = _results(parser, sweep, args.ops, args.quick, isolated=not args.in_process)
    if results is None:
        return 2
    s = summarize(results)
    print(f"OpInfo entries: {s.ops}   crashes: {s.crashes}   ({time.perf_counter() - t0:.0f} s)")
    print(f"forward float32:  {s.forward_passed}/{s.forward_total} samples = {s.forward_rate:.2%}")
    print(f"backward float32: {s.backward_passed}/{s.backward_total} samples = {s.backward_rate:.2%}")
    print("failing float32 forward samples by op and reason:")
    for reason, n in s.reasons[:40]:
        print(f"  {n:6d}  {reason}")
    for title, reasons in (("backward", s.backward_reasons), ("out= / in-place / print", s.variant_reasons)):
        print(f"failing float32 {title} samples:")
        for reason, n in reasons[:40]:
            print(f"  {n:6d}  {reason}")
    _write_outputs(args, argv, results, to_markdown)
    return 1 if s.crashes else 0


def _results(parser: argparse.ArgumentParser, run: Any, *args: Any, **kwargs: Any) -> Any:
    """``run(*args, **kwargs)``; a bad pattern exits through ``parser.error``; a missing extra prints which to
    install and returns ``None`` (exit status 2)."""
    try:
        return run(*args, **kwargs)
    except ValueError as exc:
        parser.error(str(exc))
    except MissingExtra as exc:
        print(f"python -m trn_notebook.compat: {exc}", file=sys.stderr)
        return None


def _compiled(args: argparse.Namespace, parser: argparse.ArgumentParser, argv: list[str] | None, t0: float) -> int:
    """``--compiled``: print the compiled coverage and its failing entries; write JSON / markdown if asked."""
    from .api import compiled_sweep
    from .compiled_table import compiled_markdown, summarize_compiled, summary_lines

    results = _results(parser, compiled_sweep, args.ops, args.quick, args.every, isolated=not args.in_process)
    if results is None:
        return 2
    s = summarize_compiled(results)
    print(f"({time.perf_counter() - t0:.0f} s)")
    for line in summary_lines(s):
        print(line)
    for reason, _ in s.reasons:
        print(f"  {reason}")
    _write_outputs(args, argv, results, compiled_markdown, compiled=True)
    return 0


def _write_outputs(
    args: argparse.Namespace, argv: list[str] | None, results: Any, markdown: Any, compiled: bool = False
) -> None:
    """Write ``--json`` (every result) and ``--out`` (``markdown(results, command)``) when asked: the compiled
    sweep's section is spliced into the file (the eager table kept), the eager table keeps the file's compiled
    section."""
    from .compiled_table import section_of, splice

    if args.json:
        write_text_atomic(args.json, json.dumps([r.to_json() for r in results], indent=1))
    if args.out:
        command = "python -m trn_notebook.compat " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
        try:
            with open(args.out, encoding="utf-8") as fh:
                existing = fh.read()
        except FileNotFoundError:
            existing = ""
        text = markdown(results, command.strip())
        if compiled:
            text = splice(existing, text) if existing else text
        elif section_of(existing):
            text = text.rstrip("\n") + "\n\n" + section_of(existing)
        write_text_atomic(args.out, text)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
