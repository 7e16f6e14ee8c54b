"""``torch.neuron.memory._record_memory_history`` / ``_snapshot`` / ``_dump_snapshot`` in PyTorch's format.

The snapshot has PyTorch's structure (``segments`` with ``blocks``, ``device_traces`` of ``alloc`` /
``free_requested`` / ``free_completed`` / ``segment_alloc`` / ``segment_free`` / ``oom`` events with stack ``frames``), so
``torch.cuda._memory_viz`` and PyTorch's memory visualizer read it; notebook frames are named
``cell [N]`` (``line`` is the cell's line). :func:`fragmentation` is a table per segment: free bytes
vs the largest free block. The dump is a pickle as PyTorch writes it (for the user's own tools);
this package never reads one.
"""

from __future__ import annotations

import json
import pickle
import sys
import threading
import time
import zlib
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import locks as _locks
from .. import state as _state
from ..device.memory.runtime import allocator
from ..device.source_lines import is_user_file, source_line
from ..limits import LimitError, check_json_shape, read_limited
from ..outfiles import check_writable, refuse_foreign, write_atomic
from .memory_owners import attribute, frame_owner, identified_blocks, owner_totals, thread_owner

if TYPE_CHECKING:
    import pandas as pd

MAX_FRAMES = 12
NOT_RECORDING = (
    "memory history is not being recorded: call torch.neuron.memory._record_memory_history() before the code "
    "you want to see, then take the snapshot"
)


class _History:
    """The recorder (one per process): trace entries and the frames of each live block."""

    def __init__(self) -> None:
        self.lock = _locks.make("memory_history", "memory history")
        self.entries: deque[dict[str, Any]] | None = None
        self.block_frames: dict[int, list[dict[str, Any]]] = {}
        self.block_owner: dict[int, str] = {}
        self.stacks = True
        self.t0 = time.perf_counter()

    def observe(self, action: str, addr: int, size: int, requested: int) -> None:
        entries = self.entries
        if entries is None:
            return
        frames, owner = _frames() if self.stacks and action in ("alloc", "oom") else ([], "")
        entry = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": frames,
                 "time_us": int((time.perf_counter() - self.t0) * 1e6), "device_free": 0}  # fmt: skip
        if action == "alloc":
            self.block_frames[addr] = frames
            self.block_owner[addr] = owner
            entry["requested_size"] = requested
        elif action == "free_completed":
            entry["frames"] = self.block_frames.pop(addr, [])
            self.block_owner.pop(addr, None)
            # PyTorch records the request, then the completion (here immediate); _memory_viz pairs
            # alloc with free_requested (trace_plot(filter_freed=True)) and warns on a lone free_completed.
            entries.append({**entry, "action": "free_requested"})
        entries.append(entry)

    def snapshot(self) -> int:
        """Trace entries held (0 when not recording)."""
        return len(self.entries) if self.entries is not None else 0

    def reset(self) -> None:
        """Forget the recorded entries (recording, if on, continues)."""
        with self.lock:
            if self.entries is not None:
                self.entries.clear()


history = _History()
_state.register("memory_history", history)


def _frames() -> tuple[list[dict[str, Any]], str]:
    """User frames, innermost first, as PyTorch's ``{filename, line, name}`` (cells as ``cell [N]``), and
    the block's owner guessed from the whole stack (the rule is :mod:`.memory_owners`'). An allocation on
    another thread with no user frame (the autograd engine's worker computing gradients) takes the frames
    of the main thread at that moment: the ``backward()`` call waiting for it."""
    out, owner = _walk(sys._getframe(1))
    main = threading.main_thread()
    if not out and threading.current_thread() is not main and main.ident is not None:
        waiting = sys._current_frames().get(main.ident)
        if waiting is not None:
            out = _walk(waiting)[0]
    return out, owner or thread_owner()


def _walk(f: Any) -> tuple[list[dict[str, Any]], str]:
    out: list[dict[str, Any]] = []
    owner = ""
    while f is not None:
        filename = f.f_code.co_filename
        if not owner:
            owner = frame_owner(filename, f.f_code.co_name)
        if len(out) < MAX_FRAMES and is_user_file(filename):
            src = source_line(filename, f.f_lineno)
            name = f"cell [{src.cell}]" if src.cell is not None else filename
            out.append({"filename": name, "line": f.f_lineno, "name": f.f_code.co_name})
        f = f.f_back
    return out, owner


