"""Moved to :mod:`trn_notebook.facts.bundle` (issue 29); this name is that module, for one release."""

from __future__ import annotations

import sys

from ..facts import bundle as _moved

sys.modules[__name__] = _moved
