"""Dry-run figures (issue 25): full-size Llama configs on ``neuron`` with shapes only.

Prints, each against a plain ``FakeTensorMode`` run of the same work in this process (the baseline):
the wall time and peak RSS of a Llama-3.3-70B forward at 2,048 tokens, and of a Llama-3.1-8B training
step (forward, backward, AdamW), plus the dry-run overhead per op (dry ÷ plain fake). Dimensions are the
published ones (``transformers`` configs only; nothing is downloaded). The model is built on the device, so its random initialisation (drawn on the host by the simulator:
``normal_``/``uniform_`` fallbacks) is part of the dry figures. Run: ``python benchmarks/bench_dryrun.py
[--tokens 2048] [--skip-train]``; ``--ranks``: FSDP2 over 64 fake ranks of an 8B step and ``plan()`` over 6
layouts, against a one-rank dry step of the same model; ``--memtracker``: the 8B step's memory by category
against torch's ``MemTracker``; ``--compiled [--layers N]``: the 70B forward compiled
(cold) under ``dryrun()``, against dynamo + AOT alone on the same graph (``backend="aot_eager"`` under a plain
``FakeTensorMode``); ``--alternations N``: eager -> dry run -> eager N times (issue 48: 0 hangs in 1,000);
``--smallest``: the smallest configuration, which CI runs. Every configuration starts with eager work on the
device, as a notebook does, and the 70B and 8B rows run in a default ``dryrun()`` (the device's capacity: over
it the run goes on and reports the peak and the cores it needs).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import trn_notebook

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers

LLAMA_70B = {
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
}  # fmt: skip  (Llama-3.3-70B config.json)
LLAMA_8B = {
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
}  # fmt: skip  (Llama-3.1-8B config.json)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@contextmanager
def _bf16() -> Iterator[None]:
    """Parameters built in bf16 (``.to(bfloat16)`` of a fake model cannot swap its parameters in torch 2.13)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def _forward(dims: dict, tokens: int) -> int:
    """Build a bf16 Llama on neuron and run one forward; returns the number of ops run (counted by the caller)."""
    cfg = transformers.LlamaConfig(**dims)
    with torch.device("neuron"), _bf16():
        model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.zeros(1, tokens, dtype=torch.long, device="neuron")
    with torch.no_grad():
        model(input_ids=ids, use_cache=False)
    return 0


def _train_step(dims: dict, tokens: int) -> None:
    cfg = transformers.LlamaConfig(**dims)
    with torch.device("neuron"), _bf16():
        model = transformers.LlamaForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    ids = torch.zeros(1, tokens, dtype=torch.long, device="neuron")
    model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
    opt.step()


def _compiled_forward(dims: dict, tokens: int, backend: str) -> int:
    """Build a bf16 Llama on neuron and run one compiled forward (cold: dynamo is reset first)."""
    torch._dynamo.reset()
    cfg = transformers.LlamaConfig(**dims)
    with torch.device("neuron"), _bf16():
        model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.zeros(1, tokens, dtype=torch.long, device="neuron")
    with torch.no_grad():
        torch.compile(model, backend=backend)(input_ids=ids, use_cache=False)
    return 0


def compiled_figures(layers: int, tokens: int) -> None:
    """The compiled 70B forward (``layers`` of its layers) dry, against dynamo + AOT alone (aot_eager, plain fake)."""
    dims = {**LLAMA_70B, "num_hidden_layers": layers}
    _plain(_compiled_forward, {**LLAMA_8B, "num_hidden_layers": 1}, 16, "aot_eager")  # warm-up, not timed
    _dry(_compiled_forward, {**LLAMA_8B, "num_hidden_layers": 1}, 16, "neuron")
    base = _plain(_compiled_forward, dims, tokens, "aot_eager")
    dry_s, run = _dry(_compiled_forward, dims, tokens, "neuron")
    print(f"70B forward, {layers} of 80 layers, {tokens} tokens, compiled cold: dry {dry_s:.1f} s, dynamo + AOT "
          f"alone (aot_eager, plain FakeTensorMode) {base:.1f} s (dry / alone = {dry_s / base:.2f}x); peak RSS so "
          f"far {_rss_mb():.0f} MB")  # fmt: skip
    print("  " + run.summary().replace("\n", "\n  "))


