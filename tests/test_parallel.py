"""The suite runs on every core (pytest-xdist, tests/conftest.py): each worker gets its share of threads."""

from __future__ import annotations

import os

import pytest
import torch


def test_a_worker_uses_its_share_of_the_cores() -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if workers == 1:
        pytest.skip("the suite runs in one process here (-n 0): every core is this process's")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    share = max(1, cores // workers)
    assert os.environ["OMP_NUM_THREADS"] == str(share)  # what kernels, ranks and subprocesses inherit
    assert torch.get_num_threads() == share  # set before this worker imported torch
