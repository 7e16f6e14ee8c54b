"""Distributed figures of issue 17, each against a baseline measured in the same run.

1. A 2-rank DDP training step on ``neuron`` vs the same step on CPU/gloo, same processes and
   process group, interleaved (target: wall ratio ≤ 1.3×).
2. ``%%trn ranks 2``: cold start (spawn + import + init_process_group + first cell) and warm re-run,
   against an empty cell's round trip.
3. FSDP2 per-rank peak and resident memory vs DDP on the same model (goal: ≈ 1/N of parameters +
   gradients + optimizer state per rank).
4. Sweep: modeled time per collective and algorithm (α–β) and measured wall of gloo all_reduce on
   neuron vs CPU tensors, by size.

Prints medians with spread (min–max) and the machine load from ``uptime``.
Run: ``python benchmarks/bench_distributed.py`` (``--steps N``, ``--repeats N``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} (min {min(xs):.2f}, max {max(xs):.2f})"


def _model(d: int, h: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(d, h), torch.nn.ReLU(), torch.nn.Linear(h, d))


def ddp_steps(rank: int, world: int, out_dir: str, steps: int, d: int, h: int, batch: int) -> None:
    """Rank body: time DDP steps on cpu and on neuron, interleaved; rank 0 writes JSON."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    models = {dev: DDP(_model(d, h).to(dev)) for dev in ("cpu", "neuron")}
    opts = {dev: torch.optim.SGD(m.parameters(), lr=1e-3) for dev, m in models.items()}
    g = torch.Generator().manual_seed(rank)
    data = [torch.randn(batch, d, generator=g) for _ in range(4)]
    times: dict[str, list[float]] = {"cpu": [], "neuron": []}
    for i in range(steps + 2):  # 2 warm-up steps each
        for dev in ("cpu", "neuron") if i % 2 == 0 else ("neuron", "cpu"):
            x = data[i % 4].to(dev)
            dist.barrier()
            t0 = time.perf_counter()
            loss = models[dev](x).pow(2).mean()
            opts[dev].zero_grad()
            loss.backward()
            opts[dev].step()
            loss.item()
            if i >= 2:
                times[dev].append(time.perf_counter() - t0)
    if rank == 0:
        Path(out_dir, "ddp.json").write_text(json.dumps(times))


def memory_per_rank(rank: int, world: int, out_dir: str, d: int, h: int) -> None:
    """Rank body: resident bytes after one Adam step and the peak, DDP vs FSDP2; rank 0 writes JSON."""
    import gc

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    result = {}
    for kind in ("ddp", "fsdp"):
        gc.collect()
        torch.neuron.empty_cache()
        torch.neuron.reset_peak_memory_stats()
        base = torch.neuron.memory_allocated()
        m = _model(d, h).to("neuron")
        if kind == "ddp":
            m = DDP(m)
        else:
            mesh = init_device_mesh("neuron", (world,))
            for layer in m:
                if any(True for _ in layer.parameters()):
                    fully_shard(layer, mesh=mesh)
            fully_shard(m, mesh=mesh)
        opt = torch.optim.Adam(m.parameters())
        for _ in range(2):
            m(torch.randn(8, d).to("neuron")).pow(2).mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        result[kind] = {
            "resident": torch.neuron.memory_allocated() - base,
            "peak": torch.neuron.max_memory_allocated() - base,
        }
        del m, opt
    result["param_bytes"] = sum(p.numel() * 4 for p in _model(d, h).parameters())
    if rank == 0:
        Path(out_dir, "memory.json").write_text(json.dumps(result))


