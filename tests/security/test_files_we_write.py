"""Files we write on the user's behalf never destroy theirs: the memory snapshot's JSON twin refuses a
name taken by a user file, dumps are atomic, malformed snapshots are a clear ``ValueError``."""

from __future__ import annotations

import errno
import json
import os
import pathlib

import pytest
import torch

from trn_notebook import outfiles
from trn_notebook.profiling import memory as recording
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
    real_write_fd = outfiles._write_fd

    def full(fd, data):  # half the bytes reach the disk, then it is full
        real_write_fd(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(outfiles, "_write_fd", full)
    with pytest.raises(OSError, match="No space left on device.*nothing was changed"):
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


def _fail_on_call(monkeypatch, n: int) -> None:
    """The ``n``-th file staged by outfiles hits a full disk (the earlier ones are written)."""
    real_write_fd = outfiles._write_fd
    calls = []

    def write_fd(fd, data):
        calls.append(1)
        if len(calls) == n:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write_fd(fd, data)

    monkeypatch.setattr(outfiles, "_write_fd", write_fd)


def test_a_cache_entry_on_a_full_disk_leaves_no_orphan_ir(tmp_path, monkeypatch):
    # Probe (low): on a full disk an entry's IR was written, its JSON hit ENOSPC and the .ir stayed.
    from trn_notebook.compiler import disk_cache

    _fail_on_call(monkeypatch, 2)  # the IR is written, the JSON that commits it is not
    with pytest.raises(OSError, match="No space left on device"):
        disk_cache.write_entry(tmp_path, "a" * 32, "graph g() {}\n", {"graph_name": "g"})
    assert list(tmp_path.iterdir()) == []


def test_write_all_puts_back_what_it_renamed_when_a_later_rename_fails(tmp_path, monkeypatch):
    old = tmp_path / "a.txt"
    old.write_text("old a")
    real_replace = os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == 2 and str(dst).endswith("b.txt"):
            raise OSError(errno.EIO, "Input/output error")
        real_replace(src, dst)

    monkeypatch.setattr(outfiles.os, "replace", replace)
    with pytest.raises(OSError, match=r"cannot write .*b\.txt.*nothing was changed"):
        outfiles.write_all([(old, b"new a"), (tmp_path / "b.txt", b"new b")])
    monkeypatch.undo()
    assert old.read_text() == "old a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def _umask_now() -> str:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():  # read without setting it
        if line.startswith("Umask:"):
            return line.split()[1]
    pytest.skip("no Umask line in /proc/self/status")


def test_writing_never_changes_the_process_umask_and_honours_it(tmp_path):
    # Reading the umask with os.umask(0) set it to 0 for a moment: a race with every thread creating a file.
    import threading

    before = _umask_now()
    seen: set[str] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.add(_umask_now())

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        for i in range(300):
            outfiles.write_atomic(tmp_path / f"f{i}.txt", b"x")
    finally:
        stop.set()
        t.join()
    assert seen <= {before}, seen
    mode = (tmp_path / "f0.txt").stat().st_mode & 0o777
    assert mode == 0o666 & ~int(before, 8)


def test_no_module_sets_the_umask():
    import ast

    import trn_notebook

    root = pathlib.Path(trn_notebook.__file__).parent
    calls = [
        f"{p.relative_to(root)}:{n.lineno}"
        for p in root.rglob("*.py")
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "os.umask"
    ]
    assert calls == []


def test_a_cache_key_on_a_full_disk_is_not_left_half_written(tmp_path, monkeypatch):
    # A key cut short by ENOSPC was "too short" forever after; now it is created complete or not at all.
    from trn_notebook.compiler import trust
    from trn_notebook.compiler.config import override

    _fail_on_call(monkeypatch, 1)
    trust._keys.clear()
    with override(key_file=str(tmp_path / "k" / "cache-hmac.key")):
        with pytest.raises(trust.KeyFileError, match="No space left on device"):
            trust.user_key()
        assert not (tmp_path / "k" / "cache-hmac.key").exists()
        assert [p.name for p in (tmp_path / "k").iterdir()] == []
        monkeypatch.undo()
        assert len(trust.user_key()) == 64  # the next try makes a whole key
    trust._keys.clear()
