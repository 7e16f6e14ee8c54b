"""Widget cost figures (issue 5), as ratios against a baseline run in the same process.

* ShapeTuner: Python-side recompute after a control move, for 100,000 samples, driven through the
  comm protocol as the browser does (target <= 50 ms); baseline: ``compiler.tune`` alone on the raw
  array, and the budget.
* MemoryView(live=True): a transformer block's eager forward+backward on ``neuron`` with and
  without a live view, in a real kernel (nbclient) so every 200 ms sample goes through a real comm
  (target <= 5% of the cell's eager time). Runs alternate (off, on, off, on …) and the medians
  are compared, in wall time and in the kernel process's CPU time (robust to other load), and the
  time spent inside the sampler is reported as a share of the cell.

* PlacementView: build time for 100 / 2,000 / 10,000 ops, against the pandas frame of the same
  snapshot (what the interim tables render).

Run: ``python benchmarks/bench_widgets.py`` (``--quick`` for fewer repeats).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import trn_notebook  # noqa: F401 - registers the device

TUNER_BUDGET_MS = 50.0
MEMORY_BUDGET = 0.05


def bench_tuner(repeats: int) -> None:
    try:
        import trn_notebook.compiler as compiler

        compiler.tune, compiler.BucketPolicy  # noqa: B018 - fail early if the compiler lacks them
    except (ImportError, AttributeError) as exc:
        print(f"ShapeTuner: skipped, compiler not landed ({exc})")
        return
    from trn_notebook.widgets import ShapeTuner

    lengths = np.random.default_rng(0).integers(16, 4096, size=100_000)
    t0 = time.perf_counter()
    view = ShapeTuner(lengths=lengths)
    build_ms = (time.perf_counter() - t0) * 1e3
    moves = [{"kind": "pow2", "min_len": 16 * (1 + i % 4), "max_len": 4096} for i in range(repeats)] + [
        {"kind": "step", "min_len": 128, "max_len": 4096, "count": 4 + i % 12} for i in range(repeats)
    ]
    times = []
    for state in moves:
        start = time.perf_counter()
        view._handle_msg({"content": {"data": {"method": "update", "state": state}}, "buffers": []})
        times.append((time.perf_counter() - start) * 1e3)
        assert view.error == "", view.error
    policy = compiler.BucketPolicy.parse("pow2:16-4096")
    raw = []
    for _ in range(repeats):
        start = time.perf_counter()
        compiler.tune(policy, lengths)
        raw.append((time.perf_counter() - start) * 1e3)
    med, worst = statistics.median(times), max(times)
    print(
        f"ShapeTuner 100,000 samples: build {build_ms:.1f} ms; recompute per control move median {med:.2f} ms, "
        f"max {worst:.2f} ms ({med / TUNER_BUDGET_MS:.2f}x of the 50 ms budget); "
        f"tune() alone on the raw array {statistics.median(raw):.2f} ms (widget/raw {med / statistics.median(raw):.2f}x)"
    )


def bench_placement(repeats: int) -> None:
    from trn_notebook.device.placement import placement_log
    from trn_notebook.widgets import PlacementView

    for n in (100, 2_000, 10_000):
        categories = ("native", "native", "native", "cpu_fallback", "host_only")
        snap = {
            f"op_{i}": (categories[i % 5], 1 + i % 7, 1e-5 * i, 2e-6 * i, 64 * i, 32 * i, f"<cell 3>:{i}")
            for i in range(n)
        }
        build, frame = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            view = PlacementView(window=snap)
            build.append((time.perf_counter() - start) * 1e3)
            view.close()
            start = time.perf_counter()
            placement_log.frame(snap)
            frame.append((time.perf_counter() - start) * 1e3)
        b, f = statistics.median(build), statistics.median(frame)
        print(
            f"PlacementView build for {n:>6} ops: {b:.1f} ms (pandas frame of the same snapshot {f:.1f} ms, "
            f"ratio {b / f:.2f}x)"
        )


MEMORY_NOTEBOOK = [
    """
import statistics, time, json, torch
from torch import nn
import trn_notebook
from trn_notebook.widgets import MemoryView
torch.set_num_threads(1)
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(128, 4, dim_feedforward=512, dropout=0.0, batch_first=True).to("neuron")
x = torch.randn(4, 64, 128).to("neuron")

def workload(seconds=1.0):
    # seconds per step: (wall, CPU time of the whole kernel process, all threads)
    steps, t0, c0 = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < seconds:
        layer.zero_grad(set_to_none=True)
        layer(x).sum().backward()
        steps += 1
    return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps

workload(0.5)
view = MemoryView(live=False)
poll, spent, sent = view.poll, [0.0], [0]

def timed_poll():  # what the sampling thread costs: its CPU time inside poll() (GIL waits excluded)
    start = time.thread_time()
    points = poll()
    spent[0] += time.thread_time() - start
    sent[0] += len(points)
    return points

view.poll = timed_poll
view
""",
    """
off, on, wall_on = [], [], 0.0
for i in range(REPEATS):
    view.live = False
    off.append(workload())
    view.live = True
    t0 = time.perf_counter()
    on.append(workload())
    wall_on += time.perf_counter() - t0
view.live = False
print("RESULT " + json.dumps({"off": off, "on": on, "poll_s": spent[0], "wall_on_s": wall_on, "points": sent[0]}))
""",
]


def bench_memory(repeats: int) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cells = [MEMORY_NOTEBOOK[0], MEMORY_NOTEBOOK[1].replace("REPEATS", str(repeats))]
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    repo = str(Path(__file__).resolve().parents[1])
    NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": repo}}).execute()
    text = "".join(o.get("text", "") for o in nb.cells[1].outputs if o.get("output_type") == "stream")
    match = re.search(r"RESULT (\{.*\})", text)
    if match is None:
        raise RuntimeError(f"the benchmark notebook printed no result: {nb.cells[1].outputs}")
    result: dict[str, Any] = json.loads(match.group(1))
    off_wall, on_wall = (statistics.median(w for w, _ in result[k]) for k in ("off", "on"))
    off_cpu, on_cpu = (statistics.median(c for _, c in result[k]) for k in ("off", "on"))
    share = result["poll_s"] / result["wall_on_s"]
    print(
        f"MemoryView live (real kernel comm, 200 ms sampling), eager transformer-block fwd+bwd step, "
        f"medians of {repeats} alternating 1 s runs:\n"
        f"  wall {off_wall * 1e3:.2f} ms without, {on_wall * 1e3:.2f} ms with a live view: ratio {on_wall / off_wall:.3f}x "
        f"(noisy on a shared machine)\n"
        f"  process CPU {off_cpu * 1e3:.2f} ms without, {on_cpu * 1e3:.2f} ms with: ratio {on_cpu / off_cpu:.3f}x "
        f"({100 * (on_cpu / off_cpu - 1):+.1f}%, target <= {100 * MEMORY_BUDGET:.0f}%)\n"
        f"  sampler thread CPU inside poll() {1e3 * result['poll_s']:.1f} ms of {result['wall_on_s']:.1f} s = {100 * share:.2f}% "
        f"of the cell; {result['points']} samples sent\n"
        f"  per-run wall ratios (on/off, alternating): {[round(b[0] / a[0], 2) for a, b in zip(result['off'], result['on'])]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    bench_tuner(5 if args.quick else 20)
    bench_placement(3 if args.quick else 7)
    bench_memory(4 if args.quick else 12)


if __name__ == "__main__":
    main()
