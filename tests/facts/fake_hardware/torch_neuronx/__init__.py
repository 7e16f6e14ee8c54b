"""A stand-in for TorchNeuron's ``torch_neuronx`` with canned answers (tests only; never installed).

Like the real package it provides the ``torch.neuron`` module (through its ``torch.backends`` entry
point, so plain ``import torch`` loads it), declares the ``neuron``
``torch_dynamo_backends`` entry point, and answers the placement / memory / compile-metric / device queries
with fixed values. By default tensors cannot live on this device: it has no kernels (the tests use CPU
tensors). With ``FAKE_NEURONX_DEVICE=1`` the ``neuron`` device exists and computes with trn_notebook's
simulator kernels (registered directly, as a stand-in for TorchNeuron's runtime), while every fact
(placement, memory, compile metrics, device card) still comes from the canned answers below — so a view that
shows the simulator's own figures instead of these is reading the wrong backend. In that mode import torch
before trn_notebook (the borrowed kernels cannot register while trn_notebook itself is being imported).
"""

from __future__ import annotations

import os
import types
from typing import Any

__version__ = "2.14.0+fake"

_executed: dict[str, int] = {"aten::mm": 4, "aten::add.Tensor": 2, "aten::_linalg_svd": 1}
_fallback: list[str] = ["aten::_linalg_svd"]
_metrics: list[dict[str, Any]] = []
compiled_graphs: list[int] = []  # node counts of the graphs the fake compiler was handed


def get_executed_ops() -> dict[str, int]:
    """Canned op counts."""
    return dict(_executed)


def get_fallback_ops() -> list[str]:
    """Canned fallback ops."""
    return list(_fallback)


def clear_op_tracking() -> None:
    """Forget the canned ops."""
    _executed.clear()
    _fallback.clear()


def neuron_backend(gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
    """The fake compiler: records a metric like TorchNeuron's and runs the graph eagerly."""
    nodes = len(gm.graph.nodes)
    compiled_graphs.append(nodes)
    _metrics.append(
        {
            "graph_id": f"fake{len(_metrics)}",
            "graph_name": "forward",
            "model_name": "model_default",
            "graph_node_count": nodes,
            "has_collectives": False,
            "timestamp": 0.0,
            "fx_passes_us": 10.0,
            "lowering_us": 20.0,
            "compile_us": 1_000_000.0,
        }
    )
    return gm.forward


def _device_module(mod: types.ModuleType | None = None) -> types.ModuleType:
    """``torch.neuron`` with the canned answers (set on ``mod`` when given: the device-backed variant)."""
    mod = types.ModuleType("torch.neuron") if mod is None else mod
    stats = {
        "allocated_bytes.all.current": 3 << 20,
        "allocated_bytes.all.peak": 5 << 20,
        "reserved_bytes.all.current": 8 << 20,
        "reserved_bytes.all.peak": 8 << 20,
        "active_bytes.all.current": 3 << 20,
        "active_bytes.all.peak": 5 << 20,
        "num_alloc_retries": 0,
        "num_ooms": 0,
    }
    props = types.SimpleNamespace(name="Trainium2 (fake)", total_memory=24 << 30, logical_core_count=8)
    mod.is_available = lambda: True
    mod.device_count = lambda: 8
    mod.current_device = lambda: 0
    mod.get_device_name = lambda device=None: props.name
    mod.get_device_properties = lambda device=None: props
    mod.memory_stats = lambda device=None: dict(stats)
    mod.memory_allocated = lambda device=None: stats["allocated_bytes.all.current"]
    mod.max_memory_allocated = lambda device=None: stats["allocated_bytes.all.peak"]
    mod.memory_reserved = lambda device=None: stats["reserved_bytes.all.current"]
    mod.synchronize = lambda device=None: None
    mod.get_dynamo_metrics = lambda: [dict(m) for m in _metrics]
    mod.reset_dynamo_metrics = _metrics.clear
    mod.reset_peak_memory_stats = lambda device=None: None
    mod.empty_cache = lambda: None
    return mod


def _autoload() -> None:
    """``torch.backends`` entry point: provide ``torch.neuron``, as the real package does.

    The PrivateUse1 name is left alone: renaming it without a C++ runtime behind it breaks dynamo's stream
    handling, so the simulator's device still stands down (it sees torch_neuronx) and no tensor is "neuron".
    """
    import torch

    if os.environ.get("FAKE_NEURONX_DEVICE") == "1":
        from trn_notebook.device.registration import register

        register()  # the device and its kernels (the simulator's); its facts are replaced below
        _device_module(torch.neuron)
        return
    if getattr(torch, "neuron", None) is None:
        torch.neuron = _device_module()


_autoload()
