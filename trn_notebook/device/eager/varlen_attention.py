"""Variable-length (packed) attention on neuron: ``torch.nn.attention.varlen.varlen_attn``, native in TorchNeuron 2.34.

``varlen_attn`` calls ``aten::_flash_attention_forward`` / ``_flash_attention_backward`` on sequences packed
along dim 0 (``query`` is ``(total_q, heads, head_dim)``, ``cu_seq_q`` their offsets). PyTorch has a kernel for
them on CUDA only. On neuron each sequence runs as one flash-attention call over its own length
(``_scaled_dot_product_flash_attention_for_cpu`` and its backward, native ops of the device's table), so the
cost charged is flash attention over the real lengths, never over the padded maximum, and the values are those
of per-sequence SDPA. Grouped-query attention (fewer key/value heads) repeats each key/value head for its query
heads and sums the gradients back. A causal mask is aligned to the bottom right when a sequence's query and key
lengths differ, as flash attention's varlen kernels align it; sliding windows are masks of the same alignment.
"""

from __future__ import annotations

from typing import Any

import torch

from ..memory.runtime import host_view
from ..ops.attention import _flash as _fwd  # the native flash-attention op sdpa runs on too
from ..ops.attention import additive_mask

_bwd = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default


def _offsets(cu: torch.Tensor) -> list[int]:
    """The offsets read from the tensor's bytes (simulator mechanics: no device-to-host copy is modeled)."""
    return [int(v) for v in (host_view(cu) if cu.device.type == "neuron" else cu).tolist()]


def _mask(lq: int, lk: int, causal: bool, left: int | None, right: int | None, device: torch.device) -> Any:
    """``(is_causal, attn_mask)`` for one sequence: the plain causal flag when it means the same thing (equal
    lengths, no window), else a boolean mask aligned to the bottom right (flash attention's varlen rule)."""
    left = -1 if left is None else left
    right = -1 if right is None else right
    if causal:  # causal is the window (any, 0)
        right = 0 if right < 0 else min(right, 0)
    if left < 0 and right < 0:
        return False, None
    if left < 0 and right == 0 and lq == lk:
        return True, None  # plain causal: the kernel's own flag, no mask to build
    rows = torch.arange(lq, device="cpu")[:, None] + (lk - lq)  # a query's position among the keys
    cols = torch.arange(lk, device="cpu")[None, :]
    keep = torch.ones(lq, lk, dtype=torch.bool)
    if right >= 0:
        keep &= cols <= rows + right
    if left >= 0:
        keep &= cols >= rows - left
    return False, keep.to(device)


def _heads(t: torch.Tensor, groups: int) -> torch.Tensor:
    """``(L, Hk, D)`` as ``(1, Hk * groups, L, D)``: each key/value head repeated for its query heads."""
    t = t.transpose(0, 1).unsqueeze(0)
    return t.repeat_interleave(groups, dim=1) if groups > 1 else t


def _spans(cu_q: torch.Tensor, cu_k: torch.Tensor | None) -> list[tuple[int, int, int, int]]:
    q = _offsets(cu_q)
    k = q if cu_k is None else _offsets(cu_k)
    if len(q) != len(k):
        raise ValueError(
            f"varlen attention: cu_seq_q has {len(q)} offsets and cu_seq_k {len(k)}; give one per sequence + 1"
        )
    return [(q[i], q[i + 1], k[i], k[i + 1]) for i in range(len(q) - 1)]


