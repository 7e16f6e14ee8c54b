"""A bad key file (a symlink, a special or oversized file) never breaks a compile, is never followed, and
never costs you a valid cache entry: the cache is not used, the warning says what is wrong and how to fix it."""

from __future__ import annotations

import os
import shutil
import warnings

import pytest

from tests.security.probe import compile_f
from trn_notebook.compiler import disk_cache as cache
from trn_notebook.compiler import trust


def _plant(kind: str, key_file, tmp_path) -> None:
    key_file.unlink()
    if kind == "symlink":
        other = tmp_path / "someone-elses.key"
        other.write_text("f" * 64 + "\n")
        os.chmod(other, 0o600)
        key_file.symlink_to(other)
    elif kind == "dev-zero":
        key_file.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(key_file, 0o600)
    elif kind == "oversized":
        key_file.write_bytes(b"a" * 10_000)
        os.chmod(key_file, 0o600)
    elif kind == "directory":
        key_file.mkdir(mode=0o700)


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        ("symlink", "symbolic link"),
        ("dev-zero", "symbolic link"),
        ("fifo", "not a regular file"),
        ("oversized", "above the limit"),
        ("directory", "cannot be used|not a regular file"),
    ],
)
def test_a_bad_key_file_is_reported_and_costs_no_entry(tmp_path, sec_cache, kind, match):
    # Probe: a symlinked, oversized or special key file broke every compile and deleted valid cache entries.
    compile_f()
    (entry,) = cache.cache_entries()
    key_file = tmp_path / "config" / "cache-hmac.key"
    saved = key_file.read_bytes()
    _plant(kind, key_file, tmp_path)
    trust._keys.clear()
    with pytest.warns(cache.CacheUntrustedWarning, match=f"(?s)cache key.*({match}).*delete .* a new key is made"):
        assert compile_f().cache_result == "miss"  # the compile goes on, correct (checked inside)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile_f()  # again: still no exception, still nothing deleted
    assert (sec_cache / f"{entry['key']}.json").exists() and (sec_cache / f"{entry['key']}.ir").exists()
    # fixed: the same entry is served again
    if key_file.is_dir() and not key_file.is_symlink():
        shutil.rmtree(key_file)
    else:
        key_file.unlink()
    key_file.write_bytes(saved)
    os.chmod(key_file, 0o600)
    trust._keys.clear()
    assert compile_f().cache_result == "disk hit"


def test_a_symlinked_key_is_never_read(tmp_path, sec_cache):
    other = tmp_path / "someone-elses.key"
    other.write_text("f" * 64 + "\n")
    os.chmod(other, 0o600)
    key_file = tmp_path / "config" / "cache-hmac.key"
    key_file.parent.mkdir(mode=0o700)
    key_file.symlink_to(other)
    with pytest.raises(trust.KeyFileError, match="symbolic link"):
        trust.user_key()
    assert trust._keys == {}
