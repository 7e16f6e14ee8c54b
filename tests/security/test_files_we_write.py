"""Files we write on the user's behalf never destroy theirs: the memory snapshot's JSON twin refuses a
name taken by a user file, dumps are atomic, malformed snapshots are a clear ``ValueError``."""

from __future__ import annotations

import errno
import json
import os

import pytest
import torch

from trn_notebook.profiling import memory as recording
from trn_notebook.profiling import safe_write
from trn_notebook.widgets.memory_snapshot import memory_snapshot_view


@pytest.fixture
def history(fresh_device):
    recording._record_memory_history(max_entries=1000)
    x = torch.ones(256, device="neuron")
    yield x
    recording._record_memory_history(enabled=None)


def test_the_json_twin_never_overwrites_a_users_file(tmp_path, history):
    # Probe: _dump_snapshot("results.pickle") silently overwrote the user's results.json beside it.
    mine = tmp_path / "results.json"
    mine.write_text('{"accuracy": 0.93}')
    with pytest.raises(FileExistsError, match=r"results\.json already exists and is not a trn-notebook memory"):
        recording._dump_snapshot(tmp_path / "results.pickle")
    assert mine.read_text() == '{"accuracy": 0.93}'
    assert not (tmp_path / "results.pickle").exists()  # refused before anything was written
    # a twin of ours is replaced; the JSON reads back
    recording._dump_snapshot(tmp_path / "snap.pickle")
    recording._dump_snapshot(tmp_path / "snap.pickle")
    assert recording.load_snapshot_json(tmp_path / "snap.json")["segments"]


def test_a_dump_on_a_full_disk_leaves_the_old_file_and_no_temporary(tmp_path, history, monkeypatch):
    # Probe: a snapshot dump on a full disk left a truncated file.
    recording._dump_snapshot(tmp_path / "snap.pickle")
    before = (tmp_path / "snap.json").read_bytes()
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safe_write.os, "fdopen", lambda fd, mode: Full(real_fdopen(fd, mode)))
    with pytest.raises(OSError, match="No space left on device.*left unchanged"):
        recording.dump_snapshot_json(tmp_path / "snap.json")
    assert (tmp_path / "snap.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap.json", "snap.pickle"]


@pytest.mark.parametrize(
    "doc",
    [
        {"format": recording.JSON_FORMAT},
        {"format": recording.JSON_FORMAT, "stacks": [], "segments": [{"stack": 7, "blocks": []}]},
        {"format": recording.JSON_FORMAT, "stacks": [], "segments": ["x"], "device_traces": []},
        {"format": recording.JSON_FORMAT, "stacks": [], "segments": [{"blocks": [{}]}], "device_traces": [],
         "allocator_settings": {}},
    ],
    ids=["no-stacks", "bad-stack-index", "segment-not-a-dict", "block-without-fields"],
)  # fmt: skip
def test_a_malformed_snapshot_is_a_value_error(tmp_path, fresh_device, doc):
    # Probe: memory_snapshot_view on malformed JSON raised raw KeyError / IndexError / AttributeError.
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="snapshot"):
        memory_snapshot_view(path)


def test_an_oversized_snapshot_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 2048)
    with pytest.raises(ValueError, match="over the 1,024-byte limit.*max_bytes"):
        recording.load_snapshot_json(path, max_bytes=1024)


def _neuron_profile():
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        (torch.ones(4, device="neuron") * 2).cpu()
    return prof


@pytest.mark.parametrize("where", ["missing-folder", "folder-is-a-file", "path-is-a-folder"])
def test_a_trace_or_snapshot_to_a_bad_path_is_a_clear_error_and_the_session_goes_on(tmp_path, history, where):
    # Issue 31 (low): export_chrome_trace into a missing folder gave a raw FileNotFoundError from our merge
    # (PyTorch's Kineto writer only logs "Failed to write to log file!", so the trace was lost silently).
    import trn_notebook

    (tmp_path / "a-file").write_text("x")
    (tmp_path / "a-folder.json").mkdir()
    target = {
        "missing-folder": tmp_path / "no" / "such" / "t.json",
        "folder-is-a-file": tmp_path / "a-file" / "t.json",
        "path-is-a-folder": tmp_path / "a-folder.json",
    }[where]
    match = {"missing-folder": "does not exist; create it first", "folder-is-a-file": "is a file, not a folder"}
    message = rf"cannot write the (trace|memory snapshot) to .*{match.get(where, 'it is a folder')}"
    prof = _neuron_profile()
    with pytest.raises(OSError, match=message):
        prof.export_chrome_trace(str(target))
    with pytest.raises(OSError, match=message):
        trn_notebook.save_trace(target)
    with pytest.raises(OSError, match=message):
        recording._dump_snapshot(target.with_suffix(".pickle") if where != "path-is-a-folder" else target)
    good = tmp_path / "ok.json"
    prof.export_chrome_trace(str(good))
    assert json.loads(good.read_text())["traceEvents"]
