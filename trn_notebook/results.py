"""Moved to :mod:`trn_notebook.display.results` (issue 29: ``display/``).

This name stays for one release: ``trn_notebook.results`` *is* that module (the same object).
"""

from __future__ import annotations

import sys

from .display import results as _results

sys.modules[__name__] = _results
