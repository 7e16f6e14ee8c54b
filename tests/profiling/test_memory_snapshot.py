"""torch.neuron.memory._record_memory_history / _snapshot / _dump_snapshot in PyTorch's format; fragmentation."""

from __future__ import annotations

import copy
import os
import pathlib

import pytest
import torch
from torch.cuda import _memory_viz

import trn_notebook
from trn_notebook.device.memory.allocator import OutOfDeviceMemory
from trn_notebook.device.memory.runtime import allocator
from trn_notebook.profiling import fragmentation

pytestmark = pytest.mark.usefixtures("fresh_device")


@pytest.fixture
def recording():
    torch.neuron.memory._record_memory_history(max_entries=10_000, clear_history=True)
    yield torch.neuron.memory
    torch.neuron.memory._record_memory_history(enabled=None)


def test_snapshot_has_pytorch_structure_and_frames(recording, tmp_path):
    x = torch.ones(512, 512, device="neuron")  # ALLOC_LINE
    y = x * 2
    del x
    snap = recording._snapshot()
    blocks = [b for s in snap["segments"] for b in s["blocks"]]
    live = [b for b in blocks if b["state"] == "active_allocated"]
    assert any(b["requested_size"] == 512 * 512 * 4 for b in live)
    frames = next(b["frames"] for b in live if b["requested_size"] == 512 * 512 * 4)
    assert (
        frames[0]["filename"].endswith("test_memory_snapshot.py")
        and frames[0]["name"] == "test_snapshot_has_pytorch_structure_and_frames"
    )
    actions = [e["action"] for e in snap["device_traces"][0]]
    assert "alloc" in actions and "free_completed" in actions and "segment_alloc" in actions
    assert sum(s["allocated_size"] for s in snap["segments"]) == allocator.counters.allocated
    # PyTorch's own tooling reads it
    assert "total_allocated" in _memory_viz.segsum(snap)
    assert _memory_viz.memory(snap, format_flamegraph=lambda lines: lines)
    path = recording._dump_snapshot(tmp_path / "snap.pickle")
    assert path.stat().st_size > 0
    del y


def test_snapshot_without_history_says_how_to_start():
    torch.neuron.memory._record_memory_history(enabled=None)
    with pytest.raises(RuntimeError, match=r"_record_memory_history\(\)"):
        torch.neuron.memory._snapshot()
    with pytest.raises(ValueError, match="enabled"):
        torch.neuron.memory._record_memory_history(enabled="yes")


def test_fragmentation_table_and_oom_message_name_fragmentation():
    capacity = allocator.capacity
    try:
        trn_notebook.set_memory_capacity(64 << 20)
        keep, drop = [], []
        for i in range(6):  # 6 x 8 MiB in 20 MiB segments; every other one freed: 24 MiB free, split
            t = torch.empty(2 << 20, device="neuron")
            (keep if i % 2 else drop).append(t)
        drop.clear()
        table = fragmentation()
        large = table[table.pool == "large"]
        assert large.free_bytes.sum() >= 24 << 20
        assert large.largest_free_block.max() < 16 << 20 and large.fragmentation.max() > 0
        free = allocator.capacity - allocator.counters.allocated
        assert free >= 16 << 20  # "allocated says there is room"
        with pytest.raises(OutOfDeviceMemory, match="Fragmentation, not capacity"):
            torch.empty(4 << 20, device="neuron")  # 16 MiB: no free block that large
        keep.clear()
    finally:
        allocator.capacity = capacity


def test_snapshot_widget_owners_sites_and_magic(recording):
    from IPython.core.error import UsageError
    from IPython.testing import globalipapp
    from torch import nn

    from trn_notebook.widgets.memory_snapshot import MemorySnapshotWidget

    model = nn.Linear(128, 128).to("neuron")
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(8, 128, device="neuron")).sum().backward()
    opt.step()
    w = MemorySnapshotWidget()
    owners = {w.owners[o] for _, _, _, blocks in w.segments for _, _, o in blocks if o >= 0}
    assert {"parameters", "gradients", "optimizer state"} <= owners
    assert w.sites and w.sites[0][1] > 0 and "test_memory_snapshot.py" in w.fallback_html()
    assert w.totals["allocated"] == allocator.counters.allocated
    ip = globalipapp.get_ipython()
    ip.run_line_magic("load_ext", "trn_notebook")
    try:
        assert isinstance(ip.run_line_magic("trn", "memory --snapshot"), MemorySnapshotWidget)
        torch.neuron.memory._record_memory_history(enabled=None)
        with pytest.raises(UsageError, match="_record_memory_history"):
            ip.run_line_magic("trn", "memory --snapshot")
    finally:
        ip.run_line_magic("unload_ext", "trn_notebook")


