"""A 20-second tour: put a small model on ``neuron``, train a few steps, print placement and memory.

Run with ``python -m trn_notebook.demo``.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn

import trn_notebook
from trn_notebook.device.clocks import clocks
from trn_notebook.display.format import fmt_ratio, fmt_s


def run(steps: int = 3, seed: int = 0) -> dict[str, object]:
    """Train a tiny MLP on the simulated device; returns the loss curve and the placement summary."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 10)).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(16, 32).to("neuron")
    y = torch.randint(0, 10, (16,)).to("neuron")
    losses = []
    with trn_notebook.phase("train"):
        for _ in range(steps):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return {"losses": losses, "summary": trn_notebook.placement_summary()}


def main(argv: list[str] | None = None) -> None:
    """Print the tour's results (``--help`` for the options); argparse exits 2 on a bad option."""
    parser = argparse.ArgumentParser(
        prog="trn-notebook-demo",
        description="A 20-second tour of the simulated neuron device: train a tiny MLP, print placement and memory.",
    )
    parser.add_argument("--steps", type=int, default=3, help="training steps (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)
    result = run(steps=args.steps, seed=args.seed)
    summary = result["summary"]
    assert isinstance(summary, dict)
    print(f"device: {torch.neuron.get_device_name()}  ({torch.neuron.device_count()} devices)")
    losses = result["losses"]
    assert isinstance(losses, list)
    print("losses:", ", ".join(fmt_ratio(v) for v in losses))
    print("op calls by placement:", summary["calls"])
    print("fallback ops:", trn_notebook.get_fallback_ops() or "none")
    c = clocks.snapshot()
    print(f"modeled device time: {fmt_s(c.sim_device_s)}; sync points: {c.sync_points}")
    print(torch.neuron.memory_summary())


if __name__ == "__main__":
    main()
