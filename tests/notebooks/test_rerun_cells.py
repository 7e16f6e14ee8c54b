"""A student re-runs a cell: the check cells still hold (issue 30, item 1: "after re-running any cell").

Each notebook here is run top to bottom once by a real kernel (nbclient, a fresh compile cache), then,
in the same kernel, every code cell is run again on its own, each followed by every check cell (a cell
that prints ``all checks passed``). Each check cell must pass again, and a re-run cell may write to
stderr only what its ``expected_stderr`` explains (``tests/notebooks/workshop.py``; a warning shown once
per session need not appear again). 06 also re-runs its training cell *after* the snapshot and then the
snapshot and its owner check, in order: the owner table must count the rebuilt model only.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.notebooks.workshop import EXAMPLES, PASSED, cell_errors, stderr_blocks, workshop_problems

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.slow

NOTEBOOKS = ["04_shapes_and_buckets.ipynb", "06_memory.ipynb"]


def _passed(cell: Any) -> bool:
    return any(PASSED in str(out.get("text", "")) for out in cell.get("outputs", []) if out.get("name") == "stdout")


def _problems(nb: Any, index: int) -> list[str]:
    """What is wrong with cell ``index`` after it was run again: an error, or stderr it does not explain."""
    cell = nb.cells[index]
    expected = [str(s) for s in cell.metadata.get("expected_stderr", [])]
    problems = [p.replace("cell [0]", f"cell [{index}]") for p in cell_errors({"cells": [cell]})]
    problems += [
        f"cell [{index}]: unexplained stderr {block[:300]!r}"
        for block in stderr_blocks(cell)
        if not any(s in block for s in expected)
    ]
    return problems


def _check_cells(nb: Any) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and PASSED in c.source]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_check_cell_holds_after_re_running_any_cell(name: str, tmp_path: Path, monkeypatch: Any) -> None:
    shutil.copy(EXAMPLES / name, tmp_path / name)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff-cache"))  # a cold first pass
    nb = nbformat.read(tmp_path / name, as_version=4)
    checks = _check_cells(nb)
    assert checks, f"{name} has no check cell"
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    sequences = [[i] for i, c in enumerate(nb.cells) if c.cell_type == "code" and i not in checks]
    if name == "06_memory.ipynb":
        train = next(i for i, c in enumerate(nb.cells) if 'phase("steady")' in c.source)
        snapshot = next(i for i, c in enumerate(nb.cells) if "%trn memory --snapshot" in c.source)
        sequences.append([train, snapshot])  # the training cell after the snapshot, then the snapshot again
    failures: list[str] = []
    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            client.execute_cell(cell, i)
        first = workshop_problems(nb)
        assert not first, f"{name} (first run):\n" + "\n".join(first)
        for sequence in sequences:
            for index in [*sequence, *checks]:
                try:
                    client.execute_cell(nb.cells[index], index)
                except nbclient.exceptions.CellExecutionError:
                    pass  # the cell's error output is reported below
                problems = _problems(nb, index)
                if index in checks and not _passed(nb.cells[index]):
                    problems.append(f"cell [{index}]: the check cell did not print {PASSED!r}")
                if problems:
                    failures.append(f"re-ran {sequence}: " + "; ".join(problems))
                    break
    assert not failures, f"{name}:\n" + "\n".join(failures)
