"""Where a file the user asked for will be written: checked first, so a bad path gets a clear error.

PyTorch's Kineto writer only logs "Failed to write to log file!" and returns, so a trace exported into a
missing folder was lost silently (and our merge then raised a bare ``FileNotFoundError``). Every file
trn-notebook writes for the user at a path they give (traces, snapshots) passes :func:`check_writable`.
"""

from __future__ import annotations

import os
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
