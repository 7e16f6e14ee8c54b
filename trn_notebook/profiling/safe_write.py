"""Writing files the user asked for without losing theirs: atomic replace, never clobbering a stranger's file.

A file is written to a temporary name in the same directory and renamed over the target only once
it is complete, so a full disk or an interrupt leaves the old file (or nothing), never a truncated
one; a symlink at the target is replaced, not followed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + ``os.replace``); returns the path.

    Raises ``OSError`` (e.g. a missing or read-only directory, a full disk) with the target named;
    the target is then unchanged and no temporary file is left.
    """
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OSError(
            exc.errno, f"cannot write {target}: {exc.strerror or exc} (choose a directory you can write)"
        ) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise OSError(exc.errno, f"cannot write {target}: {exc.strerror or exc}; it was left unchanged") from exc
        raise
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def refuse_foreign(path: str | Path, marker: bytes, what: str) -> None:
    """Raise ``FileExistsError`` if ``path`` exists and does not start with ``marker`` (it is not a file we
    wrote); a file of ours, or no file, is fine to replace."""
    target = Path(path)
    if not os.path.lexists(target):
        return
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            head = fh.read(len(marker))
    except OSError:
        head = b""
    if head != marker:
        raise FileExistsError(
            f"{target} already exists and is not {what}: it was left untouched; choose another file name "
            "or move that file away"
        )
