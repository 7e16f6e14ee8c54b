"""Fixtures of the magics tests: one IPython shell per module with ``%load_ext trn_notebook``.

Modules opt in to the per-test cleanup with ``pytestmark = pytest.mark.usefixtures("clean")``; modules that
define their own ``ip`` fixture (hooks, subcommands) override this one.
"""

from __future__ import annotations

import pytest
import torch
from IPython.testing import globalipapp

from trn_notebook.device import get_config, set_config
from trn_notebook.device.memory.runtime import get_chip, set_chip
from trn_notebook.magics import render


@pytest.fixture(scope="module")
def ip():
    shell = globalipapp.get_ipython()  # the module attribute: start_ipython() rebinds it after the first call
    shell.run_line_magic("load_ext", "trn_notebook")
    yield shell
    shell.run_line_magic("unload_ext", "trn_notebook")


@pytest.fixture
def clean(ip):
    render.prefer_widgets = False
    torch.set_default_device("cpu")  # whatever an earlier test module left behind
    config = get_config()
    chip = get_chip()
    ip.run_cell("import torch")
    yield
    render.prefer_widgets = True
    torch.set_default_device("cpu")
    set_config(**{f: getattr(config, f) for f in ("launch_blocking", "eager_fusion", "strict")})
    set_chip(chip.name)


def _compiler_or_skip():
    """The compiler package (always present: a failed import fails the test)."""
    import trn_notebook.compiler as compiler

    return compiler


@pytest.fixture
def compiler(ip):
    comp = _compiler_or_skip()
    from trn_notebook.session import clear_compiled_cells

    clear_compiled_cells()
    with comp.config.override(disable_cache=True):
        yield comp
    clear_compiled_cells()
