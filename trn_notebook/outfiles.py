"""Where a file the user asked for will be written: checked first, so a bad path gets a clear error.

PyTorch's Kineto writer only logs "Failed to write to log file!" and returns, so a trace exported into a
missing folder was lost silently (and our merge then raised a bare ``FileNotFoundError``). Every file
trn-notebook writes for the user at a path they give (traces, snapshots) passes :func:`check_writable`.

Every file the package writes goes through :func:`write_atomic` (or :func:`write_all` for files that
belong together, such as a cache entry's IR and metadata or every entry of an imported bundle): staged
under a temporary name and renamed only when complete, so a failure leaves nothing half-written.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path


def check_writable(path: str | Path, what: str) -> Path:
    """``path`` as a ``Path`` when a file can be created (or replaced) there.

    Raises ``FileNotFoundError`` when its folder does not exist, ``NotADirectoryError`` when the folder is a
    file, ``IsADirectoryError`` when ``path`` is a folder, ``PermissionError`` when the folder (or an existing
    file) is not writable; each message names the path and what to do instead.
    """
    p = Path(path).expanduser()
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.exists():
        raise FileNotFoundError(
            f"cannot write the {what} to {p}: the folder {parent} does not exist; create it first "
            f"(os.makedirs({str(parent)!r}, exist_ok=True)) or choose another path"
        )
    if not parent.is_dir():
        raise NotADirectoryError(f"cannot write the {what} to {p}: {parent} is a file, not a folder")
    if p.is_dir():
        raise IsADirectoryError(f"cannot write the {what} to {p}: it is a folder; give a file name inside it")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise PermissionError(
            f"cannot write the {what} to {p}: {'the file' if p.exists() else 'the folder ' + str(parent)} is not "
            "writable by you; choose a folder of your own (e.g. the notebook's folder)"
        )
    return p


# -- writing: one writer for every file the package writes ---------------------------------------------
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _write_fd(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd`` (``os.write`` may write part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _stage(target: Path, data: bytes | Iterable[bytes], mode: int) -> Path:
    """``data`` (bytes, or chunks of bytes written as they come) in a new temporary file beside ``target``
    (created with ``mode``, minus the umask), synced."""
    directory = target.parent if str(target.parent) else Path(".")
    while True:
        tmp = directory / f".{target.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, _FLAGS, mode)  # the umask applies here: no process-wide umask change
            break
        except FileExistsError:
            continue
    try:
        for chunk in [data] if isinstance(data, bytes) else data:
            _write_fd(fd, chunk)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def write_all(files: Sequence[tuple[str | Path, bytes | Iterable[bytes]]], *, mode: int = 0o666) -> list[Path]:
    """Write several files as one: every file is staged (temporary name, synced) before any is renamed into
    place, so a full disk, an interrupt or a bad value leaves none of them new or changed — all or nothing.
    Returns the paths. Raises ``OSError`` naming the file that could not be written; then the targets are
    as they were (a target renamed before a later rename failed is put back) and no temporary file is left.
    """
    targets = [Path(p) for p, _ in files]
    staged: list[Path] = []
    try:
        for target, (_, data) in zip(targets, files, strict=True):
            staged.append(_stage(target, data, mode))
    except BaseException as exc:
        for tmp in staged:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            failed = targets[len(staged)]
            raise OSError(exc.errno, f"cannot write {failed}: {exc.strerror or exc}; nothing was changed") from exc
        raise
    backups: list[tuple[Path, Path | None]] = []  # (renamed target, hard link to what it replaced)
    try:
        for tmp, target in zip(staged, targets, strict=True):
            backup: Path | None = None
            if len(targets) > 1 and os.path.lexists(target):  # keep the old file until all are in place
                backup = target.with_name(f".{target.name}.{secrets.token_hex(4)}.bak")
                os.link(target, backup, follow_symlinks=False)
            os.replace(tmp, target)
            backups.append((target, backup))
    except BaseException as exc:
        for target, backup in reversed(backups):  # put back what was renamed before the failure
            if backup is None:
                target.unlink(missing_ok=True)
            else:
                os.replace(backup, target)
        for tmp in staged:
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OSError(
                exc.errno, f"cannot write {targets[len(backups)]}: {exc.strerror or exc}; nothing was changed"
            ) from exc
        raise
    for _, backup in backups:
        if backup is not None:
            backup.unlink(missing_ok=True)
    return targets


def write_atomic(path: str | Path, data: bytes, *, mode: int = 0o666) -> Path:
    """Write ``data`` to ``path`` atomically (a synced temporary file renamed over it); returns the path.

    A symlink at ``path`` is replaced, not followed. Raises ``OSError`` (a missing or read-only folder, a
    full disk) with the target named; the target is then unchanged and no temporary file is left.
    """
    return write_all([(path, data)], mode=mode)[0]


def write_chunks_atomic(path: str | Path, chunks: Iterable[bytes], *, mode: int = 0o666) -> Path:
    """:func:`write_atomic` of bytes produced piece by piece (a large trace is never held whole in memory).
    An exception raised by ``chunks`` leaves the target unchanged, as a failed write does."""
    return write_all([(path, chunks)], mode=mode)[0]


def create_exclusive(path: str | Path, data: bytes, *, mode: int = 0o600) -> bool:
    """Create ``path`` holding ``data`` complete, unless it exists: staged, then hard-linked into place (the link
    fails if another process created the file first). Returns False when it already existed. Raises ``OSError``
    when it cannot be written; then nothing is left (never a half-written file, which a key must not be)."""
    target = Path(path)
    tmp = _stage(target, data, mode)
    try:
        os.link(tmp, target)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: str | Path, text: str, *, mode: int = 0o666) -> Path:
    """:func:`write_atomic` of ``text`` in UTF-8."""
    return write_atomic(path, text.encode("utf-8"), mode=mode)


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
