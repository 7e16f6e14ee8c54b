"""Worker of the zoo's dry stage: ``python -m trn_notebook.zoo.dry_worker BATCH TOKENS CONTEXT`` reads
``card<TAB>stage`` lines on stdin and prints one ``RESULT <json>`` line each (:mod:`trn_notebook.compat.isolate`)."""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from dataclasses import asdict


def main(argv: list[str]) -> None:
    """Run each named stage in this process, in a fresh compile cache."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.simplefilter("ignore")
    from trn_notebook.compat.isolate import emit
    from trn_notebook.compiler.config import override

    from .dry import DryWorkload, card, run_stage

    work = DryWorkload(*(int(a) for a in argv[:3]))
    for line in sys.stdin.read().splitlines():
        if not line.strip():
            continue
        name, stage = line.strip().split("\t")
        with tempfile.TemporaryDirectory(prefix="trn-dry-") as cache, override(cache_dir=cache):
            figures, params = run_stage(card(name), stage, work)
        emit({"card": name, "params": params, "stage": asdict(figures)})


if __name__ == "__main__":
    main(sys.argv[1:])
