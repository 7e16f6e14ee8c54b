"""Compile progress events for live displays (the magics' progress line).

Listeners are called as ``fn(stage, elapsed_s, graph_name)`` when each stage starts — ``"capture"``,
``"forward/backward"``, ``"lower"``, ``"passes"``, ``"codegen"``, ``"cache write"`` — and with
``"done"`` at the end of a graph. A listener that raises is dropped from this event and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .. import locks as _locks
from .. import state as _state

log = logging.getLogger("trn_notebook.compiler")

Listener = Callable[[str, float, str], None]
STAGES = ("capture", "forward/backward", "lower", "passes", "codegen", "cache write", "done")

_lock = _locks.make("leaf", "compile progress")
_listeners: list[Listener] = []
_state.register("progress_listeners", _state.Globals(__name__, "_listeners"), reset=False)  # subscriptions


def add_listener(fn: Listener) -> None:
    """Call ``fn(stage, elapsed_s, graph_name)`` on every compile stage (idempotent per function)."""
    with _lock:
        if fn not in _listeners:
            _listeners.append(fn)


def remove_listener(fn: Listener) -> None:
    """Stop calling ``fn``; a function never added is ignored."""
    with _lock:
        if fn in _listeners:
            _listeners.remove(fn)


def has_listeners() -> bool:
    """True when someone listens (callers skip building events otherwise)."""
    return bool(_listeners)


def emit(stage: str, elapsed_s: float, graph_name: str) -> None:
    """Notify every listener; errors in listeners are logged, never raised into the compile."""
    for fn in list(_listeners):
        try:
            fn(stage, elapsed_s, graph_name)
        except Exception:  # a display must never break a compile
            log.exception("compile progress listener %r failed", fn)
