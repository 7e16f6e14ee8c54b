"""torch.profiler with neuron lanes against plain CPU torch.profiler on the same ops (issue 57): peak memory
growth, export time and trace size.

Each side runs in a child process of its own (peak resident memory is per process), one after the other, from
this script: ``n`` in-place adds on a 4-element tensor under ``torch.profiler.profile``, then
``export_chrome_trace``. The CPU side profiles CPU tensors with ``ProfilerActivity.CPU``; the neuron side
``neuron`` tensors with CPU + PrivateUse1 (the modeled lanes merged into the trace). Growth is the peak
resident set (``ru_maxrss``) minus the resident set before profiling. Targets: growth <= 1.5x, export <= 5x.
Run: ``python benchmarks/bench_profiler_memory.py [--ops 200000 1000000]`` (10^6 needs ~16 GiB free).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, resource, sys, time
import torch
side, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if side == "neuron":
    import trn_notebook  # noqa: F401
from torch.profiler import ProfilerActivity, profile
x = torch.zeros(4, device="neuron" if side == "neuron" else "cpu")
acts = [ProfilerActivity.CPU] + ([ProfilerActivity.PrivateUse1] if side == "neuron" else [])
base = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
t0 = time.perf_counter()
with profile(activities=acts) as prof:
    for _ in range(n):
        x.add_(1)
t1 = time.perf_counter()
prof.export_chrome_trace(out)
t2 = time.perf_counter()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"run_s": t1 - t0, "export_s": t2 - t1, "growth": peak - base, "bytes": os.path.getsize(out)}))
"""


def _side(side: str, n: int, folder: str) -> dict[str, float]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = os.path.join(folder, f"{side}.json")
    proc = subprocess.run([sys.executable, "-c", CHILD, side, str(n), out], env=env, capture_output=True, text=True,
                          timeout=3600, check=True)  # fmt: skip
    os.unlink(out)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    """Print one markdown row per op count: both sides' figures and the neuron/CPU ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, nargs="*", default=[20_000, 200_000])
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    print("| ops | CPU growth MB | neuron growth MB | ratio | CPU export s | neuron export s | ratio | CPU trace MB |"
          " neuron trace MB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for n in args.ops:
            cpu, neuron = _side("cpu", n, folder), _side("neuron", n, folder)
            print(f"| {n:,} | {cpu['growth'] / 1e6:,.0f} | {neuron['growth'] / 1e6:,.0f} | "
                  f"{neuron['growth'] / cpu['growth']:.2f} | {cpu['export_s']:.1f} | {neuron['export_s']:.1f} | "
                  f"{neuron['export_s'] / cpu['export_s']:.2f} | {cpu['bytes'] / 1e6:,.0f} | {neuron['bytes'] / 1e6:,.0f} |",
                  flush=True)  # fmt: skip
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
