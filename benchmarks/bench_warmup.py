"""Warm-up benchmark (issue 19): a 5-bucket policy on a transformer block, warmed up front vs compiled on first use.

For nn.TransformerEncoderLayer(d=256, 4 heads, ffn 1024), batch 4, lengths bucketed by
``pow2:16-256`` (5 buckets), inference:

1. lazy: a fresh bucketed block (fresh cache dir, dynamo reset) called once per bucket; the time of
   those first calls and the graphs they compiled;
2. warm-up: a fresh bucketed block's ``warmup()``; its time and graphs (forward graphs with grad on:
   the block's fused inference fast path has no lowering, so the block runs in train mode with
   dropout 0, as in the compile benchmark);
   target: same graphs, same time within ±10% (medians of interleaved repeats);
3. a timed loop of 50 requests of random lengths after the warm-up: compiles in it (target 0).

Prints medians and spread of each (wall and process CPU time, which a loaded machine disturbs less), in
ABBA order so neither side always runs second, the ratio warm-up / lazy, and the machine load (``uptime``).
Run: ``python benchmarks/bench_warmup.py`` (single intra-op thread for stable numbers).
"""

from __future__ import annotations

import os
import random
import statistics
import tempfile
import time

import torch
import torch.nn as nn

import trn_notebook  # noqa: F401 - registers the device and the backend
from trn_notebook.compiler import backend, bucketed, compile_log
from trn_notebook.compiler.config import override

D, HEADS, FFN, BATCH, POLICY, REPEATS = 256, 4, 1024, 4, "pow2:16-256", 3


def fresh_runner() -> object:
    torch._dynamo.reset()
    backend.clear_memory_cache()
    compile_log.reset()
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(D, HEADS, FFN, dropout=0.0, batch_first=True).to("neuron")

    def run(src: torch.Tensor) -> torch.Tensor:
        return model(src)

    return bucketed(run, dims={"src": 1}, policy=POLICY)


def lazy() -> tuple[float, float, int]:
    runner = fresh_runner()
    t0, c0 = time.perf_counter(), time.process_time()
    for b in runner.policy.buckets():
        runner(torch.randn(BATCH, b, D, device="neuron"))
    return time.perf_counter() - t0, time.process_time() - c0, len(compile_log.snapshot())


def warm() -> tuple[float, float, int, object]:
    runner = fresh_runner()
    t0, c0 = time.perf_counter(), time.process_time()
    summary = runner.warmup(torch.randn(BATCH, 16, D, device="neuron"), progress=False)
    return time.perf_counter() - t0, time.process_time() - c0, summary.graphs, runner


def spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.2f} s (min {min(xs):.2f}, max {max(xs):.2f}, n={len(xs)})"


def main() -> None:
    torch.set_num_threads(1)
    load = os.popen("uptime").read().strip()
    lazy_s, warm_s, lazy_cpu, warm_cpu, graphs = [], [], [], [], set()
    runner = None
    lazy()  # imports and first-use costs paid by neither measured side
    for i in range(REPEATS * 2):
        # ABBA order: whichever side runs second in a pair pays for the first one's garbage, so alternate
        if (i % 2 == 0) == (i // 2 % 2 == 0):
            with override(cache_dir=tempfile.mkdtemp(prefix="trn-bench-lazy-")):
                t, c, n = lazy()
                lazy_s.append(t)
                lazy_cpu.append(c)
                graphs.add(("lazy", n))
        else:
            with override(cache_dir=tempfile.mkdtemp(prefix="trn-bench-warm-")):
                t, c, n, runner = warm()
                warm_s.append(t)
                warm_cpu.append(c)
                graphs.add(("warm-up", n))
    before = len(compile_log.snapshot())
    rng = random.Random(0)
    t0 = time.perf_counter()
    for _ in range(50):
        runner(torch.randn(BATCH, rng.randint(1, 256), D, device="neuron"))
    loop_s = time.perf_counter() - t0
    compiles = len(compile_log.snapshot()) - before
    ratio = statistics.median(warm_s) / statistics.median(lazy_s)
    cpu_ratio = statistics.median(warm_cpu) / statistics.median(lazy_cpu)
    print(f"machine load: {load} -> {os.popen('uptime').read().strip()}")
    print(f"lazy (first call per bucket): wall {spread(lazy_s)}; process CPU {spread(lazy_cpu)}")
    print(f"warm-up():                    wall {spread(warm_s)}; process CPU {spread(warm_cpu)}")
    print(f"graphs: {sorted(graphs)} (target: same count)")
    print(f"warm-up / lazy = {ratio:.2f}x wall, {cpu_ratio:.2f}x process CPU (target 0.90-1.10)")
    print(f"timed loop after warm-up: 50 requests in {loop_s:.2f} s, {compiles} compiles (target 0)")


if __name__ == "__main__":
    main()
