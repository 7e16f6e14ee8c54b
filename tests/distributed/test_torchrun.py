"""``torchrun --nproc-per-node 2 script.py`` runs an unchanged script on the neuron backend."""

from __future__ import annotations

import os
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


@pytest.mark.slow
def test_torchrun_runs_an_unchanged_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    port = str(free_port())
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", port, str(script)]
    # its own session: on a timeout the whole group (torchrun and its workers) is killed, nothing left behind
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    assert "rank 0/2 neuron:0 [3.0, 3.0, 3.0]" in out
    assert "rank 1/2 neuron:0 [3.0, 3.0, 3.0]" in out
