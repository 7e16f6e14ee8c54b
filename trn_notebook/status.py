"""Moved (issue 29 item 1): the status figures are the read layer's, :mod:`trn_notebook.facts.status`;
the ``%trn status`` card is :func:`trn_notebook.session.status_card.status`. This name stays for one
release and re-exports both (read-only: patch the new modules, not this one)."""

from __future__ import annotations

from .facts.status import (
    StatusError,
    StatusPayload,
    current_device,
    state_snapshot,
    status_payload,
    status_strings,
)
from .session.status_card import status

__all__ = [
    "StatusError",
    "StatusPayload",
    "current_device",
    "state_snapshot",
    "status",
    "status_payload",
    "status_strings",
]
