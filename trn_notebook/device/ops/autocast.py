"""``torch.autocast("neuron")``: the cast policy, mirroring CUDA's lists for the ops models use.

Each op's class (``"lower"``: runs in the autocast dtype, bfloat16 by default — CUDA's
lower_precision_fp list, abridged; ``"float32"``: numerically sensitive, runs in float32 whatever its
inputs) is the ``autocast`` field of its record in the op registry (:mod:`.op_table`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .policy import registry

_KEY = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)


def _cast(value: Any, dtype: torch.dtype) -> Any:
    """``value`` (a tensor, or tensors in a list/tuple) cast to ``dtype`` where autocast casts: floating
    point neuron tensors, except float64, which CUDA's and CPU's autocast leave alone (``is_eligible``)."""
    if isinstance(value, torch.Tensor):
        eligible = value.is_floating_point() and value.dtype not in (dtype, torch.float64)
        if eligible and value.device.type == "neuron":
            return value.to(dtype)
        return value
    if isinstance(value, list | tuple):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _kernel(op: torch._ops.OpOverloadPacket | torch._ops.OpOverload, lower: bool) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        dtype = torch.get_autocast_dtype("neuron") if lower else torch.float32
        with torch._C._ExcludeDispatchKeyGuard(_KEY):
            return op(*_cast(args, dtype), **{k: _cast(v, dtype) for k, v in kwargs.items()})

    return kernel


def register_autocast_kernels(lib: torch.library.Library) -> None:
    """Register the autocast kernels on ``lib`` (an ``aten`` IMPL library)."""
    for record in registry.records():
        if record.autocast is None:
            continue
        lower = record.autocast == "lower"
        packet = getattr(torch.ops.aten, record.name, None)
        if packet is None:
            continue
        overload = record.autocast_overload
        for ov in [overload] if overload else packet.overloads():
            op = getattr(packet, ov)
            lib.impl(
                op._schema.name.split("::")[1] + ("." + ov if ov != "default" else ""),
                _kernel(op, lower),
                "AutocastPrivateUse1",
            )
