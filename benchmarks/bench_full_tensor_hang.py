"""Reproducer of issue 34's FSDP2/DTensor hang: ``full_tensor()`` in a loop on 2 simulated ranks, neuron vs CPU.

``python benchmarks/bench_full_tensor_hang.py [RUNS] [ITERS]`` prints, per device, how many runs hung (a gloo
"Timed out waiting ... for send operation" after a 10 s collective timeout). Measured 2026-12-02 (load ~9 on
2 cores): neuron 4 of 4 runs of 2000 iterations hung, cpu 0 of 2. Cause: the PrivateUse1 ``wait_tensor``
waited through ``SafeKernelFunction.call_boxed``, which holds the GIL, while a gloo worker thread destroying the
previous work's host-view tensors needed it. Fixed in ``trn_notebook/distributed/backend.py`` (the pending gloo
work is waited with ``Work.wait()``, which releases the GIL; Python drops finished work). Same process load
(~2), same machine: before the fix neuron 2 of 2 runs hung, after it 0 of 2 and 0 of 3.
"""

from __future__ import annotations

import sys
import time


def full_tensor_loop(rank: int, world: int, iters: int, dev: str) -> None:
    """Shard a tensor on a 1-D mesh of ``dev`` and gather it ``iters`` times."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh(dev, (world,))
    base = torch.arange(64.0).reshape(16, 4)
    dt = distribute_tensor(base.to(dev), mesh, [Shard(0)])
    full = dt
    for _ in range(iters):
        full = dt.full_tensor()
    assert torch.equal(full.cpu(), base)


def main() -> None:
    """Run the loop ``RUNS`` times per device; print the hangs."""
    from trn_notebook.distributed.launch import run_ranks

    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    for dev in ("cpu", "neuron"):
        hung, t0 = 0, time.perf_counter()
        for _ in range(runs):
            try:
                run_ranks(full_tensor_loop, 2, args=(iters, dev), timeout_s=300, collective_timeout_s=10)
            except Exception:  # counted as a hang
                hung += 1
        print(f"{dev}: {hung} of {runs} runs hung ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    sys.path.insert(0, __import__("os").path.dirname(__file__))
    main()
