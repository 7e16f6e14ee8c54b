"""Reading and checking Chrome/Perfetto trace JSON (Kineto's export, merged or not).

:func:`validate_chrome_trace` checks the parts of the Trace Event Format that Perfetto's JSON
importer relies on; :func:`load_trace` reads a file (plain or ``.gz``) or takes a dict/profile and
raises :class:`TraceFormatError` with what is wrong and what to do. Only JSON is ever parsed.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from ..limits import LimitError, check_json_shape, read_limited

PHASES = frozenset("BEXiIbneCMsftPONDRcpa")
MAX_TRACE_BYTES = 256 << 20
"""The largest trace read (a ``.gz`` counts decompressed, and stops being read at the limit)."""
MAX_TRACE_VALUES = 16_000_000
MAX_TRACE_DEPTH = 64
_RAISE_HINT = (
    "profile fewer steps (torch.profiler.schedule) or raise trn_notebook.profiling.traceio.MAX_TRACE_BYTES / "
    "MAX_TRACE_VALUES"
)
_NUM = (int, float)


class TraceFormatError(ValueError):
    """The file or object is not a trace this module can read."""


def validate_chrome_trace(trace: Any) -> list[str]:
    """Problems found in ``trace`` against the Chrome trace event format ([] when valid)."""
    problems: list[str] = []
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["top level must be an object with a 'traceEvents' list"]
    flows: dict[tuple[str, Any], list[str]] = {}
    for i, e in enumerate(trace["traceEvents"]):
        if not isinstance(e, dict):
            problems.append(f"event {i}: not an object")
            continue
        ph = e.get("ph")
        if ph not in PHASES:
            problems.append(f"event {i}: unknown phase {ph!r}")
            continue
        if not isinstance(e.get("name", ""), str):
            problems.append(f"event {i}: name must be a string")
        if ph != "M" and not isinstance(e.get("ts"), _NUM):
            problems.append(f"event {i} ({ph}): ts must be a number")
        for key in ("pid", "tid"):
            if key in e and not isinstance(e[key], int | str):
                problems.append(f"event {i}: {key} must be an integer or string")
        if ph == "X" and (not isinstance(e.get("dur"), _NUM) or e["dur"] < 0):
            problems.append(f"event {i} (X {e.get('name')!r}): dur must be a number >= 0")
        if ph == "C" and not (isinstance(e.get("args"), dict) and all(isinstance(v, _NUM) for v in e["args"].values())):
            problems.append(f"event {i} (C): args must map series names to numbers")
        if ph == "M" and not isinstance(e.get("args"), dict):
            problems.append(f"event {i} (M): metadata needs args")
        if ph in ("i", "I") and e.get("s", "t") not in ("g", "p", "t"):
            problems.append(f"event {i} (instant): scope must be g, p or t")
        if ph in ("s", "t", "f"):
            if "id" not in e:
                problems.append(f"event {i} (flow {ph}): needs an id")
            flows.setdefault((str(e.get("cat", "")), e.get("id")), []).append(ph)
        if "args" in e and not isinstance(e["args"], dict):
            problems.append(f"event {i}: args must be an object")
    for (cat, fid), phases in flows.items():
        if phases.count("s") != 1 or phases.count("f") > 1:
            problems.append(f"flow {cat}/{fid}: needs exactly one start and at most one finish, got {phases}")
    return problems


def load_trace(source: Any) -> dict[str, Any]:
    """A trace dict from a path (``.json``/``.json.gz``), a dict, or a finished profile.

    Raises :class:`TraceFormatError` for a file that is not JSON, not a Chrome trace, not merged
    by trn-notebook (no ``neuron:0 (modeled)`` process), or over :data:`MAX_TRACE_BYTES` /
    :data:`MAX_TRACE_VALUES` / :data:`MAX_TRACE_DEPTH` (checked before parsing; a ``.gz`` is
    decompressed only up to the limit), and ``FileNotFoundError`` for a missing path.
    """
    if isinstance(source, dict):
        trace = source
        where = "the trace object"
    elif isinstance(source, str | Path):
        path = Path(source)
        where = str(path)
        if not path.exists():
            raise FileNotFoundError(f"no trace file at {path}")
        try:
            raw = read_limited(path, MAX_TRACE_BYTES, "trace", _RAISE_HINT)
            check_json_shape(raw, str(path), MAX_TRACE_VALUES, MAX_TRACE_DEPTH, _RAISE_HINT)
            trace = json.loads(raw.decode("utf-8"))
        except LimitError as exc:
            raise TraceFormatError(str(exc)) from None
        except (OSError, ValueError, EOFError, zlib.error, RecursionError) as exc:
            raise TraceFormatError(
                f"{path} is not a readable JSON trace ({type(exc).__name__}: {exc}); pass the .json file "
                "written by prof.export_chrome_trace() or %%trn profile --save"
            ) from None
    else:
        raise TraceFormatError(
            f"expected a trace path, a trace dict or a finished profile, got {type(source).__name__}"
        )
    problems = validate_chrome_trace(trace)
    if problems:
        shown = "; ".join(problems[:3])
        raise TraceFormatError(f"{where} is not a Chrome trace: {shown}")
    meta = trace.get("trnNotebook")
    if not isinstance(meta, dict):
        raise TraceFormatError(
            f"{where} is a Chrome trace but was not recorded on the neuron device by trn-notebook (no "
            "'trnNotebook' section): profile with torch.profiler.profile(activities=[ProfilerActivity.CPU, "
            "ProfilerActivity.PrivateUse1]) after `import trn_notebook`, then prof.export_chrome_trace(path)"
        )
    if not meta.get("device_lanes", False):
        raise TraceFormatError(
            f"{where} has no device lanes: the profile did not include ProfilerActivity.PrivateUse1; add it "
            "to activities=[...] to record the neuron:0 (modeled) process"
        )
    return trace
