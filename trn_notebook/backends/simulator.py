"""Moved to :mod:`trn_notebook.facts.simulator` (issue 29); this name is that module, for one release."""

from __future__ import annotations

import sys

from ..facts import simulator as _moved

sys.modules[__name__] = _moved