def flash_attention_forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cum_seq_q: torch.Tensor | None,
    cum_seq_k: torch.Tensor | None,
    max_q: int,
    max_k: int,
    dropout_p: float,
    is_causal: bool,
    return_debug_mask: bool,
    *,
    scale: float | None = None,
    window_size_left: int | None = None,
    window_size_right: int | None = None,
    seqused_k: torch.Tensor | None = None,
    alibi_slopes: torch.Tensor | None = None,
    block_table: torch.Tensor | None = None,
    num_splits: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``aten::_flash_attention_forward`` on neuron for packed sequences (see the module docstring).

    Raises ``NotImplementedError`` for what the simulator does not model (dropout, paged KV ``block_table``,
    ``seqused_k``, ALiBi) and ``ValueError`` for offsets that do not pair up.
    """
    if cum_seq_q is None or query.dim() != 3:
        raise NotImplementedError("neuron runs _flash_attention_forward for packed (varlen) sequences only")
    if dropout_p or block_table is not None or seqused_k is not None or alibi_slopes is not None:
        raise NotImplementedError(
            "varlen attention on neuron: dropout, block_table, seqused_k and alibi_slopes are not simulated; "
            "call varlen_attn without them"
        )
    groups = query.shape[1] // key.shape[1]
    outs, lses = [], []
    for sq, eq, sk, ek in _spans(cum_seq_q, cum_seq_k):
        causal, mask = _mask(eq - sq, ek - sk, is_causal, window_size_left, window_size_right, query.device)
        q = query[sq:eq].transpose(0, 1).unsqueeze(0)
        k, v = _heads(key[sk:ek], groups), _heads(value[sk:ek], groups)
        out, lse = _fwd(q, k, v, 0.0, causal, attn_mask=additive_mask(mask, query.dtype), scale=scale)
        outs.append(out[0].transpose(0, 1))
        lses.append(lse[0])
    output = torch.cat(outs, dim=0)
    logsumexp = torch.cat(lses, dim=1).float()
    empty = query.new_empty(0)
    return output, logsumexp, torch.zeros(2, dtype=torch.int64, device=query.device), empty, empty


def flash_attention_backward(
    grad_out: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    logsumexp: torch.Tensor,
    cum_seq_q: torch.Tensor,
    cum_seq_k: torch.Tensor,
    max_q: int,
    max_k: int,
    dropout_p: float,
    is_causal: bool,
    rng_state: torch.Tensor,
    unused: torch.Tensor,
    *,
    scale: float | None = None,
    window_size_left: int | None = None,
    window_size_right: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``aten::_flash_attention_backward`` on neuron for packed sequences: ``(grad_query, grad_key, grad_value)``,
    each sequence through the flash-attention backward over its own length. Raises ``NotImplementedError`` for
    dropout."""
    if dropout_p:
        raise NotImplementedError("varlen attention on neuron: dropout is not simulated")
    groups = query.shape[1] // key.shape[1]
    dqs, dks, dvs = [], [], []
    for sq, eq, sk, ek in _spans(cum_seq_q, cum_seq_k):
        causal, mask = _mask(eq - sq, ek - sk, is_causal, window_size_left, window_size_right, query.device)
        q = query[sq:eq].transpose(0, 1).unsqueeze(0)
        g = grad_out[sq:eq].transpose(0, 1).unsqueeze(0)
        o = out[sq:eq].transpose(0, 1).unsqueeze(0)
        lse = logsumexp[:, sq:eq].unsqueeze(0)
        k, v = _heads(key[sk:ek], groups), _heads(value[sk:ek], groups)
        mask = additive_mask(mask, query.dtype)
        dq, dk, dv = _bwd(g, q, k, v, o, lse, 0.0, causal, attn_mask=mask, scale=scale)
        if groups > 1:  # the repeated heads' gradients go back to their key/value head
            dk = dk.unflatten(1, (-1, groups)).sum(2)
            dv = dv.unflatten(1, (-1, groups)).sum(2)
        dqs.append(dq[0].transpose(0, 1))
        dks.append(dk[0].transpose(0, 1))
        dvs.append(dv[0].transpose(0, 1))
    return torch.cat(dqs, dim=0), torch.cat(dks, dim=0), torch.cat(dvs, dim=0)


def register_varlen_attention(lib: torch.library.Library) -> None:
    """Register both kernels on ``lib`` (an ``aten`` IMPL library) for the neuron device."""
    lib.impl("_flash_attention_forward", flash_attention_forward, "PrivateUse1")
    lib.impl("_flash_attention_backward", flash_attention_backward, "PrivateUse1")
