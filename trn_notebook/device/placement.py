"""The placement log: per ATen base op, where it ran and what it cost (single source of truth).

Each entry holds: category, calls, host wall seconds, modeled seconds, bytes moved host->device and
device->host, and the user source line that issued it (the first call's; a CPU fallback's latest).
The modeled seconds (column ``device_ms``) are the device kernel time for native ops and, for CPU
fallbacks, the modeled copies both ways plus the modeled host compute (what the fallback adds to the critical path). The hot path updates plain lists in
place; :meth:`PlacementLog.snapshot` turns them into frozen :class:`PlacementEntry` records inside
a :class:`PlacementSnapshot`. The aggregations (calls by category, fallback share, bytes moved) live
in one place, the backend-neutral :class:`trn_notebook.facts.base.Placement` that the simulator
backend builds from this snapshot; nothing else counts ops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import locks as _locks
from .. import state as _state
from .source_lines import user_source


def aws_class_of(op: str, category: str) -> str:
    """The class AWS publishes for ``op`` as placed (``registry.aws_class``); a fallback names whether every
    dtype falls back (its record says so) or only dtypes outside the op's native set."""
    from .ops.policy import registry
    from .ops.registry import aws_class

    record = registry.get(op)
    return aws_class(op, category, always_falls_back=record is None or record.category == "cpu_fallback")


if TYPE_CHECKING:
    import pandas as pd

# Live entry layout (a list for cheap in-place updates on the hot path); also the index order of
# PlacementEntry for readers written before it was typed.
CATEGORY, CALLS, HOST_S, DEVICE_S, H2D, D2H, SOURCE = range(7)
COLUMNS = ("op", "category", "calls", "host_ms", "device_ms", "bytes_h2d", "bytes_d2h", "source")


@dataclass(frozen=True, slots=True)
class PlacementEntry:
    """One op's counters at snapshot time (seconds and bytes)."""

    category: str
    calls: int
    host_s: float
    device_s: float
    h2d: int
    d2h: int
    source: str

    @property
    def bytes_moved(self) -> int:
        """Bytes copied host->device plus device->host."""
        return self.h2d + self.d2h

    def minus(self, before: PlacementEntry) -> PlacementEntry:
        """The counters accumulated since ``before`` (same op)."""
        return PlacementEntry(
            self.category,
            self.calls - before.calls,
            self.host_s - before.host_s,
            self.device_s - before.device_s,
            self.h2d - before.h2d,
            self.d2h - before.d2h,
            self.source,
        )


@dataclass(frozen=True, eq=False)
class PlacementSnapshot(Mapping[str, PlacementEntry]):
    """The placement log at one moment (or a window between two), by op (seconds and bytes).

    Aggregations are not here: ``trn_notebook.facts.simulator.placement_of(snapshot)`` gives the
    :class:`~trn_notebook.facts.base.Placement` every view aggregates through.
    """

    entries: dict[str, PlacementEntry] = field(default_factory=dict)

    def __getitem__(self, name: str) -> PlacementEntry:
        return self.entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __repr__(self) -> str:
        return f"PlacementSnapshot({self.entries!r})"

    def since(self, before: Mapping[str, PlacementEntry]) -> PlacementSnapshot:
        """This snapshot minus ``before`` (a per-cell window); ops with no new calls are dropped."""
        out: dict[str, PlacementEntry] = {}
        for name, e in self.entries.items():
            b = before.get(name)
            if b is None:
                out[name] = e
            elif e.calls != b.calls:
                out[name] = e.minus(b)
        return PlacementSnapshot(out)

    def frame(self) -> pd.DataFrame:
        """The entries as a DataFrame sorted by modeled device time (ms columns)."""
        import pandas as pd

        rows = [
            (name, e.category, e.calls, e.host_s * 1e3, e.device_s * 1e3, e.h2d, e.d2h, e.source)
            for name, e in self.entries.items()
        ]
        df = pd.DataFrame(rows, columns=list(COLUMNS))
        df["class"] = [aws_class_of(name, category) for name, category in zip(df["op"], df["category"], strict=True)]
        return df.sort_values(["device_ms", "calls"], ascending=False, ignore_index=True)


