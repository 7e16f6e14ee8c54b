"""Worker process of the zoo: ``python -m trn_notebook.zoo.worker [--bench]`` reads model names on stdin and
prints one ``RESULT <json>`` line per model (the protocol of :mod:`trn_notebook.compat.isolate`)."""

from __future__ import annotations

import os
import sys
import tempfile
import warnings


def main(argv: list[str]) -> None:
    """Run every named model's stages in this process, each in a fresh compile cache."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.simplefilter("ignore")
    from trn_notebook.compat.isolate import emit
    from trn_notebook.compiler.config import override

    from .specs import spec
    from .stages import run_model

    bench = "--bench" in argv
    for line in sys.stdin.read().splitlines():
        name = line.strip()
        if not name:
            continue
        with tempfile.TemporaryDirectory(prefix="trn-zoo-") as cache, override(cache_dir=cache):
            emit(run_model(spec(name), bench=bench).to_json())


if __name__ == "__main__":
    main(sys.argv[1:])
