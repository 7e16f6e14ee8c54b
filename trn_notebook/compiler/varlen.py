"""Compiled variable-length attention (``torch.nn.attention.varlen.varlen_attn``, native in TorchNeuron 2.34).

``varlen_attn`` reaches a compiled graph as PyTorch's custom ops ``torch_attn::_varlen_attn`` and (in training)
``torch_attn::_varlen_attn_backward``. Each lowers to one IR library kernel, ``varlen_attn`` /
``varlen_attn_backward``, run by the device's own per-sequence flash-attention kernels
(``device/eager/varlen_attention.py``: the same values as eager and as a per-sequence CPU SDPA).

**Cost, assumed**: a compiled schedule is static — priced when the graph compiles, before any offsets exist — so
it cannot see the real lengths eager charges. It prices flash attention over ``n`` sequences of equal length
(``n`` from ``cu_seq_q``'s shape, the packed totals from the query's and key's): ``4 · Tq · Tk · heads · dim / n``
forward, twice that backward. For equal lengths this is exact; for unequal lengths it under-prices (the sum of
``Lq·Lk`` is at least ``Tq·Tk/n``), never the padded maximum ``n · max_q · max_k``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.attention.varlen  # registers the torch_attn custom ops lowered here
from torch._subclasses.fake_tensor import is_fake

from ..device.eager.varlen_attention import flash_attention_backward, flash_attention_forward

FORWARD = torch.ops.torch_attn._varlen_attn.default
BACKWARD = torch.ops.torch_attn._varlen_attn_backward.default


def _window(window_size: Sequence[int] | None) -> tuple[int, int]:
    left, right = (-1, -1) if window_size is None else (int(window_size[0]), int(window_size[1]))
    return left, right


def varlen_forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seq_q: torch.Tensor,
    cu_seq_k: torch.Tensor | None,
    max_q: int,
    max_k: int,
    is_causal: bool = False,
    scale: float | None = None,
    window_size: Sequence[int] | None = None,
    enable_gqa: bool = False,
    seqused_k: torch.Tensor | None = None,
    block_table: torch.Tensor | None = None,
    num_splits: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch_attn::_varlen_attn`` on host tensors: ``(output, logsumexp, rng_state)`` as PyTorch returns them.

    Raises ``NotImplementedError`` for what the simulator does not model (``seqused_k``, ``block_table``).
    """
    if is_fake(query):  # the disk cache's check runs every op on fake tensors: PyTorch's own shape rule answers
        return FORWARD(
            query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, is_causal, scale, window_size, enable_gqa, seqused_k,
            block_table, num_splits,
        )  # fmt: skip
    left, right = _window(window_size)
    out, lse, *_ = flash_attention_forward(
        query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, 0.0, is_causal, False, scale=scale,
        window_size_left=left, window_size_right=right, seqused_k=seqused_k, block_table=block_table,
        num_splits=num_splits,
    )  # fmt: skip
    return out, lse, torch.zeros(2, dtype=torch.uint64, device=query.device)  # no dropout: a constant state


def varlen_backward(
    grad_out: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    cu_seq_q: torch.Tensor,
    cu_seq_k: torch.Tensor,
    max_q: int,
    max_k: int,
    is_causal: bool,
    rng_state: torch.Tensor,
    scale: float | None = None,
    window_size: Sequence[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``torch_attn::_varlen_attn_backward`` on host tensors: ``(grad_query, grad_key, grad_value)``."""
    if is_fake(query):
        return BACKWARD(
            grad_out, query, key, value, out, lse, cu_seq_q, cu_seq_k, max_q, max_k, is_causal, rng_state, scale,
            window_size,
        )  # fmt: skip
    left, right = _window(window_size)
    unused = query.new_empty(0)
    return flash_attention_backward(
        grad_out, query, key, value, out, lse, cu_seq_q, cu_seq_k, max_q, max_k, 0.0, is_causal, rng_state, unused,
        scale=scale, window_size_left=left, window_size_right=right,
    )  # fmt: skip


def _equal_lengths_flops(q: Sequence[int], k: Sequence[int], cu: Sequence[int]) -> float:
    sequences = max(int(cu[0]) - 1, 1)
    return 4.0 * q[0] * k[0] * q[1] * q[2] / sequences


def varlen_flops(ins: Sequence[Sequence[int]], out_numel: int) -> float:
    """Forward FLOPs over equal-length sequences (assumed; module docstring): query, key, value, cu_seq_q first."""
    if len(ins) < 4 or len(ins[0]) != 3:
        return 2.0 * out_numel
    return _equal_lengths_flops(ins[0], ins[1], ins[3])


def varlen_backward_flops(ins: Sequence[Sequence[int]], out_numel: int) -> float:
    """Backward FLOPs, twice the forward's: grad_out, query, key, value, out, lse, cu_seq_q first."""
    if len(ins) < 7 or len(ins[1]) != 3:
        return 2.0 * out_numel
    return 2.0 * _equal_lengths_flops(ins[1], ins[2], ins[6])
