"""Workload benchmark (issue 33): what users run, CPU eager vs neuron eager vs neuron compiled, one process.

Three workloads, each written here (nothing vendored), each run on three sides in interleaved rounds:

1. a nanoGPT-shaped training step: a GPT of 2 layers x 64 (4 heads, block 64, vocab 65, no dropout),
   batch 8, cross-entropy, ``AdamW`` step and ``zero_grad`` (targets: neuron eager <= 2x CPU eager,
   neuron compiled <= 1.2x);
2. a Transformer LM epoch slice like pytorch/examples ``word_language_model`` (``--model Transformer``):
   embedding + positional encoding + ``nn.TransformerEncoder`` (2 layers, 200 wide, 2 heads) + decoder
   over a 2,000-word vocabulary, bptt 35, batch 20, log-softmax + NLL, ``clip_grad_norm_`` and the
   example's manual SGD update;
3. the same slice with the example's ``RNN_TANH`` model (2 layers, 200 wide), hidden state carried and
   detached between batches.

"compiled" is ``torch.compile(model, backend="neuron")`` (as nanoGPT's ``--compile`` does: the model,
not the optimizer). Printed: per side the median ms per step over interleaved rounds with its spread
(min-max), the ratio to CPU eager (median of per-round ratios, with spread), and the load average before
and after. Both sides run with one intra-op thread (``OMP_NUM_THREADS=1`` and ``torch.set_num_threads(1)``)
so CPU threading neither helps nor hurts one side. Times are wall clock on a shared machine: compare the
ratios, never the absolute figures.

``--split`` also prints the nanoGPT step by phase (forward / backward / AdamW step) per side: where the
remaining gap is.

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_workloads.py [--rounds N] [--only nanogpt,transformer,rnn] [--split]``

Where the compiled nanoGPT step spends its time above CPU eager (measured 2026-12-04, load 1.5, torch 2.13, perf_counter
splits and cProfile; medians in ms, forward / backward): CPU eager 3.23 / 5.34. The same compiled program on CPU
tensors (our backend, no device): 3.87 / 6.15, of which the host program 3.31 / 5.79 and dynamo guards + AOTAutograd
wrappers + autograd.Function 0.35+0.18 / 0.16+0.17: the decomposed ATen program costs what eager's whole forward
costs (module overhead included) and 8% more in backward, and torch.compile's own frame entry ~0.9 ms a step.
Neuron compiled: 4.50 / 7.22 = program 3.36 / 5.94 + our executable 0.66 / 0.53 (wrapping 52 / 30 results ~0.47 /
0.27 ms at ~7.5 us each, mostly the boxed ``set_`` of the neuron tensor's storage; host views of 30 / 62 inputs
0.07 / 0.10; clocks + placement + compile-log record 0.013 / 0.012) + torch around it 0.47 / 0.75 (the backward
also hands over to autograd's device thread and back: +0.4 ms at load 1.5, 2-8 ms at load 7; single-threaded
autograd removes it, but memory_owners attributes gradients by that thread). Per node, the program's closures cost
~1.5 us over the ATen call. A generated straight-line function removed ~5% of the program's time but was not
kept: it would exec source derived from a graph that may come from the disk cache.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch
import torch.nn.functional as F
from torch import nn

import trn_notebook  # noqa: F401 - registers the device and the backend

torch.set_num_threads(1)

# --- 1. nanoGPT-shaped model -------------------------------------------------------------------------

N_LAYER, N_EMBD, N_HEAD, BLOCK, BATCH, VOCAB = 2, 64, 4, 64, 8, 65


class CausalSelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
        q, k, v = (z.view(b, t, N_HEAD, c // N_HEAD).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(N_EMBD)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(N_EMBD)
        self.mlp = nn.Sequential(nn.Linear(N_EMBD, 4 * N_EMBD), nn.GELU(), nn.Linear(4 * N_EMBD, N_EMBD))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, N_EMBD)
        self.wpe = nn.Embedding(BLOCK, N_EMBD)
        self.h = nn.ModuleList(Block() for _ in range(N_LAYER))
        self.ln_f = nn.LayerNorm(N_EMBD)
        self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
        self.wte.weight = self.lm_head.weight  # weight tying, as nanoGPT

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def nanogpt_side(device: str, compiled: bool, phases: dict[str, list[float]] | None = None) -> Callable[[], None]:
    """One nanoGPT-shaped training step on ``device``; with ``phases``, appends each phase's wall time."""
    torch.manual_seed(0)
    model = GPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    fwd = torch.compile(model, backend="neuron") if compiled else model
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, VOCAB, (16, BATCH, BLOCK + 1), generator=g)
    xs, ys = data[..., :-1].contiguous().to(device), data[..., 1:].contiguous().to(device)  # as get_batch()
    i = [0]

    def step() -> None:
        j = i[0] % xs.shape[0]
        i[0] += 1
        t0 = time.perf_counter()
        loss = fwd(xs[j], ys[j])
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if phases is not None:
            t3 = time.perf_counter()
            for name, dt in (("forward", t1 - t0), ("backward", t2 - t1), ("optimizer", t3 - t2)):
                phases.setdefault(name, []).append(dt)
            if compiled:  # the executables' own walls of this step (the compile log's last run of each graph)
                for kind, wall in graph_walls("GPT").items():
                    phases.setdefault(f"{kind} graph", []).append(wall)

    return step


