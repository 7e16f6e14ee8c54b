"""A dying storage is released wherever the garbage collector runs (issue 48: nothing hangs).

Weakref callbacks of device storages run at any allocation of any thread — under a leaf lock, inside the
allocator's own section, while another thread holds the allocator. Each case below ran the release against the
lock order (a ``LockOrderError`` the collector swallowed, seen in every suite run), in the middle of a section,
or waiting on the lock (a deadlock when the holder waits for this thread). The release is now run by
``CachingAllocator.release_from_finalizer``: at once when nothing runs, else when the running section ends.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator

import pytest
import torch

import trn_notebook
from trn_notebook import locks
from trn_notebook.device.memory.runtime import allocator


class _Cycle:
    """A tensor only the cyclic collector can free (a self-reference keeps its refcount above zero)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor
        self.me = self


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """What a finalizer raised (the collector swallows it and calls ``sys.unraisablehook``)."""
    seen: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(f"{u.exc_type.__name__}: {u.exc_value}"))
    gc.collect()
    seen.clear()
    yield seen


def _garbage(nbytes: int = 4096) -> None:
    _Cycle(torch.empty(nbytes, dtype=torch.uint8, device="neuron"))


def test_a_storage_collected_under_a_leaf_lock_is_released_at_once(fresh_device, unraisable) -> None:
    assert locks.CHECKING
    before = allocator.counters.allocated
    _garbage()
    assert allocator.counters.allocated > before
    leaf = locks.make("leaf", "a leaf the user's thread holds")
    with gc_disabled(), leaf:
        gc.collect()  # the callback runs here, under the leaf lock
        assert allocator.counters.allocated == before  # released at once: nothing else held the allocator
    assert unraisable == []


def test_a_storage_collected_inside_an_allocator_section_is_released_when_it_ends(fresh_device, unraisable) -> None:
    before = allocator.counters.allocated
    _garbage()
    held = allocator.counters.allocated
    with gc_disabled(), allocator.section:
        gc.collect()  # as if the collector ran in the middle of a malloc
        assert allocator.counters.allocated == held, "a block was freed in the middle of a section"
    assert allocator.counters.allocated == before
    allocator.check_invariants()
    assert unraisable == []


def test_a_storage_dropped_while_another_thread_holds_the_allocator_does_not_wait(fresh_device, unraisable) -> None:
    """The holder waits for this thread: had the release waited for the lock, neither would ever go on."""
    before = allocator.counters.allocated
    t = torch.empty(4096, dtype=torch.uint8, device="neuron")
    holding, dropped = threading.Event(), threading.Event()

    def holder() -> None:
        with allocator.section:
            holding.set()
            assert dropped.wait(30), "the other thread never came back from dropping its tensor"

    thread = threading.Thread(target=holder, daemon=True)
    thread.start()
    assert holding.wait(30)
    del t  # the storage dies now, on this thread, while the other one holds the allocator
    dropped.set()
    thread.join(30)
    assert not thread.is_alive(), "deadlock: the release waited for the allocator's lock"
    with allocator.section:  # the queued release ran when the holder's section ended (or runs as this one starts)
        assert allocator.counters.allocated == before
    assert unraisable == []


def test_a_dry_storage_collected_inside_a_tracker_section_is_released_when_it_ends(unraisable) -> None:
    with trn_notebook.dryrun() as run:
        _garbage(1 << 20)
        tracker = run._session.tracker
        live = tracker.live()
        with gc_disabled(), tracker.allocator.section:
            gc.collect()
            assert tracker.live() == live, "the tracker changed in the middle of its own section"
        assert tracker.live() == live - 1
        tracker.allocator.check_invariants()
    assert unraisable == []


class gc_disabled:  # a context manager: named as one reads
    """Automatic collection off, so the test's ``gc.collect()`` is where the callback runs."""

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was:
            gc.enable()
