"""Every workshop notebook runs top to bottom in a real kernel, including its check-yourself cell.

With Debian's Chromium present the notebooks are run through JupyterLab's UI instead, by
``test_workshop_browser.py`` (same rules, ``tests/notebooks/workshop.py``); the nbclient run here
is the fallback without a browser, or when ``TRN_NOTEBOOKS_NBCLIENT=1`` asks for it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

from tests.browser_utils import CHROMIUM
from tests.notebooks.workshop import EXAMPLES, NOTEBOOKS, workshop_problems
from trn_notebook.quickstart import run_notebook, summary_text

BROWSER_RUNS_THEM = (
    CHROMIUM.exists()
    and importlib.util.find_spec("playwright") is not None
    and os.environ.get("TRN_NOTEBOOKS_NBCLIENT") != "1"
)


@pytest.mark.slow
@pytest.mark.skipif(
    BROWSER_RUNS_THEM,
    reason="run through JupyterLab in Chromium by tests/notebooks/test_workshop_browser.py "
    "(TRN_NOTEBOOKS_NBCLIENT=1 runs them here too)",
)
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom(name, tmp_path):
    path = tmp_path / name
    shutil.copy(EXAMPLES / name, path)  # run in a scratch folder: notebooks may write files beside themselves
    nb, _ = run_notebook(path, timeout=300)
    problems = workshop_problems(nb)
    assert not problems, f"{name}:\n" + "\n".join(problems)


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
