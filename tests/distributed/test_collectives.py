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


@pytest.mark.slow
def test_fsdp2_full_tensor_many_times_never_hangs():
    # Issue 34 item 2: 2000 gathers on 2 ranks hung in every run of the old wait_tensor (2 of 2 at load ~2,
    # 4 of 4 at load ~9, before the fix); a hang fails here after the 10 s collective timeout, not 60 s.
    run_ranks(workers.full_tensor_many, 2, args=(2000,), timeout_s=240, collective_timeout_s=10)
