"""The function every security probe compiles, and a fresh compile of it checked against CPU."""

from __future__ import annotations

import torch

import trn_notebook
from trn_notebook.compiler import backend, compile_log

X = torch.arange(4.0)


def f(x: torch.Tensor) -> torch.Tensor:
    return 3 * x + 1


def compile_f() -> dict:
    """Compile ``f`` afresh (memory cache cleared, so the disk is consulted) and check it against CPU."""
    torch._dynamo.reset()
    backend.clear_memory_cache()
    compile_log.reset()
    out = trn_notebook.compile(f)(X)
    torch.testing.assert_close(out, f(X))
    return compile_log.snapshot()[0]
