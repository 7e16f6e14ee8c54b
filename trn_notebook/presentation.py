"""Moved to :mod:`trn_notebook.display.format` (issue 29: ``display/``, one formatter).

This name stays for one release: ``trn_notebook.presentation`` *is* that module (the same object).
"""

from __future__ import annotations

import sys

from .display import format as _format

sys.modules[__name__] = _format
