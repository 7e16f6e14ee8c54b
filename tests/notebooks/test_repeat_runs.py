"""The workshop survives what students do (issue 50): Run All twice, re-run any cell, restart on a warm cache.

One real kernel per notebook (nbclient), a compile cache of the test's own (cold on the first pass), and in order:

1. **Run All** — every cell, with the rules of a first run (``workshop_problems``: no error, stderr explained);
   this is also the nbclient top-to-bottom run of each notebook.
2. **Run All again, re-running one cell at a time**, same kernel: every code cell in notebook order, each
   followed by every check cell (a cell that prints ``all checks passed``), which must pass every time. This is
   Run All a second time (the same cells in the same order) and "re-run any cell, then the check" at once, for
   the price of one more Run All plus the check cells; 06 also re-runs its training cell after its snapshot,
   then the snapshot and its check, in that order.
3. **Restart the kernel and Run All** on the now warm cache.

A re-run cell may write to stderr only what its ``expected_stderr`` explains (a warning shown once per session
need not appear again). A failure names the pass, the cells run and the cell that broke.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.notebooks.workshop import EXAMPLES, NOTEBOOKS, PASSED, cell_errors, stderr_blocks, workshop_problems

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.slow


def _passed(cell: Any) -> bool:
    return any(PASSED in str(out.get("text", "")) for out in cell.get("outputs", []) if out.get("name") == "stdout")


def _problems(nb: Any, index: int, checks: list[int], ran_before: int | None) -> list[str]:
    """What is wrong with cell ``index`` after it ran again: an error, stderr it does not explain, a silent check.

    A block may be the late stderr of the cell run just before (the workshop rule, ``workshop.py``).
    """
    cell = nb.cells[index]
    expected = [str(s) for s in cell.metadata.get("expected_stderr", [])]
    if ran_before is not None:
        expected += [str(s) for s in nb.cells[ran_before].metadata.get("expected_stderr", [])]
    problems = [p.replace("cell [0]", f"cell [{index}]") for p in cell_errors({"cells": [cell]})]
    problems += [
        f"cell [{index}]: unexplained stderr {block[:300]!r}"
        for block in stderr_blocks(cell)
        if not any(s in block for s in expected)
    ]
    if index in checks and not _passed(cell):
        problems.append(f"cell [{index}]: the check cell did not print {PASSED!r}")
    return problems


def _run(client: Any, nb: Any, indices: list[int], checks: list[int]) -> list[str]:
    """Run ``indices`` in order; stop at the first cell with a problem and return its problems."""
    before = None
    for index in indices:
        try:
            client.execute_cell(nb.cells[index], index)
        except nbclient.exceptions.CellExecutionError:
            pass  # the cell's error output is reported by _problems
        problems = _problems(nb, index, checks, before)
        if problems:
            return problems
        before = index
    return []


def _code_cells(nb: Any) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]


def _sequences(name: str, nb: Any, checks: list[int]) -> list[list[int]]:
    """Pass 3's re-runs: each code cell alone (then the checks), plus the notebook's own risky orders."""
    sequences = [[i] for i in _code_cells(nb) if i not in checks]
    if name == "06_memory.ipynb":
        train = next(i for i, c in enumerate(nb.cells) if 'phase("steady")' in c.source)
        snapshot = next(i for i, c in enumerate(nb.cells) if "%trn memory --snapshot" in c.source)
        sequences.append([train, snapshot])  # the training cell after the snapshot, then the snapshot again
    return sequences


ODD_LESSONS = NOTEBOOKS[0::2]  # 01, 03, … here; 02, 04, … in test_repeat_runs_even.py: one file per xdist worker


@pytest.mark.parametrize("name", ODD_LESSONS)
def test_checks_hold_after_run_all_twice_any_re_run_and_a_restart(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repeat_runs(name, tmp_path, monkeypatch)


def repeat_runs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The three passes of the module docstring on notebook ``name``; fails naming the pass and the cells."""
    shutil.copy(EXAMPLES / name, tmp_path / name)  # notebooks may write files beside themselves
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff-cache"))  # cold, then warm
    nb = nbformat.read(tmp_path / name, as_version=4)
    checks = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and PASSED in c.source]
    assert checks, f"{name} has no check cell"
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    everything = _code_cells(nb)
    failures: list[str] = []
    with client.setup_kernel():
        for i in everything:
            client.execute_cell(nb.cells[i], i)
        first = workshop_problems(nb)
        assert not first, f"{name} (pass 1, Run All in a fresh kernel):\n" + "\n".join(first)
        for sequence in _sequences(name, nb, checks):
            if problems := _run(client, nb, [*sequence, *checks], checks):
                failures.append(
                    f"pass 2 (Run All again: re-ran cells {sequence}, then the checks {checks}): " + "; ".join(problems)
                )
    with client.setup_kernel():  # a restarted kernel: fresh process, the cache on disk from the passes above
        if problems := _run(client, nb, everything, checks):
            failures.append("pass 3 (restart, Run All on a warm cache): " + "; ".join(problems))
    assert not failures, f"{name}:\n" + "\n".join(failures)
