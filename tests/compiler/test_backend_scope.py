"""The backend leaves process state as it found it: the garbage collector and dynamo's settings."""

from __future__ import annotations

import gc
import importlib

import pytest
import torch

import trn_notebook
from trn_notebook.compiler import compile_log

backend = importlib.import_module("trn_notebook.compiler.backend")


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_gc_is_restored_when_a_compile_stops_midway(fresh_compiler, monkeypatch, error):
    def failing_passes(*args, **kwargs):
        assert not gc.isenabled()  # paused during the compile
        raise error

    monkeypatch.setattr(backend, "run_passes", failing_passes)
    assert gc.isenabled()
    compiled = trn_notebook.compile(lambda x: x * 2 + 1)
    with pytest.raises((type(error), Exception)):
        compiled(torch.ones(3, device="neuron"))
    assert gc.isenabled()


def test_gc_pause_restores_a_disabled_collector_as_disabled():
    gc.disable()
    try:
        with pytest.raises(KeyboardInterrupt), backend.gc_paused():
            raise KeyboardInterrupt
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_dynamo_settings_are_not_changed_for_the_process(fresh_compiler):
    cfg = torch._dynamo.config
    before = (cfg.automatic_dynamic_shapes, cfg.recompile_limit)
    trn_notebook.bucketed(lambda input_ids: input_ids + 1, dims={"input_ids": 0}, policy="step:1:1-12")
    trn_notebook.compile(lambda x: x + 1)(torch.ones(2, device="neuron"))
    assert (cfg.automatic_dynamic_shapes, cfg.recompile_limit) == before == (True, 8)


def test_plain_torch_compile_recompiles_statically_per_new_shape(fresh_compiler):
    """Dynamo's automatic dynamic shapes stay on for other backends; ours compiles one static graph per shape."""

    def f(x):
        return (x * 2).sin().sum(0)

    compiled = torch.compile(f, backend="neuron")
    for n in (3, 5, 7):
        x = torch.randn(n, 4).to("neuron")
        torch.testing.assert_close(compiled(x).cpu(), f(x.cpu()))
    assert [r.input_signature for r in compile_log.snapshot()] == [["f32[3,4]"], ["f32[5,4]"], ["f32[7,4]"]]


def test_training_through_per_shape_graphs_matches_cpu(fresh_compiler):
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 3)
    dev = torch.nn.Linear(4, 3)
    dev.load_state_dict(ref.state_dict())
    dev = dev.to("neuron")
    compiled = torch.compile(dev, backend="neuron")
    for n in (2, 6, 9):
        x = torch.randn(n, 4)
        compiled(x.to("neuron")).sum().backward()
        ref(x).sum().backward()
    torch.testing.assert_close(dev.weight.grad.cpu(), ref.weight.grad)
    torch.testing.assert_close(dev.bias.grad.cpu(), ref.bias.grad)
