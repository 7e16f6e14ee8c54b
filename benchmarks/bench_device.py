"""Device overhead figures (issue 2), as ratios against CPU eager run in the same process.

* 4x4 ``add`` per-op time on ``neuron`` vs CPU (target <= 10x);
* transformer block (d=256, 4 heads, batch 8x128) forward+backward on ``neuron`` vs CPU (target <= 1.15x);
* overhead of placement logging + memory accounting on that block (target <= 10% of eager time),
  measured by disabling the accounting hooks (``trn_notebook.device.dispatch.accounting``).

Run: ``python benchmarks/bench_device.py``
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

import trn_notebook  # noqa: F401 - registers the device
from trn_notebook.device import dispatch

torch.set_num_threads(1)


def per_call(fn, n: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def best_of(fn, n: int, repeat: int = 7) -> float:
    return min(per_call(fn, n) for _ in range(repeat))


def block(device: str) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.0, batch_first=True).to(device)
    x = torch.randn(8, 128, 256).to(device)
    return layer, x


def fwd_bwd(layer: nn.Module, x: torch.Tensor):
    def step() -> None:
        layer.zero_grad(set_to_none=True)
        layer(x).sum().backward()

    return step


def main() -> None:
    a, b = torch.ones(4, 4), torch.ones(4, 4)
    na, nb = a.to("neuron"), b.to("neuron")
    cpu_add = best_of(lambda: a + b, 20_000)
    dev_add = best_of(lambda: na + nb, 20_000)
    print(
        f"add 4x4: cpu {cpu_add * 1e6:.2f} us, neuron {dev_add * 1e6:.2f} us, ratio {dev_add / cpu_add:.1f}x (target <= 10x)"
    )

    cpu_step = fwd_bwd(*block("cpu"))
    dev_step = fwd_bwd(*block("neuron"))
    cpu_t, dev_t = [], []
    for _ in range(7):  # interleave to share the machine's noise
        cpu_t.append(per_call(cpu_step, 3))
        dev_t.append(per_call(dev_step, 3))
    cpu_b, dev_b = statistics.median(cpu_t), statistics.median(dev_t)
    print(
        f"transformer block fwd+bwd: cpu {cpu_b * 1e3:.1f} ms, neuron {dev_b * 1e3:.1f} ms, "
        f"ratio {dev_b / cpu_b:.3f}x (target <= 1.15x)"
    )
    with_acc, without = [], []
    for _ in range(7):
        with_acc.append(per_call(dev_step, 3))
        with dispatch.accounting_disabled():
            without.append(per_call(dev_step, 3))
    w, wo = statistics.median(with_acc), statistics.median(without)
    print(f"accounting overhead on the block: {(w - wo) / w * 100:.1f}% of eager time (target <= 10%)")


if __name__ == "__main__":
    main()