def _record_memory_history(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = 100_000,
    device: Any = None,
    clear_history: bool = False,
    **_: Any,
) -> None:
    """Start (``enabled="all"``) or stop (``enabled=None``) recording allocation events (PyTorch's signature).

    Raises ``ValueError`` for an ``enabled`` value other than ``"all"``/``"state"``/``None``.
    """
    if enabled not in ("all", "state", None):
        raise ValueError(f"enabled must be 'all', 'state' or None (stop), got {enabled!r}")
    with history.lock:
        if enabled is None:
            allocator.observer = None
            history.entries = None
            history.block_frames.clear()
            history.block_owner.clear()
            return
        if history.entries is None or clear_history or history.entries.maxlen != max_entries:
            old = list(history.entries or ())[-max_entries:] if not clear_history else []
            history.entries = deque(old, maxlen=max_entries)
        history.stacks = stacks != "none" and context is not None
        allocator.observer = history.observe


def _snapshot(device: Any = None) -> dict[str, Any]:
    """The allocator's segments and blocks plus the recorded trace, as PyTorch's ``_snapshot()`` dict; each
    live block also says its ``owner`` and ``owner_source`` (identified by tensor identity, guessed from its
    allocation stack, or unrecorded: :mod:`.memory_owners`).

    Raises ``RuntimeError`` (saying how to start) when history is not being recorded.
    """
    if history.entries is None:
        raise RuntimeError(NOT_RECORDING)
    segments = []
    with allocator.section:
        identified = identified_blocks()  # under the lock: no block changes hands between walk and layout
        for seg_addr, seg_size, small, layout in allocator.layout():  # the trace below is taken under the same lock
            blocks = []
            allocated = active = requested = 0
            for addr, size, req, free in layout:
                state = "inactive" if free else "active_allocated"
                if not free:
                    allocated += size
                    active += size
                    requested += req
                blocks.append(
                    {"address": addr, "size": size, "requested_size": req, "state": state,
                     "frames": [] if free else history.block_frames.get(addr, [])}
                )  # fmt: skip
            attribute(blocks, history.block_owner, identified)
            segments.append(
                {"device": 0, "address": seg_addr, "total_size": seg_size, "stream": 0,
                 "segment_type": "small" if small else "large", "segment_pool_id": (0, 0),
                 "allocated_size": allocated, "active_size": active, "requested_size": requested,
                 "is_expandable": False, "frames": [], "blocks": blocks}
            )  # fmt: skip
        trace = list(history.entries)
    return {
        "segments": segments,
        "device_traces": [trace],
        "allocator_settings": {"PYTORCH_NEURON_ALLOC_CONF": "", "note": "simulated neuron HBM"},
    }


def _dump_snapshot(filename: str | Path = "dump_snapshot.pickle") -> Path:
    """Write :func:`_snapshot` as a pickle, as PyTorch does (for its memory visualizer), and the same
    snapshot as JSON next to it (``.json``: what :func:`load_snapshot_json` and our widget read; we
    never read a pickle). Returns the pickle's path.

    Both files are written atomically (a full disk leaves no truncated file). Raises
    ``FileExistsError`` before writing anything if the JSON twin's name is taken by a file that is
    not one of our snapshots (e.g. your ``results.json`` beside ``results.pickle``), ``OSError``.
    """
    path = check_writable(filename, "memory snapshot")
    twin = path.with_suffix(".json")
    if twin == path:
        raise ValueError(f"{path}: give the pickle a name not ending in .json (the JSON twin is written beside it)")
    refuse_foreign(twin, _JSON_HEAD, "a trn-notebook memory snapshot (the JSON twin of the pickle)")
    snap = _snapshot()
    write_atomic(path, pickle.dumps(snap))
    dump_snapshot_json(twin, snap)
    return path


JSON_FORMAT = "trn-notebook memory snapshot 1"
_JSON_HEAD = ('{"format":' + json.dumps(JSON_FORMAT)).encode()


def dump_snapshot_json(path: str | Path, snapshot: dict[str, Any] | None = None) -> Path:
    """Write a snapshot (default: a new :func:`_snapshot`) as compact JSON, each distinct stack stored
    once, atomically (temp file + rename); returns the path. Raises ``RuntimeError`` when no snapshot
    is given and history is off, ``OSError`` when the file cannot be written (the target is unchanged)."""
    snap = snapshot if snapshot is not None else _snapshot()
    index: dict[int, int] = {}
    stacks: list[Any] = []

    def ref(obj: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in obj.items() if k not in ("frames", "blocks")}
        frames = obj.get("frames")
        if frames:
            i = index.get(id(frames))
            if i is None:
                i = index[id(frames)] = len(stacks)
                stacks.append(frames)
            out["stack"] = i
        return out

    doc = {
        "format": JSON_FORMAT,
        "stacks": stacks,
        "segments": [{**ref(s), "blocks": [ref(b) for b in s["blocks"]]} for s in snap["segments"]],
        "device_traces": [[ref(e) for e in t] for t in snap["device_traces"]],
        "allocator_settings": snap.get("allocator_settings", {}),
    }
    return write_atomic(path, json.dumps(doc, separators=(",", ":")).encode("utf-8"))


