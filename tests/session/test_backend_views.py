"""On the simulator the views read the same figures through the live backend as through the owners' snapshots."""

from __future__ import annotations

import torch

from trn_notebook import facts, session
from trn_notebook.device.memory.runtime import allocator
from trn_notebook.device.placement import placement_log
from trn_notebook.facts.status import status_payload
from trn_notebook.session.status_card import status


def test_device_and_status_cards_name_the_live_backend(fresh_device):
    card = session.use_device("neuron")
    assert "trn_notebook simulator (trn-notebook" in card.text() and "no Trainium hardware" in card.text()
    assert "trn_notebook simulator" in status().text()
    assert "live backend" in session.use_device("cpu").text()


def test_ops_and_memory_views_match_the_owners_snapshots(fresh_device):
    x = torch.ones(16, 16, device="neuron")
    y = x @ x
    snap, memory = placement_log.snapshot(), allocator.snapshot()
    text = session.ops().text()
    calls = [e.calls for e in snap.values()]
    native = sum(e.calls for e in snap.values() if e.category == "native")
    assert f"{len(snap)} distinct, {sum(calls)} calls" in text
    assert f"native {native}" in text and "host-only" in text and "not measured" not in text
    table = session.memory().text()
    assert f"{memory.live_segments} segments" in table and "simulator-only" not in table
    payload = status_payload()
    assert payload["memory_allocated"] == memory.counters.allocated and payload["cache_hits"] == 0
    assert payload["fallback_ops"] == len(facts.current().placement().fallback_ops)
    del y


def test_the_mirrored_torchneuron_release_is_said_from_one_place(fresh_device):
    from pathlib import Path

    from trn_notebook import session
    from trn_notebook._version import MIRRORS

    assert "SDK 2.34" in MIRRORS
    assert ("mirrors", MIRRORS) in session.use_device("neuron").fields
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f"The simulator mirrors: {MIRRORS}" in " ".join(readme.split())
