"""Moved to :mod:`trn_notebook.facts.base` (issue 29); this name is that module, for one release."""

from __future__ import annotations

import sys

from ..facts import base as _moved

sys.modules[__name__] = _moved
