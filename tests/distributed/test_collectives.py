"""Every collective on neuron tensors equals the same call on CPU/gloo, on 2 spawned ranks."""

from __future__ import annotations

import pytest

from trn_notebook.distributed.launch import run_ranks

from . import workers


@pytest.mark.slow
def test_every_collective_matches_cpu_gloo_on_two_ranks():
    run_ranks(workers.collectives, 2, timeout_s=240)
