"""Profiling figures (issue 15), as ratios against runs in the same process.

* transformer block (d=256, 4 heads, batch 8x128) forward+backward on ``neuron``: time per step
  without a profiler (baseline), under ``torch.profiler`` with trn-notebook's adapter removed
  (torch.profiler's own overhead) and with it (the full cost; target <= 1.15x the baseline);
* merge + summary of a trace with ~100k simulator events (target <= 2 s; Kineto's own JSON export
  of the same profile is printed for scale);
* timeline widget payload for that trace (target <= 2 MB);
* memory history (issue 19): recording on the block fwd+bwd (target <= 10%), ``_snapshot()`` of 100k
  trace entries (target <= 1 s) and the size of its ``_dump_snapshot`` (target <= 20 MB).

Run: ``python benchmarks/bench_profile.py [--events N]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

import trn_notebook
from trn_notebook.profiling import adapter, session_of
from trn_notebook.profiling.merge import merge_trace
from trn_notebook.profiling.summary import summarize

torch.set_num_threads(1)
ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def block() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.0, batch_first=True).to("neuron")
    return layer, torch.randn(8, 128, 256).to("neuron")


def steps(layer: nn.Module, x: torch.Tensor, n: int) -> float:
    """CPU seconds of this process per step (all its threads: autograd's worker too). On a machine
    shared by many jobs, wall time mostly measures the others; CPU time measures this work."""
    t0 = time.process_time()
    for _ in range(n):
        layer.zero_grad(set_to_none=True)
        layer(x).sum().backward()
    torch.neuron.synchronize()
    return (time.process_time() - t0) / n


def profiled(layer: nn.Module, x: torch.Tensor, n: int) -> float:
    with profile(activities=ACTIVITIES, record_shapes=True) as prof:
        t = steps(layer, x, n)
    del prof
    return t


def overhead(repeat: int, n: int) -> None:
    layer, x = block()
    steps(layer, x, 2)
    base, torch_only, full = [], [], []
    for _ in range(repeat):  # interleaved so the three share the machine's noise
        base.append(steps(layer, x, n))
        adapter.uninstall()
        try:
            torch_only.append(profiled(layer, x, n))
        finally:
            adapter.install()
        full.append(profiled(layer, x, n))
    b, t, f = (statistics.median(v) for v in (base, torch_only, full))

    def spread(v: list[float]) -> str:
        return f"[{min(v) * 1e3:.1f}..{max(v) * 1e3:.1f}]"

    print(f"transformer block fwd+bwd, CPU ms per step (median of {repeat}, {n} steps each; [min..max]):")
    print(f"  no profiler            {b * 1e3:7.1f} ms {spread(base)}")
    print(f"  torch.profiler only    {t * 1e3:7.1f} ms {spread(torch_only)}  ratio {t / b:.3f}x (torch's own overhead)")
    print(f"  torch.profiler + lanes {f * 1e3:7.1f} ms {spread(full)}  ratio {f / b:.3f}x (target <= 1.15x)")
    print(f"  of which trn-notebook recording: {(f - t) / b * 100:.1f}% of the baseline step")


def big_trace(events: int) -> None:
    x = torch.randn(4, 4).to("neuron")
    with profile(activities=ACTIVITIES) as prof:
        for i in range(events):
            x = x + 1.0
            if i % 1000 == 999:
                x.sum().item()
    session = session_of(prof)
    assert session is not None
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    import pandas  # noqa: F401 - imported in any notebook session; keep its import out of the timing

    from trn_notebook.widgets.timeline import TimelineWidget

    try:
        adapter.uninstall()  # time Kineto's own export alone
        t_export = timed(lambda: prof.export_chrome_trace(path))
        adapter.install()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        t_load = timed(lambda: json.loads(text))
        trace = json.loads(text)
        n_kineto = len(trace["traceEvents"])
        t_merge = timed(lambda: merge_trace(trace, session, True))
        t_summary = timed(lambda: summarize(trace))
        summary = summarize(trace)
        box: list[TimelineWidget] = []
        t_widget = timed(lambda: box.append(TimelineWidget(trace)))
        state = box[0].get_state()
        payload = len(json.dumps({k: v for k, v in state.items() if k not in ("_esm", "_css")}))
    finally:
        os.unlink(path)
    n = len(session.records)
    print(
        f"trace: {n_kineto} Kineto events + {n} simulator records -> {len(trace['traceEvents'])} events after the merge"
    )
    print("  (wall s / CPU s of this process; CPU time is what the figure means on a loaded machine)")
    print(f"  Kineto export (torch, for scale) {fmt(t_export)}; JSON load {fmt(t_load)}")
    total = (t_merge[0] + t_summary[0], t_merge[1] + t_summary[1])
    print(f"  merge {fmt(t_merge)} + summary {fmt(t_summary)} = {fmt(total)} (target <= 2 s)")
    print(f"  widget build {fmt(t_widget)}, payload {payload / 1e6:.2f} MB (target <= 2 MB)")
    print(f"  summary: busy {summary.busy_ms:.1f} ms of {summary.window_ms:.1f} ms modeled")


def timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def fmt(t: tuple[float, float]) -> str:
    return f"{t[0]:.2f}/{t[1]:.2f} s"


def memory_history(repeat: int, n: int, entries: int) -> None:
    import pickle

    from trn_notebook.profiling import memory

    layer, x = block()
    steps(layer, x, 2)
    off, on = [], []
    for _ in range(repeat):
        off.append(steps(layer, x, n))
        torch.neuron.memory._record_memory_history(max_entries=entries)
        on.append(steps(layer, x, n))
        torch.neuron.memory._record_memory_history(enabled=None)
    b, w = statistics.median(off), statistics.median(on)
    print(
        f"memory history on the block: {b * 1e3:.1f} -> {w * 1e3:.1f} ms per step, ratio {w / b:.3f}x (target <= 1.10x)"
    )
    torch.neuron.memory._record_memory_history(max_entries=entries)
    y = torch.ones(64, device="neuron")
    while memory.history.snapshot() < entries:
        y = y + 1.0
    t = timed(torch.neuron.memory._snapshot)
    size = len(pickle.dumps(torch.neuron.memory._snapshot()))
    torch.neuron.memory._record_memory_history(enabled=None)
    print(f"snapshot of {entries} entries: {fmt(t)} (target <= 1 s), dump {size / 1e6:.2f} MB (target <= 20 MB)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=12_500, help="ops profiled (12,500 give ~100k Kineto events)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    print("load:", os.popen("uptime").read().strip())
    print("trn-notebook", trn_notebook.__version__, "torch", torch.__version__)
    overhead(args.repeat, args.steps)
    big_trace(args.events)
    memory_history(args.repeat, args.steps, 100_000)
    print("load:", os.popen("uptime").read().strip())


if __name__ == "__main__":
    main()
