"""Hypothesis strategies shared by the property tests."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

FLOAT_DTYPES = [torch.float32, torch.bfloat16]


@st.composite
def shapes(draw, min_dims: int = 1, max_dims: int = 3, max_side: int = 6) -> tuple[int, ...]:
    """A small tensor shape."""
    n = draw(st.integers(min_dims, max_dims))
    return tuple(draw(st.integers(1, max_side)) for _ in range(n))


@st.composite
def tensors(draw, dtype: torch.dtype | None = None, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    """A CPU tensor with bounded values (seeded from hypothesis, so examples shrink and replay)."""
    dtype = dtype or draw(st.sampled_from([*FLOAT_DTYPES, torch.int32]))
    shape = shape or draw(shapes())
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g) * 4 - 2).to(dtype)
    return torch.randint(-5, 6, shape, generator=g, dtype=dtype)
