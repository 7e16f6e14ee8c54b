"""Moved to :mod:`trn_notebook.facts.status` (issue 29); this name is that module, for one release."""

from __future__ import annotations

import sys

from ..facts import status as _moved

sys.modules[__name__] = _moved
