"""TorchNeuron (``torch_neuronx``) behind the :class:`~.base.Backend` protocol, for a real Trn2/Trn3.

Placement comes from ``torch_neuronx.get_executed_ops()`` / ``get_fallback_ops()`` (costs not measured),
memory from ``torch.neuron.memory_stats()``, compile records from ``torch.neuron.get_dynamo_metrics()``,
the cache from ``TORCH_NEURONX_NEFF_CACHE_DIR`` (default ``/tmp/neff_cache``) and the device card from
``torch.neuron.get_device_properties(0)``. Not validated on real hardware yet: written against TorchNeuron's
documented names and exercised with the stand-in package in ``tests/facts/fake_hardware``.
"""

from __future__ import annotations

import importlib
from collections.abc import Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .. import envvars
from .base import NA, OpPlacement, Placement, SimulatorOnlyError, simulator_only

if TYPE_CHECKING:
    from ..compiler.compile_log import CompileRecord
    from ..device.memory.allocator import MemorySnapshot

DEFAULT_NEFF_CACHE = "/tmp/neff_cache"
MAX_CACHE_ENTRIES = 2_000  # NEFF cache entries listed (the directory can be large on a shared instance)
# MemoryCounters field -> torch.neuron.memory_stats() key (CUDA-style names, as TorchNeuron documents them)
_STAT_KEYS = {
    "allocated": "allocated_bytes.all.current",
    "active": "active_bytes.all.current",
    "reserved": "reserved_bytes.all.current",
    "peak_allocated": "allocated_bytes.all.peak",
    "peak_active": "active_bytes.all.peak",
    "peak_reserved": "reserved_bytes.all.peak",
    "num_allocs": "allocation.all.allocated",
    "num_frees": "allocation.all.freed",
    "num_alloc_retries": "num_alloc_retries",
    "num_ooms": "num_ooms",
    "num_segments": "segment.all.allocated",
    "num_segment_frees": "segment.all.freed",
}


def _neuronx() -> Any:
    return importlib.import_module("torch_neuronx")


def _device_module() -> Any:
    module = getattr(torch, "neuron", None)
    if module is None:
        _neuronx()  # importing the package attaches torch.neuron
        module = getattr(torch, "neuron", None)
    if module is None:
        raise RuntimeError("torch_neuronx is installed but torch.neuron is missing: reinstall torch-neuronx")
    return module


