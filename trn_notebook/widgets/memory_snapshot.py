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
from ._base import TrnWidget, esm

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


def summary_of(totals: dict[str, int]) -> str:
    """The totals' line: segments, allocated of reserved, free and the largest free block (``fmt_bytes``)."""
    return (
        f"{totals['segments']} segments · {fmt_bytes(totals['allocated'])} allocated of "
        f"{fmt_bytes(totals['reserved'])} reserved · free {fmt_bytes(totals['free'])}, "
        f"largest free block {fmt_bytes(totals['largest_free'])}"
    )


class MemorySnapshotWidget(TrnWidget):
    """Segments (largest first) with their blocks by owner, and the top allocation sites by live bytes."""

    _esm = esm("memory_snapshot.js")

    owners = traitlets.List(list(OWNERS)).tag(sync=True)
    segments = traitlets.List().tag(sync=True)  # [address, total, type, [[offset, size, owner or -1], ...]]
    sites = traitlets.List().tag(sync=True)  # [site, bytes, blocks, owner]
    totals = traitlets.Dict().tag(sync=True)
    by_owner = traitlets.List().tag(sync=True)  # [owner, bytes, blocks, identified, guessed, unrecorded bytes]
    note = traitlets.Unicode("").tag(sync=True)
    # The figures as shown, formatted once here (display.format), each list parallel to the one it describes:
    summary = traitlets.Unicode("").tag(sync=True)  # the totals' line
    segment_text = traitlets.List().tag(sync=True)  # per segment: [total, [each block's tooltip]]
    site_text = traitlets.List().tag(sync=True)  # per site: its bytes
    owner_text = traitlets.List().tag(sync=True)  # per owner: [bytes, identified, guessed, unrecorded]

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
        frag = fragmentation(snap)
        totals = {
            "segments": len(segs),
            "reserved": int(sum(s["total_size"] for s in segs)),
            "allocated": int(sum(s["allocated_size"] for s in segs)),
            "free": int(frag.free_bytes.sum()),
            "largest_free": int(frag.largest_free_block.max()) if len(frag) else 0,
        }
        top_sites = sorted(([k, v[0], v[1], max(v[2], key=v[2].get)] for k, v in sites.items()), key=lambda r: -r[1])
        by_owner: list[list[Any]] = [
            [o, r["bytes"], r["blocks"], *(r[k] for k in SOURCES)] for o, r in owner_totals(snap).items() if r["blocks"]
        ]
        with self.hold_sync():
            self.segments = out[:MAX_SEGMENTS]
            self.segment_text = [
                [
                    fmt_bytes(total),
                    [f"{OWNERS[o] if o >= 0 else ''} {fmt_bytes(size)} @ +{off}" for off, size, o in blocks],
                ]
                for _, total, _, blocks in self.segments
            ]
            self.sites = top_sites[:20]
            self.site_text = [fmt_bytes(r[1]) for r in self.sites]
            self.by_owner = by_owner
            self.owner_text = [[fmt_bytes(v) for v in (r[1], *r[3:6])] for r in by_owner]
            self.totals = totals
            self.summary = summary_of(totals)

    def fallback_html(self) -> str:
        """Totals, top allocation sites and segments as tables."""
        sites = "".join(
            f"<tr><td>{html.escape(s)}</td><td>{html.escape(o)}</td><td style='text-align:right'>{fmt_bytes(b)}</td>"
            f"<td style='text-align:right'>{n}</td></tr>"
            for s, b, n, o in self.sites[:10]
        )
        return (
            f"<div class='trn-widget'><b>Memory snapshot</b>: {html.escape(self.summary)}"
            f"<table class='trn-table'><tr><th>site</th><th>owner</th>"
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
        lines = [f"Memory snapshot: {self.summary}"]
        lines += [f"  {fmt_bytes(b):>12}  {n:>5} blocks  {o:<16} {s}" for s, b, n, o in self.sites[:10]]
        lines += ["  by owner (bytes identified by tensor identity / guessed from the allocation stack / unrecorded):"]
        lines += [
            f"  {o:<16} {fmt_bytes(b):>12}  {n:>5} blocks  {fmt_bytes(i)} / {fmt_bytes(g)} / {fmt_bytes(u)}"
            for o, b, n, i, g, u in self.by_owner
        ]
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)


def memory_snapshot_view(snapshot: dict[str, Any] | str | os.PathLike[str] | None = None) -> MemorySnapshotWidget:
    """A :class:`MemorySnapshotWidget` of the live allocator (after
    ``torch.neuron.memory._record_memory_history()``), of a snapshot dict, or of a JSON snapshot file.
    Raises ``RuntimeError`` (how to start recording) or ``ValueError`` (not our JSON snapshot)."""
    return MemorySnapshotWidget(snapshot)
