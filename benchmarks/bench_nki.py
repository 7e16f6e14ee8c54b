"""Kernel simulator speed and cost-model fidelity (both figures of issue 16).

1. Simulator speed: the tiled 512x512x512 fp32 matmul kernel simulated vs ``torch.matmul`` of the
   same shapes on the CPU, interleaved in this process; median ratio and spread (target <= 20x).
2. Fidelity: the NKI matmul tutorial's four kernels at [4096, 8192] @ [8192, 8192] BF16 on one
   Trn1 NeuronCore, and the fused Mamba tutorial's ``mamba_v1``, modeled (shape-only runs) vs the
   latencies the tutorials publish (goal: within 25%). See docs/fidelity.md for sources.

    OMP_NUM_THREADS=1 python benchmarks/bench_nki.py [--repeats 15] [--skip-fidelity]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

import torch

import trn_notebook.nki as nki
from trn_notebook.nki.kernels import matmul_kernel
from trn_notebook.nki.kernels_tutorial import MAMBA_V1_MS, TUTORIAL_KERNELS, TUTORIAL_MS, mamba_v1


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return f"load average: {os.getloadavg()}"


def simulator_speed(repeats: int) -> None:
    torch.manual_seed(0)
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    lhsT = a.T.contiguous()
    torch.testing.assert_close(matmul_kernel(lhsT, b), a @ b, rtol=1e-4, atol=1e-4)
    ratios, sims, refs = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        t1 = time.perf_counter()
        matmul_kernel(lhsT, b)
        t2 = time.perf_counter()
        refs.append(t1 - t0)
        sims.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
    med = statistics.median(ratios)
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [min(ratios), med, max(ratios)]
    verdict = "ok" if med <= 20 else "ABOVE TARGET"
    print(
        f"simulator: tiled 512^3 fp32 matmul kernel {statistics.median(sims) * 1e3:.1f} ms vs torch.matmul "
        f"{statistics.median(refs) * 1e3:.2f} ms -> median {med:.1f}x (IQR {q[0]:.1f}-{q[-1]:.1f}x, n={repeats}; "
        f"target <= 20x: {verdict})"
    )


def fidelity() -> None:
    shapes = (((8192, 4096), torch.bfloat16), ((8192, 8192), torch.bfloat16))
    print("fidelity: NKI matmul tutorial, [4096,8192] @ [8192,8192] BF16, Trn1 (NeuronCore-v2), one core")
    print(f"  {'kernel':<16}{'published ms':>13}{'modeled ms':>12}{'ratio':>8}  bottleneck (modeled utilisation)")
    for name, kernel in TUTORIAL_KERNELS.items():
        rep = nki.estimate(kernel, *shapes, chip="trn1")
        ms = rep.modeled_s * 1e3
        ratio = ms / TUTORIAL_MS[name]
        within = "within 25%" if abs(ratio - 1) <= 0.25 else "outside 25%"
        util = ", ".join(f"{k} {v:.0%}" for k, v in rep.utilisation.items() if v >= 0.05)
        print(f"  {name:<16}{TUTORIAL_MS[name]:>13.2f}{ms:>12.2f}{ratio:>8.2f}  {within}; {util}")


def fidelity_mamba() -> None:
    print("fidelity: NKI fused Mamba tutorial, mamba_v1, FP32, batch 1, seq_len 512, state 16 (chip not stated)")
    print(f"  {'channels':<10}{'chip':<6}{'published ms':>13}{'modeled ms':>12}{'ratio':>8}  modeled utilisation")
    for channels, published in MAMBA_V1_MS.items():
        shapes = [((1, channels, 512), torch.float32)] * 2 + [((channels, 16), torch.float32)]
        shapes += [((1, 16, 512), torch.float32)] * 2
        for chip in ("trn1", "trn2"):
            rep = nki.estimate(mamba_v1, *shapes, chip=chip)
            ms = rep.modeled_s * 1e3
            util = ", ".join(f"{k} {v:.0%}" for k, v in rep.utilisation.items() if v >= 0.05)
            print(f"  {channels:<10}{chip:<6}{published:>13.3f}{ms:>12.3f}{ms / published:>8.2f}  {util}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--skip-fidelity", action="store_true")
    args = ap.parse_args()
    print(f"machine: {_uptime()}; torch {torch.__version__}, threads {torch.get_num_threads()}")
    simulator_speed(args.repeats)
    if not args.skip_fidelity:
        fidelity()
        fidelity_mamba()


if __name__ == "__main__":
    main()
