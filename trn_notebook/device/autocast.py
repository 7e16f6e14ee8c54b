"""``torch.autocast("neuron")``: the cast policy, mirroring CUDA's lists for the ops models use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_KEY = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)

# Ops that run in the autocast dtype (bfloat16 by default) — CUDA's lower_precision_fp list, abridged.
LOWER_PRECISION = (
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "addbmm",
    "matmul",
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "_convolution",
    "convolution",
    "prelu",
    "scaled_dot_product_attention",
    "chain_matmul",
    "addmv",
    "mv",
)
# Ops that run in float32 whatever their inputs (numerically sensitive).
FLOAT32 = (
    "softmax.int",
    "log_softmax.int",
    "layer_norm",
    "group_norm",
    "cross_entropy_loss",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "binary_cross_entropy_with_logits",
    "cumsum",
    "exp",
    "log",
    "pow.Tensor_Scalar",
    "sum",
    "prod",
    "norm.Scalar",
    "rsqrt",
    "erfinv",
    "softplus",
    "cosine_similarity",
    "kl_div",
    "batch_norm",
)


def _cast(value: Any, dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() and value.dtype != dtype and value.device.type == "neuron":
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
    for names, lower in ((LOWER_PRECISION, True), (FLOAT32, False)):
        for name in names:
            base, _, overload = name.partition(".")
            packet = getattr(torch.ops.aten, base, None)
            if packet is None:
                continue
            for ov in [overload] if overload else packet.overloads():
                op = getattr(packet, ov)
                lib.impl(
                    op._schema.name.split("::")[1] + ("." + ov if ov != "default" else ""),
                    _kernel(op, lower),
                    "AutocastPrivateUse1",
                )
