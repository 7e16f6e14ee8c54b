"""MemorySnapshotWidget: the allocator's segments as bars, blocks coloured by owner, top allocation sites.

Reads a snapshot in PyTorch's format (``torch.neuron.memory._snapshot()``): owners are parameters,
gradients, optimizer state, activations, workspace — identified by tensor identity or guessed from the
allocation stack, and the view says which (the rule: :mod:`trn_notebook.profiling.memory_owners`).
Saved notebooks show the same figures as tables.
"""

from __future__ import annotations

import html
import os
from typing import Any

import traitlets

from ..display.format import fmt_bytes
from ..profiling.memory import _snapshot, fragmentation, load_snapshot_json
from ..profiling.memory_owners import DEFAULT_OWNER, OWNERS, SOURCES, owner_totals
from ._base import STATIC, TrnWidget

MAX_SEGMENTS = 200
MAX_BLOCKS = 400
HARDWARE_NOTE = (
    "the live allocator's segments are n/a on hardware (simulator-only); open a snapshot file instead: "
    "memory_snapshot_view('x.json')"
)


def site(block: dict[str, Any]) -> str:
    """``cell [N] line L`` / ``file:line`` of the innermost user frame that allocated ``block``."""
    frames = block.get("frames") or []
    if not frames:
        return "<no user frame>"
    f = frames[0]
    sep = " line " if str(f["filename"]).startswith("cell [") else ":"
    return f"{f['filename']}{sep}{f['line']}"


class MemorySnapshotWidget(TrnWidget):
    """Segments (largest first) with their blocks by owner, and the top allocation sites by live bytes."""

    _esm = STATIC / "memory_snapshot.js"

    owners = traitlets.List(list(OWNERS)).tag(sync=True)
    segments = traitlets.List().tag(sync=True)  # [address, total, type, [[offset, size, owner or -1], ...]]
    sites = traitlets.List().tag(sync=True)  # [site, bytes, blocks, owner]
    totals = traitlets.Dict().tag(sync=True)
    by_owner = traitlets.List().tag(sync=True)  # [owner, bytes, blocks, identified, guessed, unrecorded bytes]
    note = traitlets.Unicode("").tag(sync=True)

    def __init__(self, snapshot: dict[str, Any] | str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        """``snapshot``: a snapshot dict, the path of a JSON snapshot from ``_dump_snapshot`` (never a
        pickle), or None for a new one each refresh. Raises ``RuntimeError`` (how to start recording)
        when history is off, ``ValueError`` for a file that is not one of our JSON snapshots or a malformed
        snapshot."""
        if isinstance(snapshot, (str, os.PathLike)):
            snapshot = load_snapshot_json(os.fspath(snapshot))
        from .. import facts

        backend = facts.current()
        if snapshot is None and not backend.is_simulator:  # the live allocator's blocks are the simulator's
            kwargs.setdefault("note", f"{HARDWARE_NOTE} ({backend.name})")
            snapshot = {"segments": []}
        self._given = snapshot
        super().__init__(**kwargs)
        if snapshot is None:
            self.refresh()
            return
        try:
            self.refresh()
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(
                f"not a usable memory snapshot ({type(exc).__name__}: {exc}); pass one from "
                "torch.neuron.memory._snapshot() or a JSON file written by _dump_snapshot"
            ) from None

    def refresh(self) -> None:
        """Re-read the snapshot (a new one from the allocator unless one was given)."""
        snap = self._given if self._given is not None else _snapshot()
        owner_index = {o: i for i, o in enumerate(OWNERS)}
        segs = sorted(snap["segments"], key=lambda s: -s["total_size"])
        out: list[list[Any]] = []
        sites: dict[str, list[Any]] = {}
        for seg in segs:
            blocks = []
            for b in seg["blocks"]:
                live = b["state"] != "inactive"
                owner = b.get("owner") or DEFAULT_OWNER
                if live:
                    row = sites.setdefault(site(b), [0, 0, {}])
                    row[0] += b["size"]
                    row[1] += 1
                    row[2][owner] = row[2].get(owner, 0) + b["size"]
                blocks.append([b["address"] - seg["address"], b["size"], owner_index.get(owner, 3) if live else -1])
            out.append([seg["address"], seg["total_size"], seg["segment_type"], blocks[:MAX_BLOCKS]])
        self.segments = out[:MAX_SEGMENTS]
        self.sites = sorted(([k, v[0], v[1], max(v[2], key=v[2].get)] for k, v in sites.items()), key=lambda r: -r[1])[
            :20
        ]
        self.by_owner = [
            [o, r["bytes"], r["blocks"], *(r[k] for k in SOURCES)] for o, r in owner_totals(snap).items() if r["blocks"]
        ]
        frag = fragmentation(snap)
        self.totals = {
            "segments": len(segs),
            "reserved": int(sum(s["total_size"] for s in segs)),
            "allocated": int(sum(s["allocated_size"] for s in segs)),
            "free": int(frag.free_bytes.sum()),
            "largest_free": int(frag.largest_free_block.max()) if len(frag) else 0,
        }

    def fallback_html(self) -> str:
        """Totals, top allocation sites and segments as tables."""
        t = self.totals
        sites = "".join(
            f"<tr><td>{html.escape(s)}</td><td>{html.escape(o)}</td><td style='text-align:right'>{b}</td>"
            f"<td style='text-align:right'>{n}</td></tr>"
            for s, b, n, o in self.sites[:10]
        )
        return (
            f"<div class='trn-widget'><b>Memory snapshot</b>: {t.get('segments', 0)} segments, "
            f"{t.get('allocated', 0)} B allocated of {t.get('reserved', 0)} B reserved; free {t.get('free', 0)} B, "
            f"largest free block {t.get('largest_free', 0)} B<table class='trn-table'><tr><th>site</th><th>owner</th>"
            f"<th>bytes</th><th>blocks</th></tr>{sites}</table>{self._owner_table()}"
            + (f"<p>{html.escape(self.note)}</p>" if self.note else "")
            + "</div>"
        )

    def _owner_table(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(o)}</td>" + "".join(f"<td style='text-align:right'>{fmt_bytes(v)}</td>" for v in (b, i, g, u))
            + f"<td style='text-align:right'>{n}</td></tr>"
            for o, b, n, i, g, u in self.by_owner
        )  # fmt: skip
        return (
            "<table class='trn-table'><tr><th>owner</th><th>bytes</th><th>identified</th><th>guessed</th>"
            f"<th>unrecorded</th><th>blocks</th></tr>{rows}</table>"
        )

    def fallback_text(self) -> str:
        """Totals and the top sites as text."""
        t = self.totals
        lines = [f"Memory snapshot: {t.get('allocated', 0)} B allocated of {t.get('reserved', 0)} B reserved"]
        lines += [f"  {b:>12} B  {n:>5} blocks  {o:<16} {s}" for s, b, n, o in self.sites[:10]]
        lines += ["  by owner (bytes identified by tensor identity / guessed from the allocation stack / unrecorded):"]
        lines += [f"  {o:<16} {b:>12} B  {n:>5} blocks  {i} / {g} / {u}" for o, b, n, i, g, u in self.by_owner]
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)


def memory_snapshot_view(snapshot: dict[str, Any] | str | os.PathLike[str] | None = None) -> MemorySnapshotWidget:
    """A :class:`MemorySnapshotWidget` of the live allocator (after
    ``torch.neuron.memory._record_memory_history()``), of a snapshot dict, or of a JSON snapshot file.
    Raises ``RuntimeError`` (how to start recording) or ``ValueError`` (not our JSON snapshot)."""
    return MemorySnapshotWidget(snapshot)
