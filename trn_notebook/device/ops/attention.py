"""Attention on the device: ``scaled_dot_product_attention`` picks its kernel exactly as PyTorch's CPU does.

TorchNeuron documents SDPA as native, backed by flash-attention kernels. PyTorch's SDPA picks a
fused kernel only for devices with a registered (C++) choice stub, so on a PrivateUse1 device it
would always decompose into the math path. An ``AutogradPrivateUse1`` kernel replaces the composite
and does what ATen's composite does on the CPU, in the same order:

1. a boolean mask becomes an additive float mask in the query's dtype (``True`` = attend, ``False``
   = ``-inf``), as ``convert_boolean_attn_mask`` does; the fused and math kernels take additive masks
   only (a bool mask passed to them straight is silently wrong);
2. the kernel is chosen by ATen's own CPU selection (``aten::_fused_sdp_choice`` on tiny CPU probes
   with the same shapes, dtypes, last-dim stride kind and ``requires_grad``): flash attention unless a
   constraint rules it out (dropout, a mask that requires grad such as T5's learned position bias,
   unsupported shapes...), else the math path (GQA, dropout and ``is_causal`` + mask included).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_math = torch.ops.aten._scaled_dot_product_attention_math.default
_choice = torch.ops.aten._fused_sdp_choice.default
FLASH = 1  # torch.nn.attention.SDPBackend.FLASH_ATTENTION


def additive_mask(attn_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A boolean mask (True = attend) as ATen's composite converts it: 0 where True, -inf where False."""
    if attn_mask is None or attn_mask.dtype != torch.bool:
        return attn_mask
    zero = torch.zeros((), dtype=dtype, device=attn_mask.device)
    return zero.masked_fill(attn_mask.logical_not(), float("-inf"))


def _probe(t: torch.Tensor | None) -> torch.Tensor | None:
    """A tiny real CPU tensor with ``t``'s shape, dtype, last-dim stride kind and ``requires_grad``.

    ATen's CPU selection reads only those (its stride check is on the last dimension), so the probe
    needs no copy of the data and works for fake tensors while the compiler traces too.
    """
    if t is None:
        return None
    last = t.stride(-1) if t.dim() else 1
    n = t.shape[-1] if t.dim() else 1
    step = 1 if last == 1 or n <= 1 else 2
    base = torch.empty(max(n, 1) * step, dtype=t.dtype, device="cpu")
    probe = base.as_strided(tuple(t.shape), (0,) * (t.dim() - 1) + ((step,) if t.dim() else ()))
    if t.requires_grad and probe.is_floating_point():
        probe = probe.detach().requires_grad_(True)
    return probe


def choose_kernel(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
) -> int:
    """The ``SDPBackend`` value ATen's CPU selection picks for these inputs (mask already additive)."""
    with _disable_current_modes():  # probes are plain CPU tensors even while the compiler traces
        return int(
            _choice(
                _probe(query),
                _probe(key),
                _probe(value),
                _probe(attn_mask),
                dropout_p,
                is_causal,
                scale=scale,
                enable_gqa=enable_gqa,
            )
        )


def flash_or(fallback: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """An SDPA with ``F.scaled_dot_product_attention``'s signature: the fused flash kernel where the CPU picks it.

    Elsewhere it calls ``fallback(query, key, value, mask, dropout_p, is_causal, scale=, enable_gqa=)`` with
    the mask already additive. Raises what the chosen kernel raises (the CPU's own errors).
    """

    def attention(
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> torch.Tensor:
        mask = additive_mask(attn_mask, query.dtype)  # the fused and math kernels take additive masks only
        if choose_kernel(query, key, value, mask, dropout_p, is_causal, scale, enable_gqa) == FLASH:
            return _flash(query, key, value, dropout_p, is_causal, attn_mask=mask, scale=scale)[0]
        return fallback(query, key, value, mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)

    return attention


def _math_output(*args: Any, **kwargs: Any) -> torch.Tensor:
    """ATen's math SDPA, its output only (not the attention weights)."""
    return _math(*args, **kwargs)[0]


sdpa = flash_or(_math_output)
"""SDPA for neuron tensors: the kernel CPU PyTorch would choose; raises what the CPU raises."""


def register_attention(lib: torch.library.Library) -> None:
    """Register :func:`sdpa` for the ``AutogradPrivateUse1`` key on ``lib`` (an ``aten`` IMPL library)."""
    lib.impl("scaled_dot_product_attention", sdpa, "AutogradPrivateUse1")
