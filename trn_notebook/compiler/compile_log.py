"""The compile log: one record per compiled graph (single source of truth for magics and widgets).

The live records are dicts with the public keys of :data:`FIELDS` (the executable updates ``runs`` and
``warm_s`` of its own record); :meth:`CompileLog.snapshot` returns frozen :class:`CompileRecord`
copies, newest last. A record is also readable as a mapping (``r["graph_name"]``, ``r.get(...)``).
``torch.neuron.get_dynamo_metrics()`` is a view of this log with TorchNeuron's field names.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import state as _state
from ..presentation import COMPILE_STAGES

STAGES = COMPILE_STAGES
FIELDS = (
    "graph_id", "graph_name", "model_name", "kind", "graph_node_count", "has_collectives", "timestamp",
    "input_signature", "stage_us", "compile_s", "cache_result", "fused_kernels", "ir_node_count",
    "modeled_device_s", "modeled_peak_bytes", "requested_options", "effective_options", "graph_breaks",
    "recompile_reasons", "runs", "warm_s",
)  # fmt: skip
CAPACITY = 2_000
CacheResult = Literal["miss", "memory hit", "disk hit"]


@dataclass(frozen=True)
class CompileRecord(Mapping[str, Any]):
    """One compiled graph at snapshot time: identity, stage times (µs), cache result, modeled cost, runs."""

    graph_id: str
    graph_name: str
    model_name: str
    kind: str
    graph_node_count: int
    has_collectives: bool
    timestamp: float
    input_signature: list[str]
    stage_us: dict[str, float]
    compile_s: float
    cache_result: CacheResult
    fused_kernels: int
    ir_node_count: int
    modeled_device_s: float
    modeled_peak_bytes: int
    requested_options: dict[str, Any]
    effective_options: dict[str, Any]
    graph_breaks: list[dict[str, str]]
    recompile_reasons: list[str]
    runs: int
    warm_s: float
    error: str | None = None
    fallback: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # keys other modules added to the live record

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CompileRecord:
        """A frozen copy of a live record dict; raises ``KeyError`` naming a missing public field."""
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        missing = [k for k in FIELDS if k not in d]
        if missing:
            raise KeyError(f"compile record lacks {missing}")
        known = {k: copy.deepcopy(v) for k, v in d.items() if k in names}
        extra = {k: copy.deepcopy(v) for k, v in d.items() if k not in names}
        return cls(**known, extra=extra)

    @property
    def is_hit(self) -> bool:
        """True when the graph came from the memory or disk cache (:func:`cache_hit`)."""
        return cache_hit(self.cache_result) is True

    def _keys(self) -> list[str]:
        keys = list(FIELDS)
        if self.error is not None:
            keys.append("error")
        if self.fallback:
            keys.append("fallback")
        return keys + list(self.extra)

    def __getitem__(self, key: str) -> Any:
        if key in self.extra:
            return self.extra[key]
        if key in FIELDS or (key == "error" and self.error is not None) or (key == "fallback" and self.fallback):
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    __hash__ = None  # type: ignore[assignment]  # holds dicts; compare by value


HIT_RESULTS: tuple[CacheResult, ...] = ("memory hit", "disk hit")


def cache_hit(result: object) -> bool | None:
    """The one rule for a compile-cache hit: True for ``"memory hit"``/``"disk hit"``, False for ``"miss"``,
    None when the record does not say (TorchNeuron's dynamo metrics carry no cache result)."""
    if result in HIT_RESULTS:
        return True
    return False if result == "miss" else None


@dataclass(frozen=True)
class CompileSummary:
    """Cache results and compile seconds of a set of compile records, counted by :func:`cache_hit`."""

    graphs: int = 0
    misses: int = 0
    memory_hits: int = 0
    disk_hits: int = 0
    unknown: int = 0  # records that do not say hit or miss
    miss_compile_s: float = 0.0
    disk_hit_compile_s: float = 0.0
    compile_s: float = 0.0

    @property
    def hits(self) -> int:
        """Memory plus disk hits."""
        return self.memory_hits + self.disk_hits

    @property
    def known(self) -> bool:
        """True when every record says hit or miss (False on hardware, whose metrics do not)."""
        return self.unknown == 0

    @property
    def by_result(self) -> dict[str, int]:
        """``{"miss": n, "memory hit": n, "disk hit": n}``, the results present, in that order."""
        counts = {"miss": self.misses, "memory hit": self.memory_hits, "disk hit": self.disk_hits}
        return {k: v for k, v in counts.items() if v}

    @classmethod
    def of(cls, records: Iterable[Mapping[str, Any]]) -> CompileSummary:
        """The summary of ``records`` (compile records or TorchNeuron metric dicts)."""
        n = misses = mem = disk = unknown = 0
        miss_s = disk_s = total_s = 0.0
        for r in records:
            n += 1
            result = r.get("cache_result")
            seconds = float(r.get("compile_s") or 0.0)
            total_s += seconds
            if result == "miss":
                misses, miss_s = misses + 1, miss_s + seconds
            elif result == "disk hit":
                disk, disk_s = disk + 1, disk_s + seconds
            elif result == "memory hit":
                mem += 1
            else:
                unknown += 1
        return cls(n, misses, mem, disk, unknown, miss_s, disk_s, total_s)


class CompileLog:
    """Bounded list of compile records; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: deque[dict[str, Any]] = deque(maxlen=CAPACITY)
        self.version = 0
        self._added = 0  # moves when a record is added or the log is reset (not on runs)
        self._summary: tuple[int, CompileSummary] = (0, CompileSummary())

    def add(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append a record (the live dict is returned so the executable can count runs)."""
        with self.lock:
            self.records.append(record)
            self.version += 1
            self._added += 1
        return record

    def summary(self) -> CompileSummary:
        """Cache results and compile seconds of the records held, counted once per added record (a run of
        a compiled graph changes no cache result, so warm calls reuse the count; no record is copied)."""
        with self.lock:
            if self._summary[0] != self._added:
                self._summary = (self._added, CompileSummary.of(self.records))
            return self._summary[1]

    def touch(self) -> None:
        """Mark the log changed (after a record's ``runs``/``warm_s`` update)."""
        self.version += 1

    def snapshot(self) -> list[CompileRecord]:
        """Frozen copies of every record, newest last."""
        with self.lock:
            return [CompileRecord.from_dict(r) for r in self.records]

    def reset(self) -> None:
        """Forget every record."""
        with self.lock:
            self.records.clear()
            self.version += 1
            self._added += 1


compile_log = CompileLog()
_state.register("compile_log", compile_log)


def snapshot() -> list[CompileRecord]:
    """Module-level shortcut for ``compile_log.snapshot()``."""
    return compile_log.snapshot()


def reset() -> None:
    """Module-level shortcut for ``compile_log.reset()``."""
    compile_log.reset()


def get_dynamo_metrics() -> list[dict[str, Any]]:
    """Per-graph metrics with TorchNeuron's field names (µs per stage) plus the simulator's own fields."""
    out = []
    for r in compile_log.snapshot():
        st = r["stage_us"]
        out.append(
            {
                "graph_id": r["graph_id"],
                "graph_name": r["graph_name"],
                "model_name": r["model_name"],
                "graph_node_count": r["graph_node_count"],
                "has_collectives": r["has_collectives"],
                "timestamp": r["timestamp"],
                "fx_passes_time_us": st.get("capture", 0.0) + st.get("aot", 0.0),
                "lowering_time_us": st.get("lower", 0.0),
                "compile_time_us": st.get("passes", 0.0) + st.get("codegen", 0.0),
                "cache_write_time_us": st.get("cache_write", 0.0),
                "cache_result": r["cache_result"],
                "fused_kernels": r["fused_kernels"],
                "modeled_device_s": r["modeled_device_s"],
                "modeled_peak_bytes": r["modeled_peak_bytes"],
                "requested_options": r["requested_options"],
                "effective_options": r["effective_options"],
            }
        )
    return out


def reset_dynamo_metrics() -> None:
    """Clear the per-graph metrics (the compile log)."""
    compile_log.reset()