def graph_walls(model: str) -> dict[str, float]:
    """The wall of the last run of ``model``'s compiled forward and backward graph (the compile log's ``warm_s``:
    our Executable.__call__ from host views to the run's accounting), by graph kind."""
    from trn_notebook.compiler.compile_log import compile_log

    return {r.kind: r.warm_s for r in compile_log.snapshot() if r.model_name == model and r.runs and not r.error}


# --- 2./3. word_language_model-shaped models ---------------------------------------------------------

NTOKEN, EMSIZE, NHID, NLAYERS, NHEAD_LM, BPTT, LM_BATCH, CLIP, LR = 2000, 200, 200, 2, 2, 35, 20, 0.25, 20.0
SLICE = 4  # batches per timed slice of the epoch


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int = 5000) -> None:
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pe[: x.size(0), :]


class TransformerLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(NTOKEN, EMSIZE)
        self.pos = PositionalEncoding(EMSIZE)
        layer = nn.TransformerEncoderLayer(EMSIZE, NHEAD_LM, NHID, dropout=0.0)
        self.transformer = nn.TransformerEncoder(layer, NLAYERS, enable_nested_tensor=False)
        self.decoder = nn.Linear(EMSIZE, NTOKEN)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(BPTT))

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        x = self.pos(self.encoder(src) * math.sqrt(EMSIZE))
        return F.log_softmax(self.decoder(self.transformer(x, self.mask)), dim=-1)


class RNNLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(NTOKEN, EMSIZE)
        self.rnn = nn.RNN(EMSIZE, NHID, NLAYERS, nonlinearity="tanh")
        self.decoder = nn.Linear(NHID, NTOKEN)

    def forward(self, src: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, hidden = self.rnn(self.encoder(src), hidden)
        return F.log_softmax(self.decoder(out), dim=-1), hidden


def lm_side(kind: str, device: str, compiled: bool) -> Callable[[], None]:
    torch.manual_seed(0)
    model = (TransformerLM() if kind == "transformer" else RNNLM()).to(device)
    fwd = torch.compile(model, backend="neuron") if compiled else model
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, NTOKEN, (BPTT * 8 + 1, LM_BATCH), generator=g).to(device)
    hidden = [torch.zeros(NLAYERS, LM_BATCH, NHID, device=device)]
    i = [0]

    def one_batch() -> None:
        start = (i[0] % 8) * BPTT
        i[0] += 1
        src, tgt = data[start : start + BPTT], data[start + 1 : start + 1 + BPTT].reshape(-1)
        model.zero_grad()
        if kind == "transformer":
            out = fwd(src)
        else:
            out, h = fwd(src, hidden[0].detach())
            hidden[0] = h
        loss = F.nll_loss(out.view(-1, NTOKEN), tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-LR)
        loss.item()  # the example reads the loss every batch (total_loss += loss.item())

    def step() -> None:
        for _ in range(SLICE):
            one_batch()

    return step


# --- driver ------------------------------------------------------------------------------------------

SIDES = (("cpu eager", "cpu", False), ("neuron eager", "neuron", False), ("neuron compiled", "neuron", True))


WARM_MIN, WARM_MAX, WARM_BLOCK = 10, 30, 5


