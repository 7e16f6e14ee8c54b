"""A lock whose critical sections a finalizer never enters (issue 48: nothing hangs).

Weakref callbacks and ``weakref.finalize`` of dying storages run wherever the garbage collector runs — at any
allocation of any thread, under any lock, in the middle of a section. A :class:`SectionedLock` gives its owner
(the caching allocator, real or dry) one reentrant lock held as *sections*, and
:meth:`SectionedLock.release_from_finalizer` for those callbacks: it never waits for the lock, and a release that
cannot run now waits in a queue until the running section ends. The lock order is in ``trn_notebook/locks.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ... import locks as _locks


class Section:
    """``with owner.section:`` — the owner's lock held as one critical section.

    A storage that dies while a section runs (a weakref callback, run by the garbage collector at any
    allocation, or by a reference dropped inside the section) is not released in the middle of it: its
    release waits in a queue and runs when the section ends (:meth:`SectionedLock.release_from_finalizer`).
    A section that starts with releases queued (a callback that fired while another thread held the lock)
    runs them first, so every figure read inside a section counts them.
    """

    __slots__ = ("_a",)

    def __init__(self, owner: SectionedLock) -> None:
        self._a = owner

    def __enter__(self) -> None:
        a = self._a
        a.lock.acquire()
        if a._dying and not a._busy:
            a._drain_locked()
        a._busy += 1

    def __exit__(self, *exc: object) -> None:
        a = self._a
        a._busy -= 1
        try:
            if a._dying and not a._busy:
                a._drain_locked()
        finally:
            a.lock.release()


class SectionedLock:
    """One reentrant lock of rank ``rank``, held as :class:`Section` s (``with self.section:``; a hot method may
    inline one: acquire, ``_busy += 1``, body, ``_busy -= 1``, drain when ``_dying`` and not ``_busy``)."""

    def __init__(self, rank: str, label: str) -> None:
        self.lock = _locks.make(rank, label, reentrant=True)
        self._busy = 0  # sections running (all of one thread: the one holding the lock)
        self._dying: deque[tuple[Callable[..., None], tuple[object, ...]]] = deque()
        self.section = Section(self)

    def release_from_finalizer(self, release: Callable[..., None], *args: object) -> None:
        """Run ``release(*args)`` — a dying storage's release, which frees its block — from a weakref
        callback or finalizer, which the garbage collector may run at any allocation of any thread.

        Never waits for a lock and never runs inside a section: at once when no section runs and the lock is
        free (the common case: a tensor dropped by the user's code), else queued and run when the section
        that holds the lock ends, or when the next one starts. Raises nothing a collector would swallow:
        ``release`` itself must not raise.
        """
        if not self._busy and self.lock.acquire(blocking=False):
            try:
                if not self._busy:  # no section of this thread runs either: release now (queued ones first)
                    if self._dying:
                        self._drain_locked()
                    self._busy += 1
                    try:
                        release(*args)
                    finally:
                        self._busy -= 1
                    if self._dying:  # released by what ``release`` dropped
                        self._drain_locked()
                    return
            finally:
                self.lock.release()
        # a section runs: this thread's (interrupted by the collector) or another thread's; it runs this at its end
        self._dying.append((release, args))

    def _drain_locked(self) -> None:
        """Run the queued releases (the caller holds the lock and no section of it runs)."""
        self._busy += 1
        try:
            while self._dying:
                release, args = self._dying.popleft()
                release(*args)
        finally:
            self._busy -= 1
