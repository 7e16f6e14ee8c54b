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
from collections.abc import Iterator, Mapping
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
        """True when the graph came from the memory or disk cache."""
        return self.cache_result != "miss"

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


class CompileLog:
    """Bounded list of compile records; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: deque[dict[str, Any]] = deque(maxlen=CAPACITY)
        self.version = 0

    def add(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append a record (the live dict is returned so the executable can count runs)."""
        with self.lock:
            self.records.append(record)
            self.version += 1
        return record

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
