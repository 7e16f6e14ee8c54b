"""Factories whose dtype comes from Python arguments (``arange(n)``, ``full(s, 1)``) run in the 32 bits the IR
declares, so their graphs round-trip through the disk cache (they were discarded and recompiled) and match CPU."""

from __future__ import annotations

import warnings

import pytest
import torch

from trn_notebook.compiler import backend, compile_log

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def positions(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    idx = torch.arange(x.shape[-1], device=x.device)  # int64 from its arguments
    ones = torch.full((x.shape[-1],), 3, device=x.device)  # int64 from the fill value
    return x + idx, idx * 2, ones + idx


def _compiled_run(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a discarded cache entry warns: fail on it
        return tuple(t.cpu() for t in torch.compile(positions, backend="neuron")(x))


def test_python_typed_factories_reload_from_disk_and_match_cpu():
    x = torch.randn(3, 7)
    expected = positions(x)
    first = _compiled_run(x.to("neuron"))
    torch._dynamo.reset()
    backend.clear_memory_cache()  # a new process: only the disk cache is left
    second = _compiled_run(x.to("neuron"))
    assert [r.cache_result for r in compile_log.snapshot()] == ["miss", "disk hit"]
    for got in (first, second):
        for g, e in zip(got, expected, strict=True):
            assert g.dtype == e.dtype and torch.equal(g, e), (g, e)


def test_a_graph_without_tensor_inputs_makes_its_factories_on_neuron():
    # torch.ones(3, device="neuron") alone in a graph: no input says where it runs (it ran on the CPU)
    made = torch.compile(lambda: torch.ones(2, 3, device="neuron") * 2, backend="neuron", fullgraph=True)()
    assert made.device.type == "neuron" and torch.equal(made.cpu(), torch.full((2, 3), 2.0))
    host = torch.compile(lambda: torch.ones(2, 3) * 2, backend="neuron", fullgraph=True)()
    assert host.device.type == "cpu"  # a CPU-only graph stays on the CPU
