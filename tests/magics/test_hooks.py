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


def test_an_op_called_from_an_installed_package_names_its_file_from_the_package(ip, tmp_path, monkeypatch):
    """Issue 30: 09's source column showed /…/site-packages/transformers/… clipped before the package's name."""
    import importlib

    from trn_notebook.device.placement import placement_log

    package = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "trn_pkg_probe"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "ops.py").write_text("import torch\n\n\ndef run(x):\n    return torch.linalg.inv(x)\n")
    monkeypatch.syspath_prepend(str(package.parent))
    ops = importlib.import_module("trn_pkg_probe.ops")
    placement_log.reset()
    ops.run(__import__("torch").eye(3, device="neuron"))
    sources = {e.source for e in placement_log.snapshot().values()}
    assert "trn_pkg_probe/ops.py:5" in sources, sources
    assert not any("site-packages" in s for s in sources), sources
