"""torch.compile(backend="neuron") inside dryrun(): the real compiler on shape-only inputs, each graph charged its
schedule (issue 25 item 2); the session's own figures untouched."""

from __future__ import annotations

import gc

import torch
from torch._subclasses.fake_tensor import FakeTensor

import trn_notebook
from trn_notebook.device.memory.runtime import allocator
from trn_notebook.device.placement import placement_log


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32))


def test_compiled_model_under_dryrun_is_compiled_for_real_and_charged_once_per_run(fresh_device) -> None:
    gc.collect()  # tensors earlier tests left would otherwise be freed (counted) while the run goes on
    before = (dict(placement_log.snapshot()), allocator.snapshot().counters.num_allocs)
    with trn_notebook.dryrun() as run:
        model = torch.compile(_mlp().to("neuron"), backend="neuron")
        x = torch.randn(8, 64, device="neuron")
        y = model(x)
        y2 = model(x)
    assert isinstance(y, FakeTensor) and y.shape == (8, 32) and y2.shape == (8, 32)
    # the session is untouched: no op in its placement log, no block of its allocator
    assert (dict(placement_log.snapshot()), allocator.snapshot().counters.num_allocs) == before
    graphs = [op for op in run.figures.placement if op.startswith("graph:")]
    assert len(graphs) == 1 and run.figures.placement[graphs[0]].calls == 2  # one graph, two runs
    assert "aten::addmm" not in run.placement.rows  # its ops were not charged one by one
    (record,) = run.compiled
    assert record.kind == "forward" and record.modeled_device_s > 0
    assert run.figures.placement[graphs[0]].device_s == 2 * record.modeled_device_s  # the schedule, per run
    assert run.clocks.launches == 2
    text = run.summary()
    assert "compiled for real on shape-only inputs: 1 graph (forward 1)" in text
    assert "modeled Neuron compile" in text


def test_a_backward_graph_runs_dry_on_autograds_thread(fresh_device) -> None:
    torch._dynamo.reset()  # compile afresh: a frame dynamo still holds from the test above records no compile
    with trn_notebook.dryrun() as run:
        model = torch.compile(_mlp().to("neuron"), backend="neuron")
        model(torch.randn(8, 64, device="neuron")).sum().backward()
        grads = [p.grad for p in model.parameters()]
    assert all(isinstance(g, FakeTensor) for g in grads)
    kinds = sorted(r.kind for r in run.compiled)
    assert kinds == ["backward", "forward"]
