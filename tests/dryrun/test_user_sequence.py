"""What a user does, in one process, in order (issue 48): eager cells, a dry run, more eager cells, a compiled
graph, another dry run, ``plan()``. Each step finishes (the suite's per-test timeout prints the stacks of a
hang), and the real figures after the dry runs equal those of the same work with no dry run in between."""

from __future__ import annotations

import gc
import threading

import pytest
import torch

import trn_notebook
from trn_notebook import locks, state
from trn_notebook.device.clocks import clocks
from trn_notebook.device.memory.runtime import allocator
from trn_notebook.device.placement import placement_log


def test_the_suite_checks_the_lock_order() -> None:
    """tests/conftest.py turns the check on before torch is imported; a lock taken against the order raises."""
    assert locks.CHECKING, "TRN_NOTEBOOK_LOCK_CHECK was not set before trn_notebook was imported"
    leaf = locks.make("leaf", "a leaf")
    with leaf, pytest.raises(locks.LockOrderError, match="against the lock order"):
        locks.ACCOUNTING.acquire()
    plain = locks.make("leaf", "plain")
    with plain, pytest.raises(locks.LockOrderError, match="taken again"):
        plain.acquire()
    assert locks.held() == []


def _eager(n: int) -> torch.Tensor:
    x = torch.arange(16.0, device="neuron").reshape(4, 4)
    y = x
    for _ in range(n):
        y = y + x
    return y.sum()


def _tiny_model() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _dry_step() -> trn_notebook.dry.run.DryRun:
    with trn_notebook.dryrun("sequence") as run:
        model = _tiny_model().to("neuron")
        model(torch.randn(2, 8, device="neuron")).sum().backward()
    return run


def _real_figures() -> dict[str, object]:
    """Every modeled (deterministic) real figure: per-op calls, categories, device seconds and bytes; the
    clocks' modeled counters; the allocator's counters. Wall-clock seconds are left out (they are measured)."""
    snap = placement_log.snapshot()
    c = clocks.snapshot()
    return {
        "placement": {k: (e.category, e.calls, round(e.device_s, 12), e.h2d, e.d2h) for k, e in snap.items()},
        "clocks": (round(c.sim_device_s, 12), c.launches, c.sync_points, c.fused_groups),
        "allocator": allocator.snapshot().counters,
    }


def _workload(with_dry_runs: bool) -> tuple[dict[str, object], list[object]]:
    torch.manual_seed(0)
    outcomes: list[object] = []
    _eager(3)
    if with_dry_runs:
        outcomes.append(_dry_step())
    _eager(5).item()
    compiled = torch.compile(lambda a, b: torch.relu(a @ b).sum(), backend="neuron")
    a, b = torch.randn(4, 8, device="neuron"), torch.randn(8, 3, device="neuron")
    compiled(a, b)
    compiled(a, b)
    del a, b, compiled
    if with_dry_runs:
        outcomes.append(_dry_step())
    return _real_figures(), outcomes


@pytest.mark.timeout(300)
def test_eager_dry_eager_compiled_dry_plan_in_one_process(fresh_compiler) -> None:
    from transformers import LlamaConfig

    from trn_notebook.planner import Workload

    # Both passes start from the same warm state: once-per-process work (a worker's earlier tests may or may not
    # have done it) and garbage from earlier tests must not fall into one pass only.
    passes = []
    for with_dry_runs in (False, False, True):
        state.reset()
        torch._dynamo.reset()
        gc.collect()
        passes.append(_workload(with_dry_runs))
    (_, _), (never, _), (after, runs) = passes
    assert after == never  # the dry runs left the real books exactly as they were
    for run in runs:
        assert run.fits and run.placement.total_calls > 0 and run.memory.counters.peak_allocated > 0
    cfg = LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip
    result = trn_notebook.plan(cfg, Workload(batch=1, seq=16), layouts="tp2")
    assert result.table["fits"].all()
    assert _real_figures() == after  # and plan()'s dry runs too
    assert _eager(2).item() == pytest.approx(3 * 120.0)  # the device still works, its values still right


@pytest.mark.timeout(120)
def test_many_alternations_of_eager_work_and_dry_runs_all_return() -> None:
    for i in range(25):
        _eager(2 + i % 3)
        with trn_notebook.dryrun() as run:
            torch.ones(8, device="neuron") * 2
        assert run.placement.total_calls >= 2


@pytest.mark.timeout(120)
def test_a_dry_run_while_another_thread_reads_every_view(fresh_device) -> None:
    """The widgets' comm thread reads the session's state while a cell runs: here a reader thread takes the
    same snapshots as fast as it can while the main thread alternates eager work and dry runs."""
    from trn_notebook.facts.status import state_snapshot

    stop = threading.Event()
    reads = [0]
    errors: list[BaseException] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                state_snapshot()
                placement_log.snapshot()
                clocks.snapshot()
                clocks.chrome_trace()
                allocator.snapshot()
                reads[0] += 1
            except BaseException as exc:
                errors.append(exc)
                return

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        for _ in range(10):
            _eager(4)
            _dry_step()
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive(), "the reader thread did not finish"
    assert not errors, errors
    assert reads[0] > 0