def memtracker_figures(tokens: int) -> None:
    """The 8B training step's dry memory by category against torch's MemTracker at the peak (issue 25 item 7)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    t0 = time.perf_counter()
    with trn_notebook.dryrun(capacity=1 << 44, categories=True) as run:
        cfg = transformers.LlamaConfig(**LLAMA_8B)
        with torch.device("neuron"), _bf16():
            model = transformers.LlamaForCausalLM(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        run.track(model, opt)
        tracker = MemTracker()
        tracker.track_external(model, opt)
        with tracker:
            ids = torch.zeros(1, tokens, dtype=torch.long, device="neuron")
            model(input_ids=ids, labels=ids, use_cache=False).loss.backward()
            opt.step()
            opt.zero_grad()
        peak = tracker.get_tracker_snapshot("peak")
    wall = time.perf_counter() - t0
    theirs = {
        str(k).split(".")[-1]: v for dev, d in peak.items() if str(dev).startswith("neuron") for k, v in d.items()
    }
    ours = run.by_category or {}
    gib = 2**30
    print(f"8B training step at {tokens} tokens, dry with MemTracker: {wall:.1f} s, peak RSS so far {_rss_mb():.0f} MB")
    print("  ours at the allocated peak (modeled): " + ", ".join(f"{k} {v / gib:.2f} GiB" for k, v in ours.items()))
    print("  MemTracker at its peak: " + ", ".join(f"{k} {v / gib:.2f} GiB" for k, v in theirs.items()))
    pairs = [("parameters", ["PARAM", "BUFFER"]), ("gradients", ["GRAD"]), ("activations", ["ACT"])]
    pairs += [("optimizer state + temporaries", ["OPT", "TEMP"])]
    for name, keys in pairs:
        a = sum(ours.get(k, 0) for k in name.split(" + "))
        b = sum(theirs.get(k, 0) for k in keys)
        print(f"  {name}: ours {a / gib:.3f} GiB, MemTracker {b / gib:.3f} GiB ({(a - b) / max(b, 1):+.1%})")


def _plain(fn, *args) -> float:
    t0 = time.perf_counter()
    with FakeTensorMode(allow_non_fake_inputs=True):
        fn(*args)
    return time.perf_counter() - t0


def _dry(fn, *args, capacity: int | None = 1 << 44) -> tuple[float, trn_notebook.DryRun]:
    """``fn(*args)`` in a dry run: with ``capacity=None`` the default one (the device's capacity; over it the
    run goes on and says how much it needs), else room for the whole job."""
    t0 = time.perf_counter()
    with trn_notebook.dryrun(capacity=capacity) as run:
        fn(*args)
    return time.perf_counter() - t0, run


def _eager_warmup() -> None:
    """What a notebook does before it asks "will it fit": a few eager cells on the device (issue 48: a dry run
    after any eager op used to hang on the books' lock)."""
    x = torch.randn(4, 4, device="neuron")
    for _ in range(3):
        y = x + x
    (y @ x).sum().item()


def alternations(n: int) -> None:
    """Eager -> dry run -> eager, ``n`` times in this process; a hang dumps every stack and exits (faulthandler)."""
    import faulthandler

    _eager_warmup()
    t0 = time.perf_counter()
    for i in range(n):
        faulthandler.dump_traceback_later(60, exit=True)  # one alternation takes milliseconds
        x = torch.full((4, 4), float(i), device="neuron")
        (x + x).sum()
        with trn_notebook.dryrun() as run:
            torch.ones(8, device="neuron") * 2
        assert run.placement.total_calls >= 2
        faulthandler.cancel_dump_traceback_later()
    wall = time.perf_counter() - t0
    print(f"eager -> dry run -> eager alternations: {n} returned, 0 hangs, {wall:.2f} s "
          f"({wall / n * 1e3:.2f} ms each)")  # fmt: skip


def smallest() -> None:
    """The smallest configuration (CI runs it: tests/dryrun/test_bench_dryrun.py): after eager warm-up, a
    2-layer 8B-shaped forward at 64 tokens dry against plain FakeTensorMode, over capacity in a default dry run
    (a 512 MiB capacity), and 20 alternations."""
    dims = {**LLAMA_8B, "num_hidden_layers": 2, "vocab_size": 8192}
    _plain(_forward, dims, 64)  # warm-up, not timed
    plain = _plain(_forward, dims, 64)
    trn_notebook.set_memory_capacity(512 << 20)
    try:
        dry_s, run = _dry(_forward, dims, 64, capacity=None)
    finally:
        trn_notebook.set_memory_capacity(None)
    need = run.need
    print(f"8B-shaped forward, 2 layers, 64 tokens: dry {dry_s:.2f} s, plain FakeTensorMode {plain:.2f} s "
          f"(dry / plain = {dry_s / plain:.2f}x); fits {run.fits}; needs {need.peak_allocated / 2**30:.2f} GiB "
          f"on >= {need.min_cores} logical cores")  # fmt: skip
    print("  " + run.summary().replace("\n", "\n  "))
    alternations(20)


def main() -> None:
    """Run the figures and print them with their ratios against the plain FakeTensorMode baseline."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--train-tokens", type=int, default=2048)
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--ranks", action="store_true", help="only the figures of dry ranks: FSDP2 x64 and plan() x6")
    ap.add_argument("--compiled", action="store_true", help="only the compiled 70B forward, dry vs dynamo + AOT")
    ap.add_argument("--layers", type=int, default=80, help="layers of the 70B for --compiled (default all 80)")
    ap.add_argument("--memtracker", action="store_true", help="only the 8B step's categories against MemTracker")
    ap.add_argument("--alternations", type=int, default=0, metavar="N", help="only N eager/dry/eager alternations")
    ap.add_argument("--smallest", action="store_true", help="only the smallest configuration (what CI runs)")
    args = ap.parse_args()
    _eager_warmup()  # every configuration starts as a notebook does: eager cells first
    if args.smallest:
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; torch {torch.__version__}")
        smallest()
        return
    if args.alternations:
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; torch {torch.__version__}")
        alternations(args.alternations)
        return
    if args.memtracker:
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; torch {torch.__version__}")
        memtracker_figures(args.train_tokens)
        return
    if args.compiled:
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; torch {torch.__version__}")
        compiled_figures(args.layers, args.tokens)
        return
    if args.ranks:
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; torch {torch.__version__}")
        ranks_figures()
        return
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; torch {torch.__version__}")
    rows = [("70B forward", _forward, LLAMA_70B, args.tokens)]
    if not args.skip_train:
        rows.append(("8B train step", _train_step, LLAMA_8B, args.train_tokens))
    _plain(_forward, {**LLAMA_8B, "num_hidden_layers": 1}, 16)  # warm-up: imports and first-call costs, not timed
    _dry(_forward, {**LLAMA_8B, "num_hidden_layers": 1}, 16)
    for name, fn, dims, tokens in rows:
        plain = _plain(fn, dims, tokens)
        dry_s, run = _dry(fn, dims, tokens, capacity=None)  # a default dry run: over capacity is a finding
        ops = run.placement.total_calls if hasattr(run.placement, "total_calls") else None
        print(f"{name} at {tokens} tokens: dry {dry_s:.1f} s, plain FakeTensorMode {plain:.1f} s "
              f"(dry / plain = {dry_s / plain:.2f}x); peak RSS so far {_rss_mb():.0f} MB; ops {ops}")  # fmt: skip
        need = run.need
        print(f"  peak allocated {need.peak_allocated / 2**30:.1f} GiB against {need.capacity / 2**30:.0f} GiB of HBM "
              f"per logical core: {'fits' if run.fits else f'needs >= {need.min_cores} logical cores'}")  # fmt: skip
        print("  " + run.summary().replace("\n", "\n  "))


def ranks_figures(world: int = 64, layouts: str = "fsdp8,fsdp8+ac,fsdp32,fsdp32+ac,tp4xfsdp8,tp4xfsdp8+ac") -> None:
    """FSDP2 over ``world`` fake ranks of an 8B training step, and plan() over 6 layouts; ratios vs one rank."""
    from trn_notebook.fidelity.configs import LLAMA_8B
    from trn_notebook.planner import Workload

    work = Workload(batch=1, seq=2048)
    t0 = time.perf_counter()
    one = trn_notebook.plan(LLAMA_8B, work, layouts=[trn_notebook.planner.Layout()])
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    fsdp = trn_notebook.plan(LLAMA_8B, work, layouts=f"fsdp{world}")
    fsdp_s = time.perf_counter() - t0
    print(f"8B step, one rank (baseline, dry): {base:.1f} s; FSDP2 over {world} fake ranks: {fsdp_s:.1f} s "
          f"({fsdp_s / base:.2f}x the one-rank run; target <= 180 s); peak RSS so far {_rss_mb():.0f} MB (target <= 2 GB)")  # fmt: skip
    print("  " + fsdp.text().replace("\n", "\n  "))
    print("  one rank: " + one.text().splitlines()[2])
    t0 = time.perf_counter()
    result = trn_notebook.plan(LLAMA_8B, work, layouts=layouts)
    plan_s = time.perf_counter() - t0
    print(f"plan() over 6 layouts of the 8B: {plan_s:.1f} s ({plan_s / base:.2f}x the one-rank run; target <= 180 s); "
          f"peak RSS {_rss_mb():.0f} MB; load {os.getloadavg()[0]:.2f}")  # fmt: skip
    print("  " + result.text().replace("\n", "\n  "))


if __name__ == "__main__":
    main()
