"""The compile log: one record per compiled graph (single source of truth for magics and widgets).

The live records are typed :class:`LiveRecord` objects the backend fills while it compiles; runs are
counted by :meth:`CompileLog.record_run` under the log's lock. :meth:`CompileLog.snapshot` returns frozen
:class:`CompileRecord` copies, newest last, each built once per change of its record (a status refresh
or a view reading the log after a warm call copies only the record that ran). Readers use its
attributes; keys other modules added to a live record are in ``extra``. On TorchNeuron the read layer
builds the same records from ``get_dynamo_metrics()`` (:meth:`CompileRecord.from_metric`).
``torch.neuron.get_dynamo_metrics()`` is a view of this log with TorchNeuron's field names.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import locks as _locks
from .. import state as _state
from ..display.format import COMPILE_STAGES
from .compile_time import record_compile_s

STAGES = COMPILE_STAGES
FIELDS = (
    "graph_id", "graph_name", "model_name", "kind", "graph_node_count", "has_collectives", "timestamp",
    "input_signature", "stage_us", "compile_s", "cache_result", "fused_kernels", "ir_node_count",
    "modeled_device_s", "modeled_peak_bytes", "requested_options", "effective_options", "graph_breaks",
    "recompile_reasons", "runs", "warm_s",
)  # fmt: skip
CAPACITY = 2_000
CacheResult = Literal["miss", "memory hit", "disk hit"]


@dataclass(slots=True, eq=False)
class LiveRecord:
    """The compile log's live record of one graph: written by the backend while it compiles, then only
    by :meth:`CompileLog.record_run` (under the log's lock). Readers use :meth:`CompileLog.snapshot`."""

    graph_name: str
    model_name: str
    kind: str
    graph_node_count: int
    timestamp: float
    input_signature: list[str]
    stage_us: dict[str, float]
    requested_options: dict[str, Any]
    effective_options: dict[str, Any]
    graph_breaks: list[dict[str, str]]
    recompile_reasons: list[str]
    graph_id: str = ""
    has_collectives: bool = False
    compile_s: float = 0.0
    cache_result: CacheResult = "miss"
    fused_kernels: int = 0
    ir_node_count: int = 0
    modeled_device_s: float = 0.0
    modeled_peak_bytes: int = 0
    runs: int = 0
    warm_s: float = 0.0
    error: str | None = None
    fallback: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    changes: int = 0  # moves with every change after the record was added (runs)
    frozen: CompileRecord | None = None  # the last frozen copy and the `changes` it was built at
    frozen_at: int = -1


@dataclass(frozen=True)
class CompileRecord:
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
    compile_s: float | None  # None: the backend does not say (a TorchNeuron metric without stage times)
    cache_result: CacheResult | None  # None: the backend does not say (TorchNeuron's metrics)
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
    def from_live(cls, r: LiveRecord) -> CompileRecord:
        """A frozen copy of a live record (its containers copied, one level deep)."""
        return cls(
            r.graph_id, r.graph_name, r.model_name, r.kind, r.graph_node_count, r.has_collectives, r.timestamp,
            list(r.input_signature), dict(r.stage_us), r.compile_s, r.cache_result, r.fused_kernels,
            r.ir_node_count, r.modeled_device_s, r.modeled_peak_bytes, dict(r.requested_options),
            dict(r.effective_options), [dict(b) for b in r.graph_breaks], list(r.recompile_reasons), r.runs,
            r.warm_s, r.error, r.fallback, dict(r.extra),
        )  # fmt: skip

    @classmethod
    def from_metric(cls, metric: Mapping[str, Any]) -> CompileRecord:
        """A record from one of TorchNeuron's ``get_dynamo_metrics()`` dicts: the fields it carries, its
        compile seconds summed from its microsecond stage fields (None without any); what it does not say
        (cache result, modeled figures, runs) left empty. Other keys go to ``extra``. Never raises for
        missing keys; raises ``TypeError``/``ValueError`` for a field of the wrong kind."""
        spent = [float(metric[k]) for k in METRIC_US_FIELDS if isinstance(metric.get(k), int | float)]
        compile_s = metric.get("compile_s")
        if compile_s is None and spent:
            compile_s = sum(spent) / 1e6
        known = {"graph_id", "graph_name", "model_name", "kind", "graph_node_count", "has_collectives", "timestamp",
                 "compile_s", "input_signature", *METRIC_US_FIELDS}  # fmt: skip
        return cls(
            str(metric.get("graph_id", "")), str(metric.get("graph_name", "")), str(metric.get("model_name", "")),
            str(metric.get("kind", "")), int(metric.get("graph_node_count") or 0),
            bool(metric.get("has_collectives", False)), float(metric.get("timestamp") or 0.0),
            [str(x) for x in metric.get("input_signature") or []],
            {k.removesuffix("_us"): float(metric[k]) for k in METRIC_US_FIELDS if isinstance(metric.get(k), int | float)},
            None if compile_s is None else float(compile_s),
            None, 0, 0, 0.0, 0, {}, {}, [], [], 0, 0.0,
            extra={k: v for k, v in metric.items() if k not in known},
        )  # fmt: skip

    @property
    def is_hit(self) -> bool:
        """True when the graph came from the memory or disk cache (:func:`cache_hit`)."""
        return cache_hit(self.cache_result) is True

    __hash__ = None  # type: ignore[assignment]  # holds dicts; compare by value


METRIC_US_FIELDS = ("fx_passes_us", "lowering_us", "compile_us")  # TorchNeuron's stage times (µs)
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
    # modeled Neuron compile seconds of the misses (compile_time.record_compile_s); None: no miss says
    modeled_neuron_s: float | None = None

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
    def of(cls, records: Iterable[Mapping[str, Any] | LiveRecord | CompileRecord]) -> CompileSummary:
        """The summary of ``records`` (compile records, live records or TorchNeuron metric dicts)."""
        n = misses = mem = disk = unknown = 0
        miss_s = disk_s = total_s = 0.0
        modeled: list[float] = []
        for r in records:
            n += 1
            result: object
            if isinstance(r, LiveRecord | CompileRecord):
                result, seconds = r.cache_result, float(r.compile_s or 0.0)
            else:
                result, seconds = r.get("cache_result"), float(r.get("compile_s") or 0.0)
            total_s += seconds
            if result == "miss":
                misses, miss_s = misses + 1, miss_s + seconds
                m = record_compile_s(r.extra if isinstance(r, LiveRecord | CompileRecord) else r)
                if m is not None:
                    modeled.append(m)
            elif result == "disk hit":
                disk, disk_s = disk + 1, disk_s + seconds
            elif result == "memory hit":
                mem += 1
            else:
                unknown += 1
        return cls(n, misses, mem, disk, unknown, miss_s, disk_s, total_s, sum(modeled) if modeled else None)


class CompileLog:
    """Bounded list of compile records; thread-safe."""

    def __init__(self) -> None:
        self.lock = _locks.make("leaf", "compile log")
        self.records: deque[LiveRecord] = deque(maxlen=CAPACITY)
        self.version = 0
        self._added = 0  # moves when a record is added or the log is reset (not on runs)
        self._summary: tuple[int, CompileSummary] = (0, CompileSummary())

    def add(self, record: LiveRecord) -> LiveRecord:
        """Append a record (returned: the executable counts its runs with :meth:`record_run`)."""
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

    def record_run(self, record: LiveRecord, wall_s: float) -> None:
        """Count one run of ``record``'s graph that took ``wall_s`` seconds (under the log's lock)."""
        with self.lock:
            record.runs += 1
            record.warm_s = wall_s
            record.changes += 1
            self.version += 1

    def snapshot(self) -> list[CompileRecord]:
        """Frozen copies of every record, newest last (a record's copy is rebuilt only after it changed)."""
        with self.lock:
            out = []
            for r in self.records:
                if r.frozen_at != r.changes or r.frozen is None:
                    r.frozen, r.frozen_at = CompileRecord.from_live(r), r.changes
                out.append(r.frozen)
            return out

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
        st = r.stage_us
        out.append(
            {
                "graph_id": r.graph_id,
                "graph_name": r.graph_name,
                "model_name": r.model_name,
                "graph_node_count": r.graph_node_count,
                "has_collectives": r.has_collectives,
                "timestamp": r.timestamp,
                "fx_passes_time_us": st.get("capture", 0.0) + st.get("aot", 0.0),
                "lowering_time_us": st.get("lower", 0.0),
                "compile_time_us": st.get("passes", 0.0) + st.get("codegen", 0.0),
                "cache_write_time_us": st.get("cache_write", 0.0),
                "cache_result": r.cache_result,
                "fused_kernels": r.fused_kernels,
                "modeled_device_s": r.modeled_device_s,
                "modeled_peak_bytes": r.modeled_peak_bytes,
                # the Neuron compiler's modeled time for this graph (compile_time.py; ours is measured above)
                "modeled_neuron_compile_s": record_compile_s(r),
                "requested_options": dict(r.requested_options),
                "effective_options": dict(r.effective_options),
            }
        )
    return out


def reset_dynamo_metrics() -> None:
    """Clear the per-graph metrics (the compile log)."""
    compile_log.reset()
