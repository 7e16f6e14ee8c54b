"""TorchNeuron (``torch_neuronx``) behind the :class:`~.base.Backend` protocol, for a real Trn2/Trn3.

Placement comes from ``torch_neuronx.get_executed_ops()`` / ``get_fallback_ops()`` (costs not measured),
memory from ``torch.neuron.memory_stats()``, compile records from ``torch.neuron.get_dynamo_metrics()``,
the cache from ``TORCH_NEURONX_NEFF_CACHE_DIR`` (default ``/tmp/neff_cache``) and the device card from
``torch.neuron.get_device_properties(0)``. Not validated on real hardware yet: written against TorchNeuron's
documented names and exercised with the stand-in package in ``tests/backends/fake_hardware``.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import torch

from .base import NA, SimulatorOnlyError, simulator_only

DEFAULT_NEFF_CACHE = "/tmp/neff_cache"
_US_FIELDS = ("fx_passes_us", "lowering_us", "compile_us")


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

    def placement(self) -> dict[str, dict[str, Any]]:
        """Executed ops with category native/cpu_fallback; costs, transfers and source lines not measured."""
        executed = self.executed_ops()
        fallbacks = set(self.fallback_ops())
        rows = {}
        for op in sorted(set(executed) | fallbacks):
            rows[op] = {
                "category": "cpu_fallback" if op in fallbacks else "native",
                "calls": executed.get(op),
                "host_ms": None,
                "device_ms": None,
                "bytes_h2d": None,
                "bytes_d2h": None,
                "source": None,
            }
        return rows

    def clear_op_tracking(self) -> None:
        """``torch_neuronx.clear_op_tracking()``."""
        _neuronx().clear_op_tracking()

    def memory_stats(self) -> dict[str, int]:
        """``torch.neuron.memory_stats()``."""
        return dict(_device_module().memory_stats())

    def compile_records(self) -> list[dict[str, Any]]:
        """``torch.neuron.get_dynamo_metrics()``, each with ``compile_s`` summed from its microsecond fields."""
        records = []
        for metric in _device_module().get_dynamo_metrics():
            record = dict(metric)
            spent = [float(record[k]) for k in _US_FIELDS if isinstance(record.get(k), int | float)]
            record.setdefault("compile_s", sum(spent) / 1e6 if spent else None)
            records.append(record)
        return records

    def cache_dir(self) -> Path | None:
        """``TORCH_NEURONX_NEFF_CACHE_DIR`` (default ``/tmp/neff_cache``), None when the cache is disabled."""
        if os.environ.get("TORCH_NEURONX_DISABLE_NEFF_CACHE") == "1":
            return None
        return Path(os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR", DEFAULT_NEFF_CACHE))

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

    def require_simulator(self, feature: str, instead: str) -> None:
        """Raise :class:`SimulatorOnlyError`: ``feature`` only exists in the simulator."""
        raise simulator_only(feature, instead, self.name)


__all__ = ["SimulatorOnlyError", "TorchNeuronBackend"]
