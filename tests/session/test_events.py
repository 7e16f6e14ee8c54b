"""The one cell-finished event: computed once per cell, handed to every subscriber, weak and guarded."""

from __future__ import annotations

import gc

import pytest
import torch
from IPython.testing import globalipapp

from trn_notebook.session.events import CellEvents


@pytest.fixture
def ip():
    return globalipapp.get_ipython()


def test_every_subscriber_gets_the_same_event_once_per_cell(ip, fresh_device):
    events = CellEvents()
    events.install(ip)
    ip.run_cell("import torch")
    seen_a, seen_b = [], []
    events.subscribe(seen_a.append)
    events.subscribe(seen_b.append)
    try:
        ip.run_cell("pass")
        ip.run_cell("_t = torch.ones(1000, device='neuron')")
        assert len(seen_a) == len(seen_b) == 2
        assert all(a is b for a, b in zip(seen_a, seen_b))  # computed once, shared
        assert seen_a[1].payload["memory_allocated"] > seen_a[0].payload["memory_allocated"]
        assert [e.count for e in seen_a] == [seen_a[0].count, seen_a[0].count + 1]
    finally:
        events.uninstall(ip)
    ip.run_cell("pass")
    assert len(seen_a) == 2  # uninstalled: no more events
    ip.user_ns.pop("_t", None)


def test_a_failing_subscriber_does_not_starve_the_others_and_bound_methods_are_weak(fresh_device):
    events = CellEvents()
    seen = []

    def broken(event):
        raise RuntimeError("view is broken")

    class View:
        def on(self, event):
            seen.append(event)

    view = View()
    events.subscribe(broken)
    events.subscribe(view.on)
    unsubscribe = events.subscribe(lambda e: seen.append("plain"))
    events.emit()
    assert len(seen) == 2 and events.subscribers() == 3, seen
    del view
    gc.collect()
    unsubscribe()
    events.emit()
    assert len(seen) == 2 and events.subscribers() == 1  # only `broken` is left


def test_subscribers_see_whether_the_state_moved(fresh_device):
    events = CellEvents()
    seen = []
    events.subscribe(seen.append)
    events.emit()
    events.emit()
    assert seen[-1].changed is False
    torch.ones(10, device="neuron")
    events.emit()
    assert seen[-1].changed is True