class TorchNeuronBackend:
    """The real ``neuron`` device through torch_neuronx's public functions."""

    is_simulator = False

    def __init__(self) -> None:
        self.name = f"TorchNeuron (torch_neuronx {getattr(_neuronx(), '__version__', NA)})"

    def executed_ops(self) -> dict[str, int | None]:
        """``torch_neuronx.get_executed_ops()``: a mapping op → calls, or a collection of names (calls None)."""
        ops = _neuronx().get_executed_ops()
        if isinstance(ops, dict):
            return {str(k): (int(v) if isinstance(v, int) else None) for k, v in sorted(ops.items())}
        return dict.fromkeys(sorted(str(op) for op in ops))

    def fallback_ops(self) -> list[str]:
        """``torch_neuronx.get_fallback_ops()``."""
        ops = _neuronx().get_fallback_ops()
        return sorted(str(op) for op in (ops.keys() if isinstance(ops, dict) else ops))

    def placement(self) -> Placement:
        """Executed ops with category native/cpu_fallback; costs, transfers and source lines not measured."""
        executed = self.executed_ops()
        fallbacks = set(self.fallback_ops())
        rows = {
            op: OpPlacement("cpu_fallback" if op in fallbacks else "native", executed.get(op))
            for op in sorted(set(executed) | fallbacks)
        }
        return Placement(rows, measured=False)

    def placement_version(self) -> Hashable | None:
        """Unknown (TorchNeuron keeps no version counter): views re-read placement every time."""
        return None

    def clear_op_tracking(self) -> None:
        """``torch_neuronx.clear_op_tracking()``."""
        _neuronx().clear_op_tracking()

    def memory_stats(self) -> dict[str, int]:
        """``torch.neuron.memory_stats()``."""
        return dict(_device_module().memory_stats())

    def memory_snapshot(self) -> MemorySnapshot:
        """``memory_stats()`` as a :class:`MemorySnapshot`; capacity from the device card; no phases, timeline
        or OOM events (those are the simulator's)."""
        from ..device.memory.allocator import MemoryCounters, MemorySnapshot

        stats = self.memory_stats()
        counters = MemoryCounters(**{k: int(stats.get(key, 0)) for k, key in _STAT_KEYS.items()})
        missing = frozenset(k for k, key in _STAT_KEYS.items() if key not in stats)
        capacity = self.device_properties().get("total_memory")
        return MemorySnapshot(counters, int(capacity) if isinstance(capacity, int) else 0, NA, {}, (), (), missing)

    def memory_version(self) -> Hashable | None:
        """Unknown: views re-read ``memory_stats()``."""
        return None

    def reset_peak_memory(self) -> None:
        """``torch.neuron.reset_peak_memory_stats()``; raises ``RuntimeError`` if this torch_neuronx lacks it."""
        self._call("reset_peak_memory_stats")

    def empty_cache(self) -> int | None:
        """``torch.neuron.empty_cache()``; the bytes released are not reported (None)."""
        self._call("empty_cache")
        return None

    def synchronize(self) -> None:
        """``torch.neuron.synchronize()``."""
        self._call("synchronize")

    def _call(self, name: str) -> Any:
        fn = getattr(_device_module(), name, None)
        if fn is None:
            raise RuntimeError(f"torch.neuron.{name}() is missing in {self.name}: update torch-neuronx")
        return fn()

    def compile_summary(self) -> None:
        """See :meth:`Backend.compile_summary`: TorchNeuron's dynamo metrics do not say whether the NEFF cache hit."""
        return None

    def compile_records(self) -> list[CompileRecord]:
        """``torch.neuron.get_dynamo_metrics()`` as compile records (:meth:`CompileRecord.from_metric`: compile
        seconds summed from the microsecond fields; no cache result, the metrics do not say)."""
        from ..compiler.compile_log import CompileRecord

        return [CompileRecord.from_metric(m) for m in _device_module().get_dynamo_metrics()]

    def cache_dir(self) -> Path | None:
        """``TORCH_NEURONX_NEFF_CACHE_DIR`` (default ``/tmp/neff_cache``), None when the cache is disabled."""
        if envvars.flag("TORCH_NEURONX_DISABLE_NEFF_CACHE"):
            return None
        return envvars.path("TORCH_NEURONX_NEFF_CACHE_DIR") or Path(DEFAULT_NEFF_CACHE)

    def compile_version(self) -> Hashable | None:
        """Unknown: views re-read ``get_dynamo_metrics()``."""
        return None

    def cache_entries(self) -> list[dict[str, Any]]:
        """The NEFF cache directory's entries (name, size, modification time; their contents are never read).

        Graph, kind and input signature are NA: the NEFF cache does not record them in a form we read.
        """
        root = self.cache_dir()
        if root is None or not root.is_dir():
            return []
        entries = []
        for child in sorted(root.iterdir())[:MAX_CACHE_ENTRIES]:
            files = [child] if child.is_file() else [f for f in child.rglob("*") if f.is_file()]
            entries.append(
                {
                    "key": child.name,
                    "graph_name": NA,
                    "kind": "neff",
                    "input_signature": [],
                    "bytes": sum(f.stat().st_size for f in files),
                    "created": child.stat().st_mtime,
                }
            )
        return entries

    def device_properties(self) -> dict[str, Any]:
        """``torch.neuron.get_device_properties(0)`` as a dict (``simulated=False``)."""
        module = _device_module()
        props = module.get_device_properties(0)
        if hasattr(props, "__dict__"):
            data = dict(vars(props))
        else:  # a C++ properties object (as torch.cuda's): its public, non-callable attributes
            data = {k: getattr(props, k) for k in dir(props) if not k.startswith("_")}
            data = {k: v for k, v in data.items() if not callable(v)}
        data.setdefault("name", module.get_device_name(0) if hasattr(module, "get_device_name") else NA)
        data["simulated"] = False
        return data

    def device_time_s(self) -> float | None:
        """Device time is not modeled on hardware: None (measure with torch.profiler)."""
        return None

    def reset_tracking(self) -> list[str]:
        """Clear op tracking, reset the memory peaks and the dynamo metrics (what this torch_neuronx offers)."""
        done = []
        self.clear_op_tracking()
        done.append("torch_neuronx op tracking")
        module = _device_module()
        for fn, what in (("reset_peak_memory_stats", "memory peaks"), ("reset_dynamo_metrics", "dynamo metrics")):
            if callable(getattr(module, fn, None)):
                getattr(module, fn)()
                done.append(what)
        return done

    def require_simulator(self, feature: str, instead: str) -> None:
        """Raise :class:`SimulatorOnlyError`: ``feature`` only exists in the simulator."""
        raise simulator_only(feature, instead, self.name)


__all__ = ["SimulatorOnlyError", "TorchNeuronBackend"]
