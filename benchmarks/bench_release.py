"""The price of a dying storage's release (issue 48: finalizers take no lock by waiting).

Prints, best of 5, in this process: an eager 64-element add on ``neuron`` (its result's storage dies each
iteration, so each pays one ``free_from_finalizer``) against the same add on CPU (the baseline), and a
``malloc`` + ``free_from_finalizer`` pair against ``malloc`` + ``free`` on the same allocator.
Run: ``python benchmarks/bench_release.py``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import torch

import trn_notebook  # noqa: F401 - registers the neuron device
from trn_notebook.device.memory.runtime import allocator


def _best_us(fn: Callable[[], None], n: int) -> float:
    fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def main() -> None:
    """Print the figures and their ratios."""
    x, xc = torch.ones(64, device="neuron"), torch.ones(64)
    dev = _best_us(lambda: x + x, 20_000)
    cpu = _best_us(lambda: xc + xc, 20_000)
    plain = _best_us(lambda: allocator.free(allocator.malloc(1024)), 100_000)
    final = _best_us(lambda: allocator.free_from_finalizer(allocator.malloc(1024)), 100_000)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; torch {torch.__version__}")
    print(f"eager add, 64 elements: neuron {dev:.2f} us, CPU {cpu:.2f} us ({dev / cpu:.1f}x)")
    print(f"malloc + free_from_finalizer {final:.3f} us vs malloc + free {plain:.3f} us ({final / plain:.2f}x)")


if __name__ == "__main__":
    main()
