"""Fixtures of the security probes: a private cache directory and key per test, and a way to play another user."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from trn_notebook.compiler import backend, compile_log, shape_log, trust
from trn_notebook.compiler import disk_cache as cache
from trn_notebook.compiler.config import override

OTHER_UID = 65534  # "nobody"


@pytest.fixture
def sec_cache(tmp_path: Path, fresh_device: None) -> Iterator[Path]:
    """A cache directory (not created yet) and an own HMAC key file, both under ``tmp_path``."""
    torch._dynamo.reset()
    backend.clear_memory_cache()
    compile_log.reset()
    shape_log.reset()
    cache._reported.clear()
    trust._keys.clear()
    d = tmp_path / "neff"
    with override(cache_dir=str(d), disable_cache=False, key_file=str(tmp_path / "config" / "cache-hmac.key")):
        yield d
    trust._keys.clear()
    torch._dynamo.reset()


@pytest.fixture
def give_away(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], None]:
    """Make ``path`` owned by another user: a real chown as root, else this process plays another uid."""

    def chown(path: Path) -> None:
        if os.geteuid() == 0:
            os.lchown(path, OTHER_UID, OTHER_UID)
        else:  # cannot give files away: everything now looks foreign to the cache, which is what the probe needs
            monkeypatch.setattr(trust, "current_uid", lambda: os.geteuid() + 1)

    return chown
