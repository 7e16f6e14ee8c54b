"""Static-shape surprises of a tracing compiler, one test each (in the spirit of tinygrad's test_jit_footguns).

Each test shows the surprise and what the neuron compiler records about it, so a notebook user can
see it in the compile log instead of guessing.
"""

from __future__ import annotations

import pytest
import torch

import trn_notebook
from trn_notebook.compiler import compile_log, explain
from trn_notebook.compiler.api import GraphBreakError
from trn_notebook.device import clocks

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def test_a_new_length_compiles_a_new_graph_and_says_why():
    compiled = trn_notebook.compile(lambda x: torch.tanh(x) * 2)
    compiled(torch.randn(2, 3))
    compiled(torch.randn(2, 3))  # same shape: no recompile
    compiled(torch.randn(2, 5))
    first, second = compile_log.snapshot()
    assert first.input_signature == ["f32[2,3]"] and second.input_signature == ["f32[2,5]"]
    assert any("size mismatch at index 1. expected 3, actual 5" in r for r in second.recompile_reasons)


def test_a_python_int_is_baked_into_the_graph_as_a_constant():
    def scale(x, n):
        return x * n

    compiled = trn_notebook.compile(scale)
    assert compiled(torch.ones(2), 2).tolist() == [2.0, 2.0]
    assert "mul(%" in explain(compiled).stages["ir"] and ", 2)" in explain(compiled).stages["ir"]
    assert compiled(torch.ones(2), 3).tolist() == [3.0, 3.0]  # a different int: another graph
    records = compile_log.snapshot()
    assert len(records) == 2
    assert any(r.startswith("n == 2") for r in records[1].recompile_reasons), records[1].recompile_reasons


def chatty(x):
    y = x + 1
    print("y computed")
    return y * 2


def test_a_print_splits_the_graph_and_breaks_fullgraph(capsys):
    assert trn_notebook.compile(chatty)(torch.ones(2)).tolist() == [4.0, 4.0]
    assert capsys.readouterr().out.count("y computed") == 1
    records = compile_log.snapshot()
    assert len(records) == 2 and records[0].graph_breaks
    with pytest.raises(GraphBreakError, match="test_footguns.py"):
        trn_notebook.compile(chatty, fullgraph=True)(torch.ones(2))


def scaled_by_norm(x):
    return x / x.abs().sum().item()


def test_item_breaks_the_graph_and_syncs_unless_fullgraph_captures_it():
    x = torch.tensor([1.0, 3.0], device="neuron")
    before = clocks.snapshot().sync_points
    out = trn_notebook.compile(scaled_by_norm)(x)
    assert clocks.snapshot().sync_points > before  # the host waited for the device to read the scalar
    assert out.cpu().tolist() == [0.25, 0.75]
    records = compile_log.snapshot()
    assert len(records) == 2
    assert "item" in records[0].graph_breaks[0]["reason"].lower()
    # with fullgraph=True dynamo keeps the scalar as a 0-d tensor inside one graph instead (no host sync)
    compile_log.reset()
    before = clocks.snapshot().sync_points
    out = trn_notebook.compile(scaled_by_norm, fullgraph=True)(x)
    assert clocks.snapshot().sync_points == before
    assert out.cpu().tolist() == [0.25, 0.75]
    (record,) = compile_log.snapshot()
    assert record.graph_breaks == []