MAX_SNAPSHOT_BYTES = 1 << 30
"""The largest JSON snapshot :func:`load_snapshot_json` reads (pass ``max_bytes`` to read a larger one)."""
MAX_SNAPSHOT_DEPTH = 32
"""Our snapshots nest 6 levels (segments, blocks, frames); deeper JSON is not one of them."""


def load_snapshot_json(path: str | Path, *, max_bytes: int = MAX_SNAPSHOT_BYTES) -> dict[str, Any]:
    """Read a JSON snapshot written by :func:`dump_snapshot_json` back into PyTorch's structure.

    Raises ``ValueError`` if the file is not one (a pickle is never read), is not a regular file (a FIFO
    or device is refused before it is read, so nothing blocks), is malformed, or is larger than
    ``max_bytes`` or nested deeper than JSON snapshots are; ``OSError`` if it cannot be opened."""
    hint = "pass max_bytes=... to read a larger snapshot"
    try:
        raw = read_limited(path, max_bytes, "memory snapshot", hint)
        check_json_shape(raw, str(path), max_bytes, MAX_SNAPSHOT_DEPTH, hint)
        doc = json.loads(raw.decode("utf-8"))
    except LimitError:
        raise
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path} is not a trn-notebook memory snapshot (JSON from _dump_snapshot): {exc}") from exc
    if not isinstance(doc, dict) or doc.get("format") != JSON_FORMAT:
        raise ValueError(f"{path} is not a trn-notebook memory snapshot (JSON written by _dump_snapshot)")
    try:
        return _expand(doc)
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ValueError(
            f"{path} is a malformed trn-notebook memory snapshot ({type(exc).__name__}: {exc}); write it again "
            "with torch.neuron.memory._dump_snapshot"
        ) from None


def _expand(doc: dict[str, Any]) -> dict[str, Any]:
    stacks = doc["stacks"]

    def expand(obj: dict[str, Any]) -> dict[str, Any]:
        i = obj.pop("stack", None)
        obj["frames"] = stacks[i] if i is not None else []
        if isinstance(obj.get("segment_pool_id"), list):
            obj["segment_pool_id"] = tuple(obj["segment_pool_id"])
        return obj

    for seg in doc["segments"]:
        expand(seg)
        for b in seg["blocks"]:
            expand(b)
    for trace in doc["device_traces"]:
        for e in trace:
            expand(e)
    return {k: doc[k] for k in ("segments", "device_traces", "allocator_settings")}


def fragmentation(snapshot: dict[str, Any] | None = None) -> pd.DataFrame:
    """Per segment: total, allocated, free, largest free block and ``fragmentation = 1 - largest/free``.

    Adjacent free blocks count as one block: the allocator merges them before it gives up (and
    before it reserves a new segment when HBM is short), so they are not fragmentation."""
    import pandas as pd

    snap = snapshot if snapshot is not None else _snapshot_or_state()
    rows = []
    for seg in snap["segments"]:
        free_blocks, run = [], 0
        for b in seg["blocks"]:
            if b["state"] == "inactive":
                run += b["size"]
            elif run:
                free_blocks.append(run)
                run = 0
        if run:
            free_blocks.append(run)
        free = sum(free_blocks)
        largest = max(free_blocks, default=0)
        rows.append(
            (seg["segment_type"], seg["address"], seg["total_size"], seg["allocated_size"], free, largest,
             (1 - largest / free) if free else 0.0)
        )  # fmt: skip
    cols = ["pool", "segment", "total_bytes", "allocated_bytes", "free_bytes", "largest_free_block", "fragmentation"]
    return pd.DataFrame(rows, columns=cols)


def _snapshot_or_state() -> dict[str, Any]:
    """Segments without trace when history is off (fragmentation needs no history)."""
    if history.entries is not None:
        return _snapshot()
    history.entries = deque(maxlen=1)
    try:
        return _snapshot()
    finally:
        history.entries = None


def install_memory_namespace() -> None:
    """Attach ``torch.neuron.memory`` with the three functions (idempotent)."""
    import types

    import torch

    module = getattr(torch, "neuron", None)
    if module is None or hasattr(module, "memory"):
        return
    ns = types.ModuleType("torch.neuron.memory", "Memory snapshots of the simulated neuron device (PyTorch's format).")
    ns._record_memory_history = _record_memory_history  # type: ignore[attr-defined]
    ns._snapshot = _snapshot  # type: ignore[attr-defined]
    ns._dump_snapshot = _dump_snapshot  # type: ignore[attr-defined]
    ns.load_snapshot_json = load_snapshot_json  # type: ignore[attr-defined]
    ns.fragmentation = fragmentation  # type: ignore[attr-defined]
    ns.owner_totals = owner_totals  # type: ignore[attr-defined]
    module.memory = ns