class PlacementLog:
    """Per-op counters keyed by base op name; thread-safe (backward runs on the autograd thread)."""

    def __init__(self) -> None:
        self.lock = _locks.ACCOUNTING
        self._entries: dict[str, list[Any]] = {}
        self._total_calls = 0
        self._version = 0
        # eager records not yet folded and their fold (set by .eager_records; every reader drains first)
        self.pending: list[Any] = []
        self.drain: Callable[[], None] = _no_drain

    @property
    def entries(self) -> dict[str, list[Any]]:
        """The live entries by op (pending eager records folded in)."""
        if self.pending:
            self.drain()
        return self._entries

    @entries.setter
    def entries(self, value: dict[str, list[Any]]) -> None:
        if self.pending:
            self.drain()
        self._entries = value

    @property
    def total_calls(self) -> int:
        """Calls recorded since the last reset."""
        if self.pending:
            self.drain()
        return self._total_calls

    @total_calls.setter
    def total_calls(self, value: int) -> None:
        if self.pending:
            self.drain()
        self._total_calls = value

    @property
    def version(self) -> int:
        """A counter that changes with every recorded call or reset."""
        if self.pending:
            self.drain()
        return self._version

    @version.setter
    def version(self, value: int) -> None:
        if self.pending:
            self.drain()
        self._version = value

    def record(self, name: str, category: str, host_s: float, device_s: float, h2d: int = 0, d2h: int = 0) -> None:
        """Add one call of op ``name``; captures the user's source line on the op's first call."""
        if self.pending:
            self.drain()
        self._record(name, category, host_s, device_s, h2d, d2h)

    def _record(self, name: str, category: str, host_s: float, device_s: float, h2d: int = 0, d2h: int = 0) -> None:
        """:meth:`record` without folding the pending records first (the fold itself calls it)."""
        entries = self._entries
        entry = entries.get(name)
        with self.lock:
            if entry is None:
                entry = entries.get(name)
                if entry is None:
                    entry = entries[name] = [category, 0, 0.0, 0.0, 0, 0, self.user_source()]
            entry[CALLS] += 1
            entry[HOST_S] += host_s
            entry[DEVICE_S] += device_s
            if h2d:  # most calls move nothing between host and device
                entry[H2D] += h2d
            if d2h:
                entry[D2H] += d2h
            if entry[CATEGORY] is not category:
                entry[CATEGORY] = category
            if category == "cpu_fallback" and entry[CALLS] > 1:
                # A fallback costs a sync and two copies anyway; naming its latest line keeps a per-cell
                # window pointing at the cell that made this call.
                entry[SOURCE] = self.user_source()
            self._total_calls += 1
            self._version += 1

    def user_source(self) -> str:
        """The user's line that called the op, named (:mod:`.source_lines`' rule)."""
        return user_source()

    def snapshot(self) -> PlacementSnapshot:
        """Every entry as a frozen :class:`PlacementEntry`, by op."""
        if self.pending:
            self.drain()
        with self.lock:
            return PlacementSnapshot({name: PlacementEntry(*e) for name, e in self._entries.items()})

    def frame(self, snapshot: Mapping[str, PlacementEntry] | None = None) -> pd.DataFrame:
        """The log (or a snapshot/difference of snapshots) as a DataFrame sorted by modeled device time."""
        snap = self.snapshot() if snapshot is None else snapshot
        if not isinstance(snap, PlacementSnapshot):
            snap = PlacementSnapshot(dict(snap))
        return snap.frame()

    def reset(self) -> None:
        """Forget every entry (pending eager records are folded first, so the clocks keep them)."""
        if self.pending:
            self.drain()
        with self.lock:
            self._entries = {}
            self._total_calls = 0
            self._version += 1


def _no_drain() -> None:
    """The fold before :mod:`.eager.records` installs its own (nothing is pending then)."""


def diff_snapshots(before: Mapping[str, PlacementEntry], after: PlacementSnapshot) -> PlacementSnapshot:
    """Entries of ``after`` minus ``before`` (a per-cell window); ops with no new calls are dropped."""
    return after.since(before)


placement_log = PlacementLog()
_state.register("placement_log", placement_log)
