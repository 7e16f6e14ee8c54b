"""A finished profile's merged trace as a dict or a file (the same merge as ``export_chrome_trace``)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..outfiles import check_writable, write_text_atomic
from .kineto import TRACE_SEPARATORS


def trace_dict(prof: Any) -> dict[str, Any]:
    """The merged Chrome trace of a stopped ``torch.profiler`` profile, as a dict.

    Raises ``ValueError`` if ``prof`` has not been stopped (results are only available afterwards).
    """
    fd, name = tempfile.mkstemp(suffix=".json", prefix="trn-trace-")
    os.close(fd)
    try:
        try:
            prof.export_chrome_trace(name)
        except (AssertionError, RuntimeError, AttributeError) as exc:
            raise ValueError(
                f"the profile has no results to export (stop it first: leave the `with` block): {exc}"
            ) from exc
        return json.loads(Path(name).read_text(encoding="utf-8"))
    finally:
        Path(name).unlink(missing_ok=True)


def save_trace_dict(trace: dict[str, Any], path: str | Path) -> Path:
    """Write a trace dict as compact JSON (``.json``); returns the path. Raises ``OSError`` on failure."""
    p = check_writable(path, "trace")
    write_text_atomic(p, json.dumps(trace, separators=TRACE_SEPARATORS))
    return p
