"""One "cell finished" event, computed once per cell, that every view subscribes to.

IPython calls :meth:`CellEvents.emit` after each cell (one ``post_run_cell`` hook, installed by
``%load_ext trn_notebook`` or by the first subscriber). It reads the session's state once —
:func:`trn_notebook.facts.status.state_snapshot`, cheap when nothing moved — and hands the same
:class:`CellFinished` to every subscriber: the status-bar comm, the dashboard, live memory views.
Subscribers are held weakly when they are bound methods, so a closed widget never keeps a hook alive;
a failing subscriber is logged and the others still run.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import locks as _locks
from .. import state as _state
from ..facts.status import state_snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CellFinished:
    """What every view learns after a cell: the status payload and whether the state moved."""

    payload: dict[str, Any]
    changed: bool
    count: int  # how many cells finished since the process started (1 for the first)


Subscriber = Callable[[CellFinished], object]


class CellEvents:
    """The subscribers of the cell-finished event and the one IPython hook that emits it."""

    def __init__(self) -> None:
        self._lock = _locks.make("leaf", "cell events")
        self._subs: list[Callable[[], Subscriber | None]] = []
        self._shells: weakref.WeakSet[Any] = weakref.WeakSet()
        self.count = 0
        self.last: CellFinished | None = None

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Call ``fn(event)`` after every cell; returns a function that unsubscribes. Bound methods are weak."""
        ref: Callable[[], Subscriber | None]
        if hasattr(fn, "__self__") and hasattr(fn, "__func__"):
            ref = weakref.WeakMethod(fn)  # type: ignore[arg-type]
        else:

            def ref() -> Subscriber:
                return fn

        with self._lock:
            self._subs.append(ref)
        self.install()

        def unsubscribe() -> None:
            with self._lock:
                if ref in self._subs:
                    self._subs.remove(ref)

        return unsubscribe

    def subscribers(self) -> int:
        """How many live subscribers there are."""
        with self._lock:
            return sum(1 for r in self._subs if r() is not None)

    def snapshot(self) -> CellFinished | None:
        """The last event emitted (None before the first cell or after a reset)."""
        return self.last

    def reset(self) -> None:
        """Forget the last event (subscribers and the IPython hook stay)."""
        self.last = None

    def emit(self, *_args: object) -> CellFinished:
        """Compute the state once and hand it to every live subscriber (the ``post_run_cell`` hook)."""
        try:
            payload, changed = state_snapshot()
        except Exception as exc:  # the subscribers still learn that a cell finished
            log.debug("trn-notebook state snapshot failed", exc_info=True)
            payload, changed = {"type": "error", "loaded": True, "message": f"{type(exc).__name__}: {exc}"}, True
        with self._lock:
            self.count += 1
            event = CellFinished(payload, changed, self.count)
            self.last = event
            self._subs = [r for r in self._subs if r() is not None]
            subs = [r() for r in self._subs]
        for fn in subs:
            if fn is None:
                continue
            try:
                fn(event)
            except Exception:  # one broken view must not print under every cell or starve the others
                log.warning("trn-notebook cell-finished subscriber %r failed", fn, exc_info=True)
        # A logged traceback keeps this frame alive: drop the strong references so closed views can go.
        subs.clear()
        fn = None
        return event

    def install(self, shell: Any = None) -> bool:
        """Register :meth:`emit` as the ``post_run_cell`` hook of ``shell`` (the running IPython) once."""
        if shell is None:
            try:
                from IPython import get_ipython
            except ImportError:
                return False
            shell = get_ipython()
        if shell is None or shell in self._shells:
            return shell is not None
        shell.events.register("post_run_cell", self.emit)
        self._shells.add(shell)
        return True

    def uninstall(self, shell: Any) -> None:
        """Remove the hook from ``shell``; harmless when it is not there."""
        if shell in self._shells:
            self._shells.discard(shell)
            try:
                shell.events.unregister("post_run_cell", self.emit)
            except ValueError:
                pass


cell_finished = CellEvents()
_state.register("cell_events", cell_finished)  # a reset forgets the last event; subscriptions stay
