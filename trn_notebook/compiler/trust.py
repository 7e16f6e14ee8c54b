"""What the compile cache trusts: a private directory carrying our marker, regular files this user
owns, and entries authenticated with this user's HMAC key (kept outside the cache directory).

* A directory (or file) another user owns, or that group/others can write, is refused on read
  and on write; we never change its permissions (we only create directories ``0700``).
* A directory is a cache directory only if it carries :data:`MARKER`, which we write when we
  create it (or adopt an empty one); nothing is ever deleted from a directory without it.
* Files are opened without following symlinks and without blocking (a FIFO is refused), must
  be regular files and are read up to a size limit.
* The key is 32 random bytes in ``<user config dir>/trn-notebook/cache-hmac.key`` (``0600``,
  directory ``0700``; ``TRN_NOTEBOOK_CACHE_KEY_FILE`` overrides the path). An entry is loaded only
  if its HMAC-SHA256 under this key verifies, i.e. this user's process wrote it (or imported it
  from a bundle the user chose to trust).
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import stat
from hashlib import sha256
from pathlib import Path
from typing import Any

from .. import state as _state
from ..outfiles import create_exclusive, write_atomic
from .config import get_config

MARKER = ".trn-notebook-cache"
MARKER_TEXT = b"trn-notebook compile cache v1\n"
MAX_ENTRY_BYTES = 64 << 20  # one IR text; the largest real graphs are a few MiB
MAX_META_BYTES = 1 << 20


class UntrustedError(ValueError):
    """A cache directory, file or key that another user can write (or owns); it is refused, not deleted."""


def current_uid() -> int | None:
    """This process's effective uid (None where the platform has none)."""
    return os.geteuid() if hasattr(os, "geteuid") else None


def problem(st: os.stat_result, path: Path, what: str) -> str | None:
    """Why ``st`` (of ``path``) must not be trusted, or None: foreign owner or group/world writable."""
    me = current_uid()
    if me is not None and st.st_uid != me:
        return f"{what} {path} is owned by uid {st.st_uid}, not by you (uid {me})"
    mode = stat.S_IMODE(st.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "other users" if mode & stat.S_IWOTH else "your group"
        return f"{what} {path} is writable by {who} (mode {mode:04o})"
    return None


def dir_problem(d: Path) -> str | None:
    """Why directory ``d`` must not hold a trusted cache, or None (it is ours and private)."""
    try:
        st = d.stat()
    except OSError as exc:
        return f"cache directory {d} cannot be read ({exc.strerror or exc})"
    if not stat.S_ISDIR(st.st_mode):
        return f"{d} is not a directory"
    return problem(st, d, "cache directory")


def has_marker(d: Path) -> bool:
    """True when ``d`` carries our marker file (a regular file we own with our first line)."""
    try:
        return read_regular(d / MARKER, 4096).startswith(MARKER_TEXT)
    except (OSError, ValueError):
        return False


def write_marker(d: Path) -> None:
    """Mark ``d`` as a trn-notebook cache directory (only called for directories we own and keep private)."""
    text = MARKER_TEXT + b"Entries are <key>.json + <key>.ir; trn-notebook deletes only those.\n"
    write_atomic(d / MARKER, text, mode=0o600)


def read_regular(path: Path, limit: int, *, private: bool = False) -> bytes:
    """Bytes of ``path`` if it is a regular file this user owns that others cannot write, at most ``limit`` long.

    Raises ``FileNotFoundError`` when absent, ``UntrustedError`` for a foreign or writable file
    (``private`` also refuses one others can read), ``ValueError`` for a special file, a symlink
    or an oversized file.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        if os.path.islink(path):
            raise ValueError(f"{path} is a symbolic link; the cache opens only regular files") from None
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a regular file; the cache opens only regular files")
        why = problem(st, path, "file")
        if why is None and private and stat.S_IMODE(st.st_mode) & 0o077:
            why = f"file {path} is readable by other users (mode {stat.S_IMODE(st.st_mode):04o}); it must be 0600"
        if why:
            raise UntrustedError(why)
        if st.st_size > limit:
            raise ValueError(f"{path} is {st.st_size} bytes, above the limit of {limit}")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is above the limit of {limit} bytes")
    return data


def key_path() -> Path:
    """Where this user's cache key lives (outside every cache directory)."""
    cfg = get_config()
    if cfg.key_file:
        return Path(cfg.key_file).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("trn-notebook")) / "cache-hmac.key"


_keys: dict[Path, bytes] = {}
_state.register("cache_keys", _state.Globals(__name__, "_keys"), reset=False)  # the user's HMAC key, read once


class KeyFileError(UntrustedError):
    """The key file cannot be used (a symlink, a special or oversized file, not yours, readable by others).

    The cache is then not used (compiles go on, nothing is deleted); the message says how to fix it."""


def _key_fix(path: Path) -> str:
    return (
        f"delete {path} and a new key is made (entries signed with the old key are recompiled), or point "
        "TRN_NOTEBOOK_CACHE_KEY_FILE at a regular file of yours with mode 0600; the cache is not used until then "
        "(nothing was deleted)"
    )


def user_key() -> bytes:
    """This user's HMAC key, created (``0600`` in a ``0700`` directory) on first use.

    Raises :class:`KeyFileError` (an ``UntrustedError``; the message names the problem and the fix)
    when the key file is a symlink (never followed: it could be someone else's key), a special or
    oversized file, too short, not yours, readable or writable by others, or cannot be created.
    """
    path = key_path()
    cached = _keys.get(path)
    if cached is not None:
        return cached
    try:
        if not os.path.lexists(path):
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # complete or absent, never half-written; False: another process made it first, read theirs
            create_exclusive(path, secrets.token_hex(32).encode() + b"\n", mode=0o600)
        data = read_regular(path, 4096, private=True).strip()
    except KeyFileError:
        raise
    except (OSError, ValueError) as exc:  # UntrustedError is a ValueError
        text = str(exc) if isinstance(exc, ValueError) else f"{path} cannot be used ({exc.strerror or exc})"
        raise KeyFileError(f"cache key: {text}; {_key_fix(path)}") from None
    if len(data) < 32:
        raise KeyFileError(f"cache key {path} is too short ({len(data)} bytes); {_key_fix(path)}")
    _keys[path] = data
    return data


def canonical(record: dict[str, Any]) -> bytes:
    """The bytes an entry's HMAC covers: its metadata without the ``hmac`` field, canonical JSON."""
    body = {k: v for k, v in record.items() if k != "hmac"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def sign(record: dict[str, Any]) -> str:
    """HMAC-SHA256 of ``record`` under this user's key (hex)."""
    return hmac.new(user_key(), canonical(record), sha256).hexdigest()


def verify(record: dict[str, Any]) -> bool:
    """True when ``record['hmac']`` is this user's signature of the record."""
    mac = record.get("hmac")
    return isinstance(mac, str) and hmac.compare_digest(mac.encode(), sign(record).encode())
