"""How the workshop notebooks are stored, and the quickstart's summary.

Every notebook runs in a real kernel in ``test_repeat_runs.py`` (Run All, every cell re-run with the check
cells after it, a restart on a warm cache) and through JupyterLab in Chromium in ``test_workshop_browser.py``;
both apply the same rules (``tests/notebooks/workshop.py``).
"""

from __future__ import annotations

import shutil

import pytest

from tests.notebooks.workshop import EXAMPLES, NOTEBOOKS
from trn_notebook.quickstart import run_notebook, summary_text


def test_notebooks_are_stored_without_outputs():
    import nbformat

    assert len(NOTEBOOKS) >= 9
    for name in NOTEBOOKS:
        nb = nbformat.read(EXAMPLES / name, as_version=4)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), name
        assert nb.cells[0].cell_type == "markdown" and "What you will learn" in nb.cells[0].source
        assert "Check yourself" in "".join(c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.slow
def test_quickstart_prints_its_summary(tmp_path):
    path = tmp_path / "01_quickstart.ipynb"
    shutil.copy(EXAMPLES / "01_quickstart.ipynb", path)
    nb, _ = run_notebook(path)
    text = summary_text(nb)
    assert "op calls by placement" in text and "quickstart: all checks passed" in text
