"""Attention on the device: ``scaled_dot_product_attention`` runs the fused flash kernel.

TorchNeuron documents SDPA as native, backed by flash-attention kernels. PyTorch's SDPA picks a
fused kernel only for devices with a registered choice stub, so on a PrivateUse1 device it would
decompose into the math path (bmm, softmax, bmm): slower here and unlike the real device. An
``AutogradPrivateUse1`` kernel sends eligible calls to ATen's flash-attention op (whose autograd
formula gives the fused backward) and everything else to the math path.
"""

from __future__ import annotations

from typing import Any

import torch

_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_math = torch.ops.aten._scaled_dot_product_attention_math.default


def flash_applies(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    enable_gqa: bool,
) -> bool:
    """True when ATen's fused flash-attention kernel computes this attention call exactly."""
    return (
        dropout_p == 0.0
        and not enable_gqa
        and query.dim() == 4
        and query.shape == key.shape == value.shape
        and query.dtype == key.dtype == value.dtype
        and (attn_mask is None or attn_mask.dtype == query.dtype)
    )


def sdpa(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    """SDPA for neuron tensors: the fused flash kernel when it applies, else the math decomposition."""
    if flash_applies(query, key, value, attn_mask, dropout_p, enable_gqa):
        return _flash(query, key, value, 0.0, is_causal, attn_mask=attn_mask, scale=scale)[0]
    return _math(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)[0]


def register_attention(lib: torch.library.Library) -> None:
    """Register :func:`sdpa` for the ``AutogradPrivateUse1`` key on ``lib`` (an ``aten`` IMPL library)."""
    lib.impl("scaled_dot_product_attention", sdpa, "AutogradPrivateUse1")
