"""Linear-algebra composites that run on the host as a whole (TorchNeuron runs linear algebra as a CPU fallback).

``linalg.pinv`` and ``linalg.matrix_rank`` build float64 tolerance scalars inside their ATen decomposition
(``renorm``'s backward a float64 norm);
on the device those would hit the float64 rejection although the user passed float32. Registered at
``AutogradPrivateUse1``, the kernels below copy the inputs to the host (differentiably), run the op there,
and copy the results back, so autograd records the host computation and its backward runs there too.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from ..ops.policy import registry
from ..placement import placement_log

# renorm's backward accumulates in float64 on any device but CUDA, so it joins the list.
HOST_COMPOSITES = tuple(r.name for r in registry.records() if r.host_composite)  # from the op registry


def _move(value: Any, to_host: bool) -> Any:
    if isinstance(value, torch.Tensor):
        if to_host:
            return value.cpu() if value.device.type == "neuron" else value
        return value.to("neuron")
    if isinstance(value, list | tuple):
        return type(value)(_move(v, to_host) for v in value)
    return value


def _host_kernel(op: torch._ops.OpOverload) -> Callable[..., Any]:
    name = op._schema.name.split("::", 1)[-1]

    def kernel(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = op(*_move(args, True), **{k: _move(v, True) for k, v in kwargs.items()})
        placement_log.record(name, "cpu_fallback", time.perf_counter() - t0, 0.0)
        return _move(out, False)

    return kernel


def register_host_composites(lib: torch.library.Library) -> list[str]:
    """Register the host kernels on ``lib`` (an ``aten`` IMPL library) for every functional overload."""
    names = []
    for base in HOST_COMPOSITES:
        packet = getattr(torch.ops.aten, base)
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments):
                continue  # out= overloads keep ATen's behaviour
            qualified = base if overload == "default" else f"{base}.{overload}"
            lib.impl(qualified, _host_kernel(op), "AutogradPrivateUse1")
            names.append(qualified)
    return names
