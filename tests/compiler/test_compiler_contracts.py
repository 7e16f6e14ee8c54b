"""Contracts of torch.compile(backend="neuron"): mode, dynamic, fullgraph, options, fallback execution."""

from __future__ import annotations

import warnings

import pytest
import torch

import trn_notebook
from trn_notebook.compiler import compile_log
from trn_notebook.compiler.api import GraphBreakError
from trn_notebook.compiler.config import override
from trn_notebook.compiler.contracts import DynamicShapesError, NeuronCompileFallbackWarning

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def double(x):
    return x * 2 + 1


def test_unsupported_mode_warns_once_and_compiles_as_default():
    with pytest.warns(UserWarning, match=r"does not support mode='max-autotune'; using default") as caught:
        a = trn_notebook.compile(double, mode="max-autotune")
        b = trn_notebook.compile(double, mode="max-autotune")
    assert sum("does not support mode" in str(w.message) for w in caught) == 1
    x = torch.randn(3)
    torch.testing.assert_close(a(x), double(x))
    torch.testing.assert_close(b(x), double(x))


def test_torch_compile_mode_reaches_the_backend_and_warns():
    compiled = torch.compile(double, backend="neuron", mode="reduce-overhead")
    with pytest.warns(UserWarning, match="reduce-overhead"):
        out = compiled(torch.ones(2))
    assert out.tolist() == [3.0, 3.0]


def test_dynamic_true_is_rejected_with_advice_to_use_buckets():
    with pytest.raises(DynamicShapesError, match=r"static shapes only.*bucketed"):
        trn_notebook.compile(double, dynamic=True)
    compiled = torch.compile(double, backend="neuron", dynamic=True)
    with pytest.raises(Exception, match="static shapes only"):
        compiled(torch.ones(4))


def with_print(x):
    y = x * 2
    print("halfway")  # the break
    return y + 1


def test_fullgraph_break_raises_naming_the_reason_and_the_source_line():
    compiled = trn_notebook.compile(with_print, fullgraph=True)
    with pytest.raises(GraphBreakError) as info:
        compiled(torch.ones(2))
    text = str(info.value)
    assert "fullgraph=True" in text and "print" in text.lower()
    assert "test_compiler_contracts.py:" in text and "halfway" in text


def test_without_fullgraph_each_piece_compiles_and_the_break_is_recorded(capsys):
    out = trn_notebook.compile(with_print)(torch.ones(2))
    assert out.tolist() == [3.0, 3.0] and "halfway" in capsys.readouterr().out
    records = compile_log.snapshot()
    assert len(records) == 2
    (brk,) = records[0].graph_breaks
    assert "print" in brk["reason"].lower() or "builtin" in brk["reason"].lower()
    assert "test_compiler_contracts.py:" in brk["source"]


def test_options_with_a_wrong_type_raise_and_unknown_ones_are_accepted_without_effect():
    with pytest.raises(TypeError, match="model_name"):
        trn_notebook.compile(double, options={"model_name": 3})
    trn_notebook.compile(double, options={"model_name": "m", "enable_bf16": True})(torch.ones(2))
    (rec,) = compile_log.snapshot()
    assert rec.requested_options == {"model_name": "m", "enable_bf16": True}
    assert rec.effective_options == {"model_name": "effective", "enable_bf16": "accepted, no effect"}
    assert rec.graph_name == "m_inference_0"


@pytest.fixture
def cummax_unsupported():
    """aten::cummax (a host call otherwise) marked unsupported: a compile that fails."""
    trn_notebook.set_op_category("cummax", "unsupported", "not in this release")
    try:
        yield
    finally:
        trn_notebook.device.policy.clear("cummax")


def uses_no_lowering(x):
    return torch.cummax(x, 0)[0] + 1  # no lowering while the policy marks aten::cummax unsupported


def test_compile_failure_raises_by_default_naming_the_op_and_the_way_out(cummax_unsupported):
    with pytest.raises(Exception, match=r"aten::cummax is not supported.*not in this release.*fallback_execution"):
        trn_notebook.compile(uses_no_lowering)(torch.arange(1.0, 5.0))
    (rec,) = compile_log.snapshot()
    assert "cummax" in rec.error and rec.cache_result == "miss"


@pytest.mark.parametrize("how", ["option", "env"])
def test_fallback_execution_runs_the_graph_eagerly_with_a_warning(how, cummax_unsupported):
    x = torch.arange(1.0, 5.0)
    if how == "option":
        compiled = trn_notebook.compile(uses_no_lowering, options={"fallback_execution": True})
        ctx = override()
    else:
        compiled = trn_notebook.compile(uses_no_lowering)
        ctx = override(disable_fallback_execution=False)  # TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0
    with ctx, pytest.warns(NeuronCompileFallbackWarning, match="running it eagerly"):
        out = compiled(x)
    torch.testing.assert_close(out, uses_no_lowering(x))
    (rec,) = compile_log.snapshot()
    assert rec.fallback is True
    with warnings.catch_warnings():
        warnings.simplefilter("error", NeuronCompileFallbackWarning)
        torch.testing.assert_close(compiled(x), uses_no_lowering(x))  # no second warning, no recompile


def test_environment_variables_are_read_into_the_config():
    from trn_notebook.compiler.config import CompilerConfig

    cfg = CompilerConfig.from_env(
        {
            "TORCH_NEURONX_NEFF_CACHE_DIR": "/tmp/x",
            "TORCH_NEURONX_DISABLE_NEFF_CACHE": "1",
            "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION": "0",
            "TORCH_NEURONX_DEBUG_DIR": "/tmp/d",
            "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS": "1",
        }
    )
    assert (cfg.cache_dir, cfg.disable_cache, cfg.disable_fallback_execution) == ("/tmp/x", True, False)
    assert (cfg.debug_dir, cfg.preserve_artifacts) == ("/tmp/d", True)
    assert CompilerConfig.from_env({}).disable_fallback_execution is True
