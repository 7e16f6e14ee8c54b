"""Probes of the compile cache as a hostile co-user would run them: planted entries, foreign and shared
directories, deleting user files. Every graph that runs is compared with CPU PyTorch.

Catalogue (issue 14):
* clearing deletes only our entries, and only in a directory carrying our marker (High 1);
* a planted entry is never served: foreign owner, group/world-writable directory or file, or an
  entry whose HMAC does not verify under this user's key (High 2);
* a shared directory's permissions are never changed (Medium 7);
* ``clear_cache`` counts only what it removed (Low 14); stray JSON with a bad ``created`` is not
  an entry (Low 13).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from tests.security.probe import compile_f
from trn_notebook.compiler import disk_cache as cache
from trn_notebook.compiler import trust
from trn_notebook.compiler.config import override


def plant(d: Path, key: str, record: dict, text: str) -> None:
    """Write an entry the way an attacker can: any text, a recomputed plain sha256, the old header."""
    record = dict(record, ir_sha256=hashlib.sha256(text.encode()).hexdigest())
    (d / f"{key}.ir").write_text(text)
    (d / f"{key}.json").write_text(json.dumps(record))


def hostile_entry(sec_cache: Path) -> tuple[str, dict, str]:
    """Key, metadata and an IR text that computes -100x+1 instead of 3x+1."""
    key = compile_f().graph_id
    record = json.loads((sec_cache / f"{key}.json").read_text())
    text = (sec_cache / f"{key}.ir").read_text()
    assert "mul(%arg0_1, 3)" in text
    return key, record, text.replace("mul(%arg0_1, 3)", "mul(%arg0_1, -100)")


# -- High 1: clearing ------------------------------------------------------------------------------


def test_clear_refuses_a_project_folder_and_deletes_nothing(tmp_path, sec_cache):
    project = tmp_path / "project"
    project.mkdir(mode=0o700)
    names = ["package.json", "results.json", "model.ir", "data.tmp"]
    for name in names:
        (project / name).write_text("{}")
    with override(cache_dir=str(project)):
        with pytest.raises(cache.CacheDirError, match="not a trn-notebook compile cache"):
            cache.clear_cache()
        assert cache.cache_entries() == []
    assert sorted(p.name for p in project.iterdir()) == sorted(names)


def test_clear_through_the_magic_library_and_the_widget_is_refused_too(tmp_path, sec_cache, monkeypatch):
    from trn_notebook.session import views
    from trn_notebook.widgets.cache_view import CacheView

    project = tmp_path / "project"
    project.mkdir(mode=0o700)
    (project / "results.json").write_text("{}")
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", "")  # views.cache sets it; restored after the test
    with pytest.raises(ValueError, match="not a trn-notebook compile cache"):
        views.cache(clear=True, directory=str(project))
    with override(cache_dir=str(project)):
        view = CacheView()
        view._handle_msg(
            {
                "content": {"data": {"method": "custom", "content": {"type": "clear_cache", "confirm": True}}},
                "buffers": [],
            }
        )
        assert "not a trn-notebook compile cache" in view.error
    assert (project / "results.json").read_text() == "{}"


def test_clear_in_our_cache_deletes_only_our_entries(sec_cache):
    key = compile_f().graph_id
    user_files = {
        "notes.json": "{}",
        "model.ir": "graph user",
        "0123456789abcdef0123456789abcdef.json": '{"mine": true}',  # our name pattern, not our header
        "0123456789abcdef0123456789abcdef.ir": "not IR",
    }
    for name, text in user_files.items():
        (sec_cache / name).write_text(text)
    assert cache.clear_cache() == 1
    left = {p.name for p in sec_cache.iterdir()}
    assert left == set(user_files) | {trust.MARKER}
    assert not (sec_cache / f"{key}.json").exists()


def test_clear_counts_only_entries_it_could_delete(sec_cache, monkeypatch):
    compile_f()
    real_unlink = Path.unlink

    def read_only_unlink(self: Path, missing_ok: bool = False) -> None:
        if self.parent == sec_cache:
            raise PermissionError(13, "Read-only file system", str(self))
        real_unlink(self, missing_ok)

    monkeypatch.setattr(Path, "unlink", read_only_unlink)
    assert cache.clear_cache() == 0
    monkeypatch.undo()
    assert len(cache.cache_entries()) == 1


def test_a_stray_json_with_a_bad_created_field_is_not_an_entry(sec_cache):
    from trn_notebook.session import views

    compile_f()
    for i, created in enumerate(["yesterday", 1e300, None, True]):
        key = f"{i:032x}"
        (sec_cache / f"{key}.json").write_text(json.dumps({"key": key, "format": 2, "created": created}))
    assert len(cache.cache_entries()) == 1
    table = views.cache()
    assert "1 entries" in table.title


# -- High 2: planted entries ---------------------------------------------------------------------------


def test_a_planted_entry_with_a_recomputed_checksum_is_not_served(sec_cache):
    key, record, text = hostile_entry(sec_cache)
    plant(sec_cache, key, {k: v for k, v in record.items() if k != "hmac"}, text)
    with pytest.warns(cache.CacheCorruptWarning, match="HMAC does not verify"):
        rec = compile_f()  # compares with CPU: -99 would fail here
    assert rec.cache_result == "miss"
    assert compile_f().cache_result == "disk hit"  # our own rewrite is trusted again


def test_an_entry_signed_with_another_users_key_is_not_served(tmp_path, sec_cache):
    key, record, text = hostile_entry(sec_cache)
    with override(key_file=str(tmp_path / "mallory.key")):
        trust._keys.clear()
        signed = cache.signed_record(key, text, {k: v for k, v in record.items() if k not in ("hmac", "created")})
    trust._keys.clear()
    plant(sec_cache, key, signed, text)
    with pytest.warns(cache.CacheCorruptWarning, match="HMAC"):
        assert compile_f().cache_result == "miss"


def test_a_world_writable_directory_of_another_user_is_refused_on_load(tmp_path, sec_cache, give_away):
    key, _record, text = hostile_entry(sec_cache)
    shared = tmp_path / "shared"
    shared.mkdir()
    trust.write_marker(shared)
    plant(shared, key, cache.signed_record(key, text, {}), text)  # even a validly signed one
    os.chmod(shared, 0o777)
    give_away(shared)
    warns = pytest.warns(cache.CacheUntrustedWarning, match="owned by uid|writable by other users")
    with override(cache_dir=str(shared)), warns:
        assert compile_f().cache_result == "miss"
    assert (shared / f"{key}.ir").read_text() == text  # refused, not deleted


@pytest.mark.parametrize("mode", [0o770, 0o1777])
def test_a_group_or_world_writable_directory_of_ours_is_refused_and_not_chmodded(tmp_path, sec_cache, mode):
    key, _record, text = hostile_entry(sec_cache)
    shared = tmp_path / "team"
    shared.mkdir()
    trust.write_marker(shared)
    plant(shared, key, cache.signed_record(key, text, {}), text)
    os.chmod(shared, mode)
    warns = pytest.warns(cache.CacheUntrustedWarning, match="writable by (your group|other users)")
    with override(cache_dir=str(shared)), warns:
        assert compile_f().cache_result == "miss"
    assert stat.S_IMODE(shared.stat().st_mode) == mode


def test_a_writable_file_in_our_directory_is_refused(sec_cache):
    key, _record, text = hostile_entry(sec_cache)
    plant(sec_cache, key, cache.signed_record(key, text, {}), text)
    os.chmod(sec_cache / f"{key}.ir", 0o666)
    with pytest.warns(cache.CacheUntrustedWarning, match="writable by other users"):
        assert compile_f().cache_result == "miss"
    assert cache.load(key) is not None  # the rewrite replaced the file with a private one of ours


def test_a_key_file_others_can_read_is_refused(tmp_path, sec_cache):
    compile_f()
    key_file = tmp_path / "config" / "cache-hmac.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    os.chmod(key_file, 0o644)
    trust._keys.clear()
    with pytest.warns(cache.CacheUntrustedWarning, match="readable by other users"):
        assert compile_f().cache_result == "miss"
