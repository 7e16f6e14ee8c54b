"""Renamed :mod:`trn_notebook.facts` (issue 29: the read layer named for what it is).

This name stays for one release. ``trn_notebook.backends`` re-exports the read layer's public names, and each
old submodule path (``trn_notebook.backends.status``, ``.base``, ``.simulator``, ``.torchneuron``, ``.dynamo``,
``.facts``) *is* the new module (the same object, so state is never duplicated).
"""

from __future__ import annotations

from ..facts import (
    NA,
    NOT_MEASURED,
    Backend,
    SimulatorOnlyError,
    current,
    describe,
    refresh,
)


def __getattr__(name: str) -> object:
    from .. import facts

    return getattr(facts, name)


__all__ = [
    "NA",
    "NOT_MEASURED",
    "Backend",
    "SimulatorOnlyError",
    "current",
    "describe",
    "refresh",
]
