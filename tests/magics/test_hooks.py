"""Shell hooks of ``%load_ext trn_notebook``: warnings name notebook cells, and unloading restores them."""

from __future__ import annotations

import warnings

import pytest
from IPython.testing import globalipapp

from trn_notebook.magics import hooks


@pytest.fixture
def ip():
    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "trn_notebook")
    yield shell


def test_a_warning_from_a_cell_names_the_cell_and_line(ip):
    ip.run_cell("import sys\n_fn = sys._getframe().f_code.co_filename")
    filename = ip.user_ns["_fn"]
    count = ip.compile._filename_map[filename]
    text = warnings.formatwarning("careful", UserWarning, filename, 2, "x = 2")
    assert text == f"cell [{count}] line 2: UserWarning: careful\n  x = 2\n"
    assert warnings.formatwarning("m", UserWarning, "/lib/x.py", 3, "y").startswith("/lib/x.py:3: UserWarning")


def test_unload_restores_the_previous_warning_format(ip):
    ours = warnings.formatwarning
    assert getattr(ours, "trn_shell", None) is ip
    ip.run_line_magic("unload_ext", "trn_notebook")
    try:
        assert getattr(warnings.formatwarning, "trn_shell", None) is None
    finally:
        ip.run_line_magic("load_ext", "trn_notebook")
    hooks.install_warning_format(ip)  # idempotent: still one wrapper deep
    assert getattr(warnings.formatwarning.trn_previous, "trn_shell", None) is None  # type: ignore[attr-defined]
