"""The README's code blocks marked ``<!-- runnable -->`` run exactly as written (issue 34 item 8).

A block is marked by an HTML comment ``<!-- runnable -->`` on the line before its fence (invisible when the
README is rendered). Python blocks run in a fresh interpreter, bash blocks under ``bash -e -o pipefail``,
each in an empty folder with its own HOME and compile cache, so they touch nothing of yours. Unmarked blocks
(the install commands, sketches such as the dry run's 70B model) are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- runnable -->"
_BLOCK = re.compile(r"^(?P<marker><!-- runnable -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)^```$", re.M | re.S)


def blocks() -> list[tuple[str, str]]:
    """``(language, code)`` of every marked block, in README order."""
    return [(m["lang"], m["body"]) for m in _BLOCK.finditer(README.read_text(encoding="utf-8")) if m["marker"]]


def test_the_readme_marks_runnable_blocks_and_only_fenced_ones():
    found = blocks()
    assert {lang for lang, _ in found} == {"python", "bash"}, found
    assert README.read_text(encoding="utf-8").count(MARKER) == len(found) + 1  # + the sentence naming the marker


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(blocks())))
def test_marked_block_runs_as_written(index, tmp_path):
    lang, code = blocks()[index]
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_NEURONX_", "TRN_NOTEBOOK_"))}
    bindir = str(Path(sys.executable).parent)  # the venv the README's install line filled
    env.update(
        HOME=str(home),
        PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}",
        TORCH_NEURONX_NEFF_CACHE_DIR=str(tmp_path / "neff"),
        OMP_NUM_THREADS="1",
    )
    cmd = [sys.executable, "-c", code] if lang == "python" else ["bash", "-e", "-o", "pipefail", "-c", code]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"README block {index} ({lang}) failed:\n{code}\n{done.stdout}\n{done.stderr}"
