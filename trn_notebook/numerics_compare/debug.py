"""The first ATen op of one module whose output differs between CPU FP32 and neuron (PyTorch's DebugMode).

The module is replayed on the FP32 run's own inputs, once on the CPU copy and once on the neuron copy,
each under ``torch.utils._debug_mode.DebugMode`` with ``log_tensor_hashes`` (the L1 norm, taken on the host); PyTorch's
``DebugMode.check_hash_mismatches`` lists the ops whose output hashes (L1 norms) differ, and the first
one is named. Fed the same FP32 inputs, a differing op is the module's own divergence, not inherited.
"""

from __future__ import annotations

from typing import Any

import torch

from .capture import ModuleCall, to_device

__all__ = ["first_differing_op"]


def _host_norm(t: torch.Tensor) -> float:
    """DebugMode's "norm" hash (the L1 norm) computed on the host in float64: the device has no float64."""
    return float(t.detach().cpu().double().abs().sum())


def _logs(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    from torch.utils._debug_mode import DebugMode

    with torch.no_grad(), DebugMode() as mode, DebugMode.log_tensor_hashes(_host_norm):
        module(*args, **kwargs)
    return mode.logs


def first_differing_op(ref_model: torch.nn.Module, dev_model: torch.nn.Module, call: ModuleCall) -> str:
    """A sentence naming the first op of ``call``'s module whose neuron output hash differs from CPU FP32's
    (or why none could be named). Never raises for a replay that fails: the reason is the answer."""
    if call.inputs is None:
        return "not replayed (the module's inputs were not kept)"
    args, kwargs = call.inputs
    try:
        ref = _logs(ref_model.get_submodule(call.name), args, kwargs)
        dev = _logs(dev_model.get_submodule(call.name), to_device(args, "neuron"), to_device(kwargs, "neuron"))
        from torch.utils._debug_mode import DebugMode

        mismatches = DebugMode.check_hash_mismatches(ref, dev)
    except Exception as exc:  # DebugMode is a private PyTorch tool: its failure must not hide the table
        return f"not found: DebugMode could not compare the two runs ({type(exc).__name__}: {str(exc)[:160]})"
    if not mismatches:
        return (
            f"none inside {call.key or '(model)'} on identical FP32 inputs: its error is inherited from earlier modules"
        )
    m = mismatches[0]
    rel = m.get("rel_diff")
    where = f" output {m['pytree_path']}" if m.get("pytree_path") else ""
    return (
        f"{m['call']}{where} (first of {len(mismatches)} ops whose output hash differs inside "
        f"{call.key or '(model)'}; hash rel. diff {rel:.3g}; torch.utils._debug_mode.DebugMode)"
        if isinstance(rel, float)
        else f"{m['call']}{where} (DebugMode hash mismatch inside {call.key or '(model)'})"
    )
