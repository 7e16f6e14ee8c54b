"""Small models for the three-way comparison tests and notebook 14: one layer made sensitive to auto-cast."""

from __future__ import annotations

import torch
from torch import nn


class OffsetProjection(nn.Module):
    """``x @ W`` computed as ``(x + c) @ W - c·ΣW`` in FP32 on purpose (an explicit upcast, like an FP32 norm).

    The two forms are equal in exact arithmetic. In CPU BF16 the module still computes in FP32, so only its
    BF16 input is rounded; under auto-cast ``matmult`` the matmul input ``x + c`` is rounded to BF16, where the
    spacing at ``c = 512`` is 4: the error is ``c / |x|`` times larger than the input's own rounding.
    """

    def __init__(self, d: int, offset: float = 512.0) -> None:
        super().__init__()
        self.proj = nn.Linear(d, d, bias=False)
        self.offset = offset

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.proj.weight.float()
        h = x.float() + self.offset
        return (h @ w.t() - self.offset * w.sum(dim=1)).to(x.dtype)


def sensitive_mlp(d: int = 32, seed: int = 0) -> nn.Sequential:
    """Linear → GELU → OffsetProjection (module ``"2"``) → Linear."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, d), nn.GELU(), OffsetProjection(d), nn.Linear(d, 8))
