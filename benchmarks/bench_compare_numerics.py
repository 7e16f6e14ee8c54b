"""compare_numerics on a 12-layer GPT-2-size model (issue 27 figure: ≤ 30 s).

GPT-2 small dimensions (``transformers.GPT2Config()``: 12 layers, 768 wide, 12 heads, vocab 50,257), random
weights, one sequence of 128 tokens. Prints the wall time of ``trn_notebook.compare_numerics`` next to its
baseline in the same process: one plain forward pass of each of the three runs it makes (CPU FP32, CPU BF16,
neuron) with no hooks, copies or figures, and the ratio of the two. Run:
``python benchmarks/bench_compare_numerics.py [--tokens 128] [--numerics trainium,autocast=matmult]``.
"""

from __future__ import annotations

import argparse
import copy
import os
import time

import torch

import trn_notebook

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import transformers


def _plain_forwards(model: torch.nn.Module, ids: torch.Tensor, spec: str) -> float:
    """One forward of each of the three runs (models already built), timed together (wall)."""
    from trn_notebook.numerics_compare import resolve_policy

    fp32, bf16 = copy.deepcopy(model).eval(), copy.deepcopy(model).to(torch.bfloat16).eval()
    dev = copy.deepcopy(model).eval().to("neuron")
    dev_ids = ids.to("neuron")
    with torch.no_grad(), trn_notebook.numerics(resolve_policy(spec)):
        dev(input_ids=dev_ids)  # warm-up of the device path, excluded (compare_numerics pays its own)
        t0 = time.perf_counter()
        fp32(input_ids=ids)
        bf16(input_ids=ids)
        dev(input_ids=dev_ids).logits.cpu()
        return time.perf_counter() - t0


def main() -> None:
    """Time the comparison against the plain forwards and print both with their ratio and the machine load."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--numerics", default="trainium,autocast=matmult")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    ids = torch.randint(0, model.config.vocab_size, (1, args.tokens))
    plain = _plain_forwards(model, ids, args.numerics)
    t0, c0 = time.perf_counter(), time.process_time()
    result = trn_notebook.compare_numerics(model, {"input_ids": ids}, numerics=args.numerics)
    full, cpu = time.perf_counter() - t0, time.process_time() - c0
    load = os.getloadavg()
    print(f"GPT-2 12 layers x 768, {args.tokens} tokens, numerics {result.policy.label()}")
    print(f"  {len(result.rows)} module calls compared; {result.verdict()[:160]}")
    print(
        f"  compare_numerics            {full:7.2f} s wall, {cpu:.2f} s CPU of this process  (issue 27 target: <= 30 s)"
    )
    print(f"  3 plain forwards (baseline) {plain:7.2f} s")
    print(f"  ratio                       {full / plain:7.2f} x")
    print(f"  load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
