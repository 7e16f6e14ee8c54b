"""Moved to :mod:`trn_notebook.display.fallback` (issue 29: ``display/``).

This name stays for one release: ``trn_notebook.widgets._html`` *is* that module (the same object).
"""

from __future__ import annotations

import sys

from ..display import fallback as _fallback

sys.modules[__name__] = _fallback
