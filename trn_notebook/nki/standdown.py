"""The real NKI wins: if ``nki`` or ``neuronxcc.nki`` is importable, trn_notebook's kernels stand down."""

from __future__ import annotations

import importlib
import importlib.util
import logging
from types import ModuleType

from .. import envvars

log = logging.getLogger("trn_notebook.nki")


def _find(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a missing parent package of a dotted name
        return False


def real_nki() -> ModuleType | None:
    """The real NKI package when installed (``nki``, else ``neuronxcc.nki``), else ``None``.

    ``TRN_NOTEBOOK_FORCE_NKI_SIM=1`` keeps the simulator even when the real package is present.
    """
    if envvars.flag("TRN_NOTEBOOK_FORCE_NKI_SIM"):
        return None
    for name in ("nki", "neuronxcc.nki"):
        if _find(name):
            module = importlib.import_module(name)
            if hasattr(module, "jit") and hasattr(module, "language"):
                return module
    return None
