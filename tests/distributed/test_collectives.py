"""On 2 spawned ranks, neuron equals CPU/gloo: every collective, DDP, DTensor TP, FSDP2; FSDP2 saves memory.

One spawn runs them all (see ``workers.everything``): importing torch and dynamo in two processes on
two shared cores costs more than the checks themselves. A failure names the rank and the line.
"""

from __future__ import annotations

import pytest

from trn_notebook.distributed.launch import run_ranks

from . import workers


@pytest.mark.slow
def test_collectives_ddp_tp_fsdp_match_cpu_gloo_rank_by_rank():
    run_ranks(workers.everything, 2, timeout_s=400)
