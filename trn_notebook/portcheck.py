"""Moved to :mod:`trn_notebook.migration.portcheck` (issue 29: the top level emptied into the layers).

This name stays for one release: ``trn_notebook.portcheck`` *is* that module (the same object, so
reading or setting ``trn_notebook.portcheck.MAX_FILE_BYTES`` acts on it).
"""

from __future__ import annotations

import sys

from .migration import portcheck as _portcheck

sys.modules[__name__] = _portcheck
