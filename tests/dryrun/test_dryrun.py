"""trn_notebook.dryrun(): shape-only tensors, labelled figures, findings, modules restored, OOM kept."""

from __future__ import annotations

import pytest
import torch

import trn_notebook
from trn_notebook.device.memory.runtime import allocator
from trn_notebook.device.placement import placement_log
from trn_notebook.dry.run import DryRunError


def test_dry_figures_do_not_touch_the_session(fresh_device) -> None:
    before = (dict(placement_log.snapshot()), allocator.snapshot().counters)
    with trn_notebook.dryrun() as run:
        x = torch.randn(64, 64, device="neuron")
        y = (x @ x).relu()
    assert y.shape == (64, 64)
    assert (dict(placement_log.snapshot()), allocator.snapshot().counters) == before
    assert run.placement["aten::mm"].calls == 1
    assert run.memory.counters.peak_allocated > 0
    text = run.summary()
    assert text.startswith("DRY RUN") and "modeled" in text
    assert trn_notebook.state.owners()["dry_runs"].snapshot() is run.figures


def test_value_reads_are_findings_with_source_line(fresh_device) -> None:
    with trn_notebook.dryrun() as run:
        x = torch.randn(8, device="neuron")
        if x.sum() > 0:  # Python control flow on a value
            pass
        nz = torch.nonzero(x)
    assert nz.shape == (8, 1)  # the largest possible shape
    kinds = {f.kind for f in run.findings}
    assert kinds == {"item", "dynamic_shape"}
    assert all("test_dryrun.py" in f.source for f in run.findings)


def test_raise_mode_gives_a_clear_error(fresh_device) -> None:
    with pytest.raises(DryRunError, match="host sync"), trn_notebook.dryrun(on_data_dependent="raise"):
        torch.randn(3, device="neuron").sum().item()


def test_model_built_outside_is_moved_in_and_restored(fresh_device) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    weight = model[0].weight
    ref = model(torch.ones(1, 8))
    with trn_notebook.dryrun() as run:
        model.to("neuron")
        model(torch.ones(1, 8).to("neuron")).sum().backward()
    assert model[0].weight is weight and weight.device.type == "cpu" and weight.grad is None
    torch.testing.assert_close(model(torch.ones(1, 8)), ref)
    assert (run.placement["aten::_copy_from"].bytes_h2d or 0) > 0


def test_oom_is_the_modeled_rule(fresh_device) -> None:
    strict = trn_notebook.dryrun(capacity=64 << 20, strict=True)  # the real device's behaviour: stop there
    with pytest.raises(torch.OutOfMemoryError), strict:
        torch.empty(100 << 20, dtype=torch.uint8, device="neuron")
    assert not strict.fits and "DOES NOT FIT" in strict.summary() and "strict" in strict.summary()
    with trn_notebook.dryrun(capacity=64 << 20) as run:  # the default: a finding, and the run goes on
        torch.empty(100 << 20, dtype=torch.uint8, device="neuron")
        after = torch.ones(4, device="neuron") + 1
    assert after.shape == (4,) and not run.fits and run.need.peak_allocated >= 100 << 20
    assert run.need.min_cores == 2 and "first over capacity" in run.summary()