def all_reduce_sizes(rank: int, world: int, out_dir: str, sizes: list[int], repeats: int) -> None:
    """Rank body: wall of all_reduce on cpu vs neuron tensors by size; rank 0 writes JSON."""
    out: dict[str, dict[str, list[float]]] = {}
    for n in sizes:
        row: dict[str, list[float]] = {"cpu": [], "neuron": []}
        for _ in range(repeats):
            for dev in ("cpu", "neuron"):
                t = torch.ones(n // 4, device=dev)
                dist.barrier()
                t0 = time.perf_counter()
                dist.all_reduce(t)
                row[dev].append(time.perf_counter() - t0)
        out[str(n)] = row
    if rank == 0:
        Path(out_dir, "sizes.json").write_text(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    import trn_notebook  # noqa: F401 - the device and the neuron backend
    from trn_notebook.distributed import collective_seconds
    from trn_notebook.distributed import pool as rank_pool
    from trn_notebook.distributed.launch import run_ranks

    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    out = tempfile.mkdtemp(prefix="bench_dist_")

    # 1. DDP step, neuron vs CPU/gloo
    d, h, batch = 512, 2048, 64
    run_ranks(ddp_steps, 2, (out, args.steps, d, h, batch), timeout_s=900)
    times = json.loads(Path(out, "ddp.json").read_text())
    cpu_ms = [t * 1e3 for t in times["cpu"]]
    neuron_ms = [t * 1e3 for t in times["neuron"]]
    ratios = [n / c for n, c in zip(neuron_ms, cpu_ms)]
    print(f"\n1. 2-rank DDP step (MLP {d}-{h}-{d}, batch {batch}/rank, SGD), {args.steps} steps, wall ms")
    print(f"   CPU/gloo (baseline): {_spread(cpu_ms)}")
    print(f"   neuron:              {_spread(neuron_ms)}")
    verdict = "OK" if statistics.median(ratios) <= 1.3 else "ABOVE TARGET"
    print(f"   ratio neuron/CPU:    {_spread(ratios)}  (target <= 1.3x: {verdict})")

    # 2. %%trn ranks 2 cold / warm
    rank_pool.shutdown()
    t0 = time.perf_counter()
    pool, _ = rank_pool.get_pool(2)
    pool.run("pass", print_line=lambda s: None)
    cold = time.perf_counter() - t0
    cell = "x = torch.ones(1024, device='neuron')\ndist.all_reduce(x)\nprint(x.sum().item())"
    empty, warm = [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        pool.run("pass", print_line=lambda s: None)
        empty.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        pool.run(cell, print_line=lambda s: None)
        warm.append((time.perf_counter() - t) * 1e3)
    rank_pool.shutdown()
    print("\n2. %%trn ranks 2")
    print(f"   cold start (spawn + import + init_process_group + first cell): {cold:.1f} s")
    print(f"   warm empty cell round trip (baseline): {_spread(empty)} ms")
    print(f"   warm all_reduce cell:                  {_spread(warm)} ms")

    # 3. FSDP2 vs DDP memory per rank
    run_ranks(memory_per_rank, 2, (out, 1024, 4096), timeout_s=900)
    mem = json.loads(Path(out, "memory.json").read_text())
    p = mem["param_bytes"]
    print(f"\n3. memory per rank, MLP 1024-4096-1024 ({p / 2**20:.1f} MiB fp32 parameters), Adam, 2 ranks")
    for kind in ("ddp", "fsdp"):
        r = mem[kind]
        print(
            f"   {kind:5s} resident {r['resident'] / 2**20:7.1f} MiB ({r['resident'] / p:.2f}x params)"
            f"   peak {r['peak'] / 2**20:7.1f} MiB"
        )
    print(
        f"   FSDP2/DDP resident {mem['fsdp']['resident'] / mem['ddp']['resident']:.2f}"
        f"  peak {mem['fsdp']['peak'] / mem['ddp']['peak']:.2f}  (expected ≈ 1/N = 0.50 for params+grads+Adam)"
    )

    # 4. sweep
    sizes = [4 * 2**10, 256 * 2**10, 4 * 2**20, 64 * 2**20]
    for world in (2, 8):
        print(f"\n4a. modeled all_reduce on {world} ranks by algorithm (µs; α–β constants from trainium-figures.md)")
        print(f"   {'bytes':>10} {'ring':>9} {'mesh':>9} {'rdh':>9} {'auto':>12} {'EFA ring':>10}")
        for n in sizes:
            cells = [collective_seconds("all_reduce", n, world, algorithm=a)[0] * 1e6 for a in ("ring", "mesh", "rdh")]
            auto, algo, fabric = collective_seconds("all_reduce", n, world)
            efa = collective_seconds("all_reduce", n, world, algorithm="ring", fabric="efa")[0] * 1e6
            print(
                f"   {n:>10} " + " ".join(f"{c:9.1f}" for c in cells) + f" {auto * 1e6:8.1f} {algo:>3} {efa:10.1f}"
                f"   ({fabric})"
            )
    run_ranks(all_reduce_sizes, 2, (out, sizes[:3], args.repeats), timeout_s=900)
    measured = json.loads(Path(out, "sizes.json").read_text())
    print("\n4b. measured wall of gloo all_reduce, neuron vs CPU tensors (ms)")
    for n, row in measured.items():
        c = [t * 1e3 for t in row["cpu"]]
        v = [t * 1e3 for t in row["neuron"]]
        print(f"   {int(n):>10} B  cpu {_spread(c)}  neuron {_spread(v)}")
    print("\nload:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