def test_dump_writes_json_our_view_reads_and_pytorch_viz_reads_both(recording, tmp_path, capsys):
    lin = torch.nn.Linear(64, 64).to("neuron")
    lin(torch.randn(4, 64).to("neuron")).sum().backward()
    snap = recording._snapshot()
    recording._dump_snapshot(tmp_path / "snap.pickle")
    back = recording.load_snapshot_json(tmp_path / "snap.json")
    assert [s["address"] for s in back["segments"]] == [s["address"] for s in snap["segments"]]
    assert [e["action"] for e in back["device_traces"][0]] == [e["action"] for e in snap["device_traces"][0]]
    # PyTorch's helpers give the same answers on the JSON round trip; the HTML plots embed it.
    assert _memory_viz.segsum(back) == _memory_viz.segsum(snap)
    assert _memory_viz.trace(back) == _memory_viz.trace(snap)
    assert "test_memory_snapshot.py" in _memory_viz.segments(back, format_flamegraph=lambda lines: lines)
    assert "snapshot.pickle" in _memory_viz.segment_plot(back) and "snapshot.pickle" in _memory_viz.trace_plot(back)
    # Each free is requested then completed, as PyTorch records it: filter_freed pairs them silently.
    actions = [e["action"] for e in snap["device_traces"][0]]
    assert actions.count("free_requested") == actions.count("free_completed") > 0
    freed = _memory_viz.filter_alloc_free_pairs(copy.deepcopy(snap))["device_traces"][0]
    assert not capsys.readouterr().out  # no "free_completed without free_requested"
    live = {b["address"] for s in snap["segments"] for b in s["blocks"] if b["state"] == "active_allocated"}
    assert {e["addr"] for e in freed if e["action"] == "alloc"} <= live
    view = trn_notebook.memory_snapshot_view(tmp_path / "snap.json")
    live = trn_notebook.memory_snapshot_view(snap)
    assert view.segments == live.segments and view.sites == live.sites
    (tmp_path / "other.json").write_text("{}")
    for bad in (tmp_path / "other.json", tmp_path / "snap.pickle"):
        with pytest.raises(ValueError, match="not a trn-notebook memory snapshot"):
            trn_notebook.memory_snapshot_view(bad)
    del lin


def test_adjacent_free_blocks_are_not_fragmentation():
    torch.neuron.empty_cache()
    ts = [torch.empty(256 * 1024, device="neuron") for _ in range(20)]  # 1 MiB blocks fill a 20 MiB segment
    seg = allocator._segments[-1]
    assert seg.used == seg.size == 20 << 20
    ts[4] = ts[5] = None  # two adjacent free blocks: one 2 MiB range once the allocator merges them
    frag = fragmentation()
    row = frag[frag.segment == seg.addr].iloc[0]
    assert (row.free_bytes, row.largest_free_block, row.fragmentation) == (2 << 20, 2 << 20, 0.0)
    ts[9] = None  # a separate 1 MiB hole: now a third of the free bytes is out of the largest range
    row = fragmentation().set_index("segment").loc[seg.addr]
    assert (row.free_bytes, row.largest_free_block) == (3 << 20, 2 << 20)
    assert row.fragmentation == pytest.approx(1 / 3)
    del ts
    torch.neuron.empty_cache()


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_a_special_file_named_json_is_refused_without_blocking(tmp_path, kind):
    # Probe (medium): memory_snapshot_view on a FIFO named *.json hung until killed.
    import threading

    from trn_notebook.widgets.memory_snapshot import memory_snapshot_view

    path = tmp_path / "snapshot.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path = pathlib.Path("/dev/zero")
    outcome: list[BaseException | None] = []

    def view() -> None:
        try:
            memory_snapshot_view(str(path))
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=view, daemon=True)
    t.start()
    t.join(30)
    if t.is_alive() and kind == "fifo":  # unblock the reader so the thread ends, then fail
        with open(path, "wb"):
            pass
    assert outcome, "memory_snapshot_view blocked on a special file"
    assert isinstance(outcome[0], ValueError) and "not a regular file" in str(outcome[0]), outcome
    assert torch.ones(2, device="neuron").sum().item() == 2.0