def warm_up(step: Callable[[], None]) -> int:
    """Run ``step`` until its per-step time is steady: compile, allocator and host-view caches, optimizer state.

    Blocks of ``WARM_BLOCK`` steps, at least ``WARM_MIN`` and at most ``WARM_MAX`` steps, until a block's median
    is no more than 3% faster than the previous block's (a side still getting faster is not measured yet).
    Returns the number of warm-up steps run."""
    previous = math.inf
    n = 0
    while n < WARM_MAX:
        block = []
        for _ in range(WARM_BLOCK):
            t0 = time.perf_counter()
            step()
            block.append(time.perf_counter() - t0)
        n += WARM_BLOCK
        median = statistics.median(block)
        if n >= WARM_MIN and median > 0.97 * previous:
            break
        previous = min(previous, median)
    return n


def run(name: str, make: Callable[[str, bool], Callable[[], None]], rounds: int, per_round: int, unit: str) -> None:
    steps = [(label, make(device, compiled)) for label, device, compiled in SIDES]
    warm = [warm_up(s) for _, s in steps]
    times: dict[str, list[float]] = {label: [] for label, _ in steps}
    for _ in range(rounds):  # interleaved: every side shares the same stretch of machine noise
        for label, s in steps:
            t0 = time.perf_counter()
            for _ in range(per_round):
                s()
            times[label].append((time.perf_counter() - t0) / per_round)
    base = times["cpu eager"]
    print(f"{name} ({unit}; median [min-max] of {rounds} interleaved rounds x {per_round}; warm-up {warm} steps):")
    for label, _ in steps:
        t = times[label]
        ratios = [x / b for x, b in zip(t, base)]
        print(
            f"  {label:<16}{statistics.median(t) * 1e3:9.1f} ms [{min(t) * 1e3:.1f}-{max(t) * 1e3:.1f}]"
            f"   {statistics.median(ratios):5.2f}x CPU eager [{min(ratios):.2f}-{max(ratios):.2f}]"
        )


def split(rounds: int) -> None:
    """Where the nanoGPT-shaped step's time goes on each side: forward, backward, AdamW step (medians)."""
    phases: dict[str, dict[str, list[float]]] = {label: {} for label, _, _ in SIDES}
    steps = [(label, nanogpt_side(device, compiled, phases[label])) for label, device, compiled in SIDES]
    for _, s in steps:
        warm_up(s)
    for p in phases.values():
        p.clear()
    for _ in range(rounds):
        for _, s in steps:
            for _ in range(5):
                s()
    print("nanoGPT-shaped step by phase (median ms; ratio to the CPU eager phase):")
    base = {k: statistics.median(v) for k, v in phases["cpu eager"].items()}
    for label, p in phases.items():
        cells = [
            f"{k} {statistics.median(v) * 1e3:6.1f} ({statistics.median(v) / base[k]:4.2f}x)"
            for k, v in p.items()
            if k in base
        ]
        print(f"  {label:<16}" + "   ".join(cells))
        for kind in ("forward", "backward"):  # the compiled side: our executable vs torch around it
            inside = p.get(f"{kind} graph")
            if inside:
                around = [whole - own for whole, own in zip(p[kind], inside)]
                print(
                    f"  {'':<16}{kind}: {statistics.median(inside) * 1e3:.1f} ms in the neuron executable, "
                    f"{statistics.median(around) * 1e3:.1f} ms around it (dynamo guards, AOTAutograd wrappers, "
                    "autograd engine)"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default="nanogpt,transformer,rnn")
    parser.add_argument("--split", action="store_true", help="also time the nanoGPT step's phases per side")
    args = parser.parse_args()
    only = set(args.only.split(","))
    print(
        f"load average {os.getloadavg()[0]:.2f} (2 cores shared: compare ratios, not times); "
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}"
    )
    if "nanogpt" in only:
        run("nanoGPT-shaped train step, 2x64, block 64, batch 8, AdamW", nanogpt_side, args.rounds, 5, "ms per step")
        if args.split:
            split(args.rounds)
    if "transformer" in only:
        run(
            f"word_language_model Transformer, epoch slice of {SLICE} batches",
            lambda d, c: lm_side("transformer", d, c),
            args.rounds,
            1,
            "ms per slice",
        )
    if "rnn" in only:
        run(
            f"word_language_model RNN_TANH, epoch slice of {SLICE} batches",
            lambda d, c: lm_side("rnn", d, c),
            args.rounds,
            1,
            "ms per slice",
        )
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
