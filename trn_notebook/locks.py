"""Every lock of the package, and the one order they are taken in (issue 48).

A thread that holds a lock may take only a lock of a **later rank** in :data:`ORDER` — or, for a
reentrant lock, the same lock again. Two threads that both follow the order cannot deadlock. Each lock
of the package is made here by :func:`make`, named by its rank; the order is written down once, here,
and in ``docs/ARCHITECTURE.md`` ("Locks").

:data:`ACCOUNTING` is the one lock of the device's books: the clocks (and their event timeline), the
placement log and the eager records folded into both. One lock for the three means a fold — which a
reader of any of them may start while a caller already holds the lock — never takes a second lock and
never waits on itself; it is reentrant for exactly that case.

With ``TRN_NOTEBOOK_LOCK_CHECK=1`` in the environment when the package is imported (the test suite sets
it), every lock checks the order as it is taken and raises :class:`LockOrderError` — naming both locks —
instead of deadlocking: taking an earlier-ranked lock, a second lock of rank ``leaf``, or a
non-reentrant lock this thread already holds. A non-blocking attempt is not checked (it cannot wait).

Finalizers (weakref callbacks of dying storages) run wherever the garbage collector runs, under any lock:
they take no lock by waiting; the allocator runs their releases between its sections
(``CachingAllocator.release_from_finalizer``). Without it :func:`make` returns plain ``threading`` locks:
no cost on the op path.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from . import envvars

ORDER: tuple[str, ...] = (
    "device_registration",  # device/registration.py: registering the device (once; runs the self-test's ops)
    "backend_registration",  # compiler/backend.py, distributed/backend.py: registering the backends (once)
    "attention_trace",  # compiler/attention.py: held while AOT Autograd traces with the flash kernel patched in
    "widget",  # widgets/memory.py: a widget's refresh (reads the allocator and the clocks)
    "runtime",  # device/memory/runtime.py: live storages and their host bytes (resizing a storage)
    "profiler",  # profiling/recorder.py: a profiler session starting or stopping (sets the clocks' observer)
    "memory_history",  # profiling/memory.py: starting/stopping memory history (sets the allocator's observer)
    "allocator",  # device/memory/allocator.py: a caching allocator, real or dry (its observer runs under it, takes no lock)
    "accounting",  # ACCOUNTING: clocks + event timeline + placement log + eager records (observer takes none)
    "leaf",  # every other lock: nothing else is taken while one is held
)
"""The ranks, earliest first: a thread holding a lock of one rank takes only locks of later ranks."""

_RANK = {name: i for i, name in enumerate(ORDER)}

CHECKING = envvars.flag("TRN_NOTEBOOK_LOCK_CHECK")
"""Whether locks check the order as they are taken (read once, at import)."""


class LockOrderError(RuntimeError):
    """A lock taken against :data:`ORDER`: without the check this thread could deadlock here."""


_held = threading.local()


def _stack() -> list[CheckedLock]:
    stack: list[CheckedLock] | None = getattr(_held, "stack", None)
    if stack is None:
        stack = _held.stack = []
    return stack


class CheckedLock:
    """A lock that checks :data:`ORDER` on every acquire (only made with ``TRN_NOTEBOOK_LOCK_CHECK=1``)."""

    def __init__(self, rank: str, label: str, reentrant: bool) -> None:
        self.rank = rank
        self.label = label
        self.reentrant = reentrant
        self._lock: Any = threading.RLock() if reentrant else threading.Lock()

    def __repr__(self) -> str:
        return f"<lock {self.label!r} rank {self.rank!r}{' reentrant' if self.reentrant else ''}>"

    def _check(self) -> None:
        stack = _stack()
        if self in stack:
            if self.reentrant:
                return
            raise LockOrderError(f"{self!r} taken again by the thread that holds it: this would deadlock")
        if not stack:
            return
        top = max(stack, key=lambda lk: _RANK[lk.rank])
        mine, theirs = _RANK[self.rank], _RANK[top.rank]
        if mine <= theirs:  # an earlier rank, or a second lock of the same rank (two leaves, two allocators)
            raise LockOrderError(
                f"{self!r} taken while holding {top!r}: against the lock order "
                f"({' -> '.join(ORDER)}; trn_notebook/locks.py)"
            )

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock after checking the order; raises :class:`LockOrderError` when it is broken.

        A non-blocking attempt (``blocking=False``) is not checked: it never waits, so it cannot deadlock
        (a storage's finalizer tries the allocator's lock so, whatever its thread holds)."""
        if blocking:
            self._check()
        ok = bool(self._lock.acquire(blocking, timeout))
        if ok:
            _stack().append(self)
        return ok

    def release(self) -> None:
        """Release the lock (its latest hold by this thread)."""
        stack = _stack()
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is self:
                del stack[i]
                break
        self._lock.release()

    def locked(self) -> bool:
        """Whether any thread holds the lock."""
        if self.reentrant:
            if self._lock.acquire(blocking=False):
                self._lock.release()
                return False
            return True
        return bool(self._lock.locked())

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, tp: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def make(rank: str, label: str, *, reentrant: bool = False) -> Any:
    """A new lock of rank ``rank`` (one of :data:`ORDER`), named ``label`` in errors.

    Returns a plain ``threading.Lock``/``RLock``, or a :class:`CheckedLock` when the order is checked.
    Raises ``ValueError`` for a rank not in :data:`ORDER`.
    """
    if rank not in _RANK:
        raise ValueError(f"unknown lock rank {rank!r}: one of {', '.join(ORDER)}")
    if CHECKING:
        return CheckedLock(rank, label, reentrant)
    return threading.RLock() if reentrant else threading.Lock()


def held() -> list[str]:
    """The labels of the checked locks this thread holds, oldest first (empty when not checking)."""
    return [lk.label for lk in getattr(_held, "stack", ())]


ACCOUNTING = make("accounting", "device accounting (clocks, timeline, placement log, eager records)", reentrant=True)
"""The lock of the device's books; see the module docstring."""
