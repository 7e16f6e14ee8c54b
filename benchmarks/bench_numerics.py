"""Overhead of the ``trainium`` numerics policy vs ``exact`` (issue 27), as ratios measured in one process.

* transformer block (d=256, 4 heads, batch 8x128, fp32) eager forward+backward on ``neuron``:
  ``trainium`` (auto-cast none, the faithful default) and ``trainium,autocast=matmult`` vs ``exact``
  (target <= 1.5x), interleaved rounds; the same block in bf16 (every matmul upcast, FP32, rounded once);
* the same block compiled (``backend="neuron"``), steady-state fw+bw, vs compiled under ``exact``
  (target <= 1.2x). Changing the policy recompiles (the policy is part of the compile), so the compiled
  rounds alternate exact / trainium blocks with a warm-up call after each switch.

Run: ``python benchmarks/bench_numerics.py``
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

import trn_notebook

torch.set_num_threads(1)


def per_call(fn: Callable[[], None], n: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def block(dtype: torch.dtype = torch.float32) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.0, batch_first=True)
    layer = layer.to(device="neuron", dtype=dtype)
    return layer, torch.randn(8, 128, 256).to(device="neuron", dtype=dtype)


def step_of(layer: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        layer.zero_grad(set_to_none=True)
        layer(x).sum().backward()

    return step


def spread(ratios: list[float]) -> str:
    return f"{statistics.median(ratios):.3f}x [{min(ratios):.3f}-{max(ratios):.3f}]"


def timed(policy: dict[str, object], step: Callable[[], None], n: int) -> float:
    with trn_notebook.numerics(**policy):  # type: ignore[arg-type]
        return per_call(step, n)


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.2f} (2 cores shared: compare ratios, not times)")
    layer, x = block()
    eager = step_of(layer, x)
    exact = {"mode": "exact"}
    variants = {
        "trainium": {"mode": "trainium"},
        "trainium,autocast=matmult": {"mode": "trainium", "autocast": "matmult"},
    }
    rounds: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(5):  # interleaved: every variant shares the machine's noise with its exact baseline
        for name, policy in variants.items():
            base = timed(exact, eager, 3)
            rounds[name].append(timed(policy, eager, 3) / base)
    for name, ratios in rounds.items():
        print(f"eager fwd+bwd, {name} vs exact: {spread(ratios)} (target <= 1.5x)")
    bf16 = step_of(*block(torch.bfloat16))  # every matmul takes the FP32-accumulation path
    ratios = [timed(variants["trainium"], bf16, 3) / timed(exact, bf16, 3) for _ in range(5)]
    print(f"eager fwd+bwd, bf16 block, trainium vs exact: {spread(ratios)} (no target; the costly path)")

    compiled = torch.compile(layer, backend="neuron")
    cstep = step_of(compiled, x)
    for name, policy in variants.items():
        ratios = []
        for _ in range(3):
            with trn_notebook.numerics(**exact):  # type: ignore[arg-type]
                cstep()  # (re)compile or cache hit, then steady calls
                base = per_call(cstep, 5)
            with trn_notebook.numerics(**policy):  # type: ignore[arg-type]
                cstep()
                ratios.append(per_call(cstep, 5) / base)
        print(f"compiled steady fwd+bwd, {name} vs exact: {spread(ratios)} (target <= 1.2x)")
    print(f"load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
