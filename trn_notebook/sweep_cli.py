"""What the sweep commands (``python -m trn_notebook.compat``, ``python -m trn_notebook.zoo``) share.

Their common options (a selection by glob, ``--quick``, ``--out``, ``--json``, ``--in-process``) and the
reading of saved ``--json`` results, so both commands spell and read them the same way.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any


def sweep_parser(
    prog: str, description: str | None, select: tuple[str, str], quick_help: str, out_example: str
) -> argparse.ArgumentParser:
    """A parser with the options every sweep takes: ``select`` (an option such as ``--ops`` and its help), ``--quick``, ``--out``, ``--json``,
    ``--in-process``; the command adds its own after."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(select[0], help=select[1])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--out", help=f"write the markdown table here (e.g. {out_example})")
    parser.add_argument("--json", help="also write the raw results as JSON here")
    parser.add_argument("--in-process", action="store_true", help="no worker subprocesses (faster, not crash-safe)")
    return parser


def saved_records(paths: list[str]) -> Iterator[dict[str, Any]]:
    """Every record of the saved ``--json`` files, file by file in the order given.

    Raises ``OSError`` for a file that cannot be read and ``json.JSONDecodeError`` for one that is not JSON.
    """
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            yield from json.load(fh)
