"""The files the workshop notebooks write beside themselves are ignored by git (issue 29 item 8)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# save="x.md", --save x.json, export_chrome_trace("x.json"): the files a notebook writes by name
_WRITES = re.compile(r"""(?:save=\\?"|--save |export_chrome_trace\(\\?")([\w.-]+\.(?:md|json|json\.gz|html))""")


def _written() -> set[str]:
    names: set[str] = set()
    for nb in sorted((ROOT / "examples").glob("*.ipynb")):
        names |= set(_WRITES.findall(nb.read_text(encoding="utf-8")))
    return names


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_every_file_a_notebook_writes_is_ignored():
    names = _written()
    assert {"migration_report.md", "step_with_item.json"} <= names, names  # the pattern still finds them
    paths = [f"examples/{n}" for n in sorted(names)]
    done = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True, check=False)
    ignored = set(done.stdout.split())
    assert ignored == set(paths), f"not in .gitignore: {sorted(set(paths) - ignored)}"
