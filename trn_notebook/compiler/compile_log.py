"""The compile log: one record per compiled graph (single source of truth for magics and widgets).

Records are dicts with the public keys documented in :data:`FIELDS`; :meth:`CompileLog.snapshot`
returns copies, newest last. The executable updates ``runs`` and ``warm_s`` of its own record.
``torch.neuron.get_dynamo_metrics()`` is a view of this log with TorchNeuron's field names.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from typing import Any

STAGES = ("capture", "aot", "lower", "passes", "codegen", "cache_write")
FIELDS = (
    "graph_id", "graph_name", "model_name", "kind", "graph_node_count", "has_collectives", "timestamp",
    "input_signature", "stage_us", "compile_s", "cache_result", "fused_kernels", "ir_node_count",
    "modeled_device_s", "modeled_peak_bytes", "requested_options", "effective_options", "graph_breaks",
    "recompile_reasons", "runs", "warm_s",
)  # fmt: skip
CAPACITY = 2_000


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

    def snapshot(self) -> list[dict[str, Any]]:
        """Deep copies of every record, newest last."""
        with self.lock:
            return [copy.deepcopy(r) for r in self.records]

    def reset(self) -> None:
        """Forget every record."""
        with self.lock:
            self.records.clear()
            self.version += 1


compile_log = CompileLog()


def snapshot() -> list[dict[str, Any]]:
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
