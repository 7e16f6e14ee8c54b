"""How NxD Inference runs a mixture-of-experts layer, as the grouped matmuls of a walk.

The shapes-only walk records each grouped (per-expert) matmul as the rows the router sent to experts
(``walk.GROUPED``: ``batch`` = experts E, ``m`` = routed rows T·k, ``k`` x ``n`` = one expert's weight,
``tokens`` = T). NxD Inference does not run that; ``ExpertMLPsV2.forward`` (neuronx-distributed
``modules/moe/expert_mlps_v2.py``, inference branch) picks one of three paths:

* **token generation** (one position per sequence): if T·k / E < ``SELECTIVE_LOADING_THRESHOLD``,
  ``forward_selective_loading`` — a loop over the T tokens, each loading its k experts' weights (T·k
  expert loads, no sharing between tokens); else ``forward_all_experts`` (every expert on every token);
* **context encoding**: T·k / E below the threshold → selective loading; else T·k <
  ``BLOCK_SIZE`` → ``forward_all_experts``; else **``forward_blockwise``**: tokens are packed into
  blocks of ``BLOCK_SIZE`` rows, each block one expert's, sized for the *worst-case* routing —
  ``N = min(T·k, ceil((T·k − (E − 1)) / B) + E − 1)`` blocks — and with the default skip mode
  (``DEFAULT_SKIP_MODE = (False, False)``: no token or weight DMA skipped) every block is computed,
  padded rows included, each loading its expert's weights.

Constants (sourced, not fitted; neuronx-distributed ``modules/moe/model_utils.py``):
``DEFAULT_BLOCK_SIZE = 512``, ``DEFAULT_SELECTIVE_LOADING_THRESHOLD = 1.0``, ``DEFAULT_SKIP_MODE =
(False, False)``. (A Kimi-K2 contrib README says the threshold was 0.05 on SDK 2.28; at 0.05 Trinity-Mini's
batch-1 decode would read all 128 experts, 12 GB per rank, slower than its published 11.8 ms step even
at full HBM bandwidth, so its published step used selective loading, as the 1.0 default gives.)

T is the *padded* token count of the graph (batch x bucket at context encoding): the padded positions
are routed like real ones.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .walk import GROUPED, OpCount

BLOCK_SIZE = 512  # neuronx-distributed model_utils.DEFAULT_BLOCK_SIZE
SELECTIVE_LOADING_THRESHOLD = 1.0  # neuronx-distributed model_utils.DEFAULT_SELECTIVE_LOADING_THRESHOLD
SOURCE = "neuronx-distributed modules/moe/expert_mlps_v2.py (ExpertMLPsV2.forward, inference) and model_utils.py"


def blocks(tokens: int, top_k: int, experts: int, block: int = BLOCK_SIZE) -> int:
    """Blocks ``forward_blockwise`` computes for ``tokens`` tokens routed to ``top_k`` of ``experts``
    experts (the worst-case routing bound of expert_mlps_v2.py). Raises ``ValueError`` for non-positive sizes."""
    if tokens < 1 or top_k < 1 or experts < 1 or block < 1:
        raise ValueError(f"blockwise sizes must be positive (tokens={tokens}, top_k={top_k}, experts={experts})")
    routed = tokens * top_k
    return min(routed, math.ceil((routed - (experts - 1)) / block) + experts - 1)


def path(tokens: int, top_k: int, experts: int, *, prefill: bool) -> str:
    """The ExpertMLPsV2 path NxD Inference takes: ``selective``, ``all_experts`` or ``blockwise``."""
    if tokens * top_k / experts < SELECTIVE_LOADING_THRESHOLD:
        return "selective"
    if not prefill or tokens * top_k < BLOCK_SIZE:
        return "all_experts"
    return "blockwise"


def dispatch(op: OpCount, *, prefill: bool) -> OpCount:
    """The grouped matmul ``op`` as NxD Inference runs it (other ops are returned unchanged): FLOPs,
    weight bytes and shape (``batch`` products of ``[m, k] @ [k, n]``) of the path :func:`path` picks."""
    if op.kind != GROUPED or not op.batch or not op.tokens:
        return op
    experts, rows, d, n, tokens = op.batch, op.m, op.k, op.n, op.tokens
    top_k = max(1, round(rows / tokens))
    expert_bytes = op.dtype.itemsize * d * n
    act_bytes = op.bytes - op.weight_bytes
    how = path(tokens, top_k, experts, prefill=prefill)
    if how == "selective":
        batch, m, loads = tokens * top_k, 1, tokens * top_k
    elif how == "all_experts":
        batch, m, loads = experts, tokens, experts
    else:
        nb = blocks(tokens, top_k, experts)
        batch, m, loads = nb, BLOCK_SIZE, nb
    weights = float(expert_bytes * loads)
    return replace(
        op,
        name=f"{op.name}[{how}]",
        flops=2.0 * batch * m * d * n,
        bytes=act_bytes + weights,
        weight_bytes=weights,
        batch=batch,
        m=m,
    )
