"""Kernel selection before AOT tracing: attention goes to the fused flash-attention kernel.

On ``neuron`` fake tensors, ``scaled_dot_product_attention`` would decompose into its math form
(bmm, softmax, bmm and their backward), which then runs as separate kernels. A real compiler maps
attention to a hand-written fused kernel; we pick ATen's flash-attention op (which has an
autograd formula, so AOT Autograd emits its backward kernel too) whenever ATen's CPU selection
would (no dropout, no mask requiring grad, ...; see ``device/ops/attention.py``). Everything else keeps
torch's own composite (math path).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from .. import locks as _locks
from ..device.ops.attention import flash_or

_original = F.scaled_dot_product_attention
_lock = _locks.make("attention_trace", "flash attention patch")


flash_or_default = flash_or(_original)
"""``F.scaled_dot_product_attention`` that uses the fused flash kernel when it applies (as the CPU would)."""


def select_kernels(gm: torch.fx.GraphModule) -> None:
    """Point direct attention calls of dynamo's graph at :func:`flash_or_default` (in place)."""
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is _original:
            node.target = flash_or_default
            changed = True
    if changed:
        gm.recompile()


@contextlib.contextmanager
def flash_attention_selected() -> Iterator[None]:
    """While AOT Autograd traces: library code (``multi_head_attention_forward``) also gets the flash kernel."""
    with _lock:
        F.scaled_dot_product_attention = flash_or_default  # type: ignore[assignment]
        try:
            yield
        finally:
            F.scaled_dot_product_attention = _original


def uses_attention(gm: Any) -> bool:
    """True when dynamo's graph calls attention (directly or through multi-head attention)."""
    return any(
        n.op == "call_function" and n.target in (_original, F.multi_head_attention_forward, flash_or_default)
        for n in gm.graph.nodes
    )
