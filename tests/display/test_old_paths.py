"""The display package's old import paths still work for one release, as the same modules (issue 29 item 6)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from trn_notebook.display import fallback, results
from trn_notebook.display import format as fmt

OLD_PATHS = [
    ("trn_notebook.presentation", fmt),
    ("trn_notebook.results", results),
    ("trn_notebook.widgets._html", fallback),
]


@pytest.mark.parametrize(("old", "new"), OLD_PATHS, ids=[o for o, _ in OLD_PATHS])
def test_old_import_path_is_the_moved_module(old, new):
    module = importlib.import_module(old)
    assert module is new
    assert module.fmt_s(0.0123) == "12.300 ms"


def test_a_fresh_interpreter_reads_old_names_from_the_old_paths():
    code = (
        "from trn_notebook.presentation import fmt_bytes, COMPILE_STAGES; "
        "from trn_notebook.results import Table; "
        "from trn_notebook.widgets._html import table, CATEGORY_COLOURS; "
        "print(fmt_bytes(1536), len(COMPILE_STAGES), Table.__module__, table.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1.50", "KiB", "6", "trn_notebook.display.results", "trn_notebook.display.fallback"]
