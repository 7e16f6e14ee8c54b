"""``trn_notebook.quickstart.run_notebook`` as a user calls it: with a ``str`` path as well as a ``Path``."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from trn_notebook.quickstart import run_notebook


@pytest.mark.slow
def test_run_notebook_takes_a_str_path(tmp_path: Path):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("import os\nprint(os.getcwd())"))
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    executed, seconds = run_notebook(str(path), timeout=120)  # AttributeError ('str' has no .parent) before
    out = executed.cells[0].outputs[0]["text"]  # type: ignore[attr-defined]
    assert Path(out.strip()).resolve() == tmp_path.resolve()  # ran in the notebook's own folder
    assert seconds > 0


def test_run_notebook_missing_file_says_so(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        run_notebook(str(tmp_path / "absent.ipynb"))
