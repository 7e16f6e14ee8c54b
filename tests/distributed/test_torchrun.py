"""``torchrun --nproc-per-node 2 script.py`` runs an unchanged script on the neuron backend."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trn_notebook.distributed.launch import free_port

SCRIPT = """
import torch
import torch.distributed as dist

dist.init_process_group("neuron")
rank = dist.get_rank()
x = torch.full((3,), float(rank + 1), device="neuron")
dist.all_reduce(x)
print(f"rank {rank}/{dist.get_world_size()} {x.device} {x.cpu().tolist()}", flush=True)
dist.destroy_process_group()
"""

# PyTorch's DDP tutorial (intermediate/ddp_tutorial, "Initialize DDP with torch.distributed.run/torchrun")
# as a user writes it for a CPU machine: no backend argument, no trn_notebook import. The device is the
# script's only argument, so the CPU run never touches neuron.
DDP_TUTORIAL = """
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP


class ToyModel(nn.Module):
    def __init__(self):
        super(ToyModel, self).__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def demo_basic(device):
    dist.init_process_group()
    rank = dist.get_rank()
    print(f"Start running basic DDP example on rank {rank}.")
    torch.manual_seed(0)
    model = ToyModel().to(device)
    ddp_model = DDP(model)
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    torch.manual_seed(rank)
    optimizer.zero_grad()
    outputs = ddp_model(torch.randn(20, 10).to(device))
    labels = torch.randn(20, 5).to(device)
    loss_fn(outputs, labels).backward()
    optimizer.step()
    weights = model.net2.weight.detach().cpu().flatten().tolist()
    # one write() of the whole line (< PIPE_BUF, so atomic): the two ranks share the pipe, and print()'s text and
    # newline can interleave with the other rank's (seen in CI: rank 1's line landed inside rank 0's)
    os.write(1, f"rank {rank} on {outputs.device.type} weights {weights}\\n".encode())
    dist.destroy_process_group()
    print(f"Finished running basic DDP example on rank {rank}.")


if __name__ == "__main__":
    demo_basic(sys.argv[1])
"""


def _torchrun(script: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    root = Path(__file__).resolve().parents[2]
    env = dict(env or os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    port = str(free_port())
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", port]
    # its own session: on a timeout the whole group (torchrun and its workers) is killed, nothing left behind
    return subprocess.Popen(
        [*cmd, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )


def _finish(proc: subprocess.Popen[str]) -> str:
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every torchrun of this module started at once: each run mostly waits for its workers' imports."""
    tmp = tmp_path_factory.mktemp("torchrun")
    (tmp / "train.py").write_text(SCRIPT)
    (tmp / "ddp_tutorial.py").write_text(DDP_TUTORIAL)
    procs = {
        "neuron backend": _torchrun(tmp / "train.py"),
        "tutorial cpu": _torchrun(tmp / "ddp_tutorial.py", "cpu"),
        "tutorial neuron": _torchrun(tmp / "ddp_tutorial.py", "neuron"),
    }
    yield procs
    for proc in procs.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.slow
def test_torchrun_runs_an_unchanged_script(runs):
    out = _finish(runs["neuron backend"])
    assert "rank 0/2 neuron:0 [3.0, 3.0, 3.0]" in out
    assert "rank 1/2 neuron:0 [3.0, 3.0, 3.0]" in out


def _weights(out: str, device: str) -> dict[str, str]:
    # Each weight line is one os.write, so it is contiguous; the tutorial's own print()s of the other rank may
    # still land right before it on the shared pipe without their newline (seen on Python 3.12), so match the
    # line anywhere rather than at a line start.
    found = re.findall(r"rank (\d+) on (\w+) weights (\[[^\]]*\])", out)
    assert len(found) == 2 and all(dev == device for _, dev, _ in found), out
    return {rank: weights for rank, _, weights in found}


@pytest.mark.slow
def test_the_unchanged_ddp_tutorial_runs_on_cpu_and_on_neuron(runs):
    """Installed trn-notebook leaves the CPU-only tutorial as it is; on neuron it trains to the same weights."""
    cpu = _weights(_finish(runs["tutorial cpu"]), "cpu")
    neuron = _weights(_finish(runs["tutorial neuron"]), "neuron")
    assert cpu["0"] == cpu["1"]  # DDP averaged the two ranks' gradients: both hold the same weights
    assert neuron == cpu
