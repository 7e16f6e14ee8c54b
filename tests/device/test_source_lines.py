"""The standard library is told from installed packages by sysconfig's paths, also where site-packages sits
inside the standard library's folder (no virtual environment: conda, the official Python image, pyenv).
Probe: a prefix of ``threading.__file__``'s folder took every third-party frame there for the standard
library, so every view's "source line" moved."""

from __future__ import annotations

import json
import os

import transformers

from trn_notebook.device import source_lines
from trn_notebook.device.source_lines import is_stdlib_file, is_user_file, library_dirs

PYENV = {  # sysconfig.get_paths() of a pyenv Python without a venv
    "stdlib": "/home/u/.pyenv/versions/3.12.1/lib/python3.12",
    "platstdlib": "/home/u/.pyenv/versions/3.12.1/lib/python3.12",
    "purelib": "/home/u/.pyenv/versions/3.12.1/lib/python3.12/site-packages",
    "platlib": "/home/u/.pyenv/versions/3.12.1/lib/python3.12/site-packages",
}


def test_without_a_venv_site_packages_under_the_stdlib_is_not_the_stdlib():
    dirs = library_dirs(PYENV)
    assert is_stdlib_file("/home/u/.pyenv/versions/3.12.1/lib/python3.12/json/decoder.py", dirs)
    assert not is_stdlib_file("/home/u/.pyenv/versions/3.12.1/lib/python3.12/site-packages/transformers/x.py", dirs)
    assert not is_stdlib_file("/home/u/project/train.py", dirs)


def test_the_running_python_tells_the_stdlib_from_installed_packages():
    assert is_stdlib_file(json.__file__) and not is_user_file(json.__file__)
    assert not is_stdlib_file(transformers.__file__) and is_user_file(transformers.__file__)
    assert is_user_file(os.path.abspath(__file__))
    assert source_lines.STDLIB_DIRS and source_lines.SITE_DIRS
