"""compare_numerics: three runs per module against CPU PyTorch, the first crossing, escaping, bad input."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch import nn

import trn_notebook
from trn_notebook.numerics_compare import last_comparison

from .models import sensitive_mlp


@pytest.fixture
def x() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(4, 16)


def test_exact_mode_neuron_equals_fp32_and_bf16_differs(fresh_device, x):
    model = sensitive_mlp()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    r = trn_notebook.compare_numerics(model, x, numerics={"mode": "exact"})
    assert isinstance(r.table, pd.DataFrame) and list(r.table["module"]) == ["0", "1", "2", "3", "(model)"]
    assert (r.table["ratio_linf"] == 0).all() and (r.table["ratio_l2"] == 0).all() and (r.table["max_abs"] == 0).all()
    assert (r.table["bf16_max_abs"] > 0).all() and (r.table["cosine"] > 0.999999).all()
    assert r.first is None and r.passed and not r.acceptable  # exact mode never judges precision
    assert "proves plumbing only" in r.verdict() and "proves plumbing only" in r.text()
    assert (
        r.table.loc[r.table["module"] == "2", "source"].item().endswith(f"models.py:{OffsetProjection_forward_line()}")
    )
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # the user's model is unchanged
    assert last_comparison() is r
    assert trn_notebook.numerics_policy().mode == "exact"


def OffsetProjection_forward_line() -> int:
    import inspect

    from .models import OffsetProjection

    return inspect.getsourcelines(OffsetProjection.forward)[1]


@pytest.mark.slow  # DebugMode's first use imports torch.distributed.tensor: ~6 s at load 8
def test_trainium_matmult_first_crossing_is_the_sensitive_module(fresh_device, x):
    before = trn_notebook.numerics_policy()
    r = trn_notebook.compare_numerics(sensitive_mlp(), x, numerics={"mode": "trainium", "autocast": "matmult"})
    assert trn_notebook.numerics_policy() == before  # applied only for the call
    assert r.mode == "trainium" and "matmult" in r.policy.label()
    assert all(math.isfinite(v) for v in r.table["ratio_linf"]) and all(math.isfinite(v) for v in r.table["ratio_l2"])
    assert r.first is not None and r.first.module == "2" and r.first.cls == "OffsetProjection", r.text()
    assert r.first.source.endswith(f"models.py:{OffsetProjection_forward_line()}")
    first_linear = r.table.set_index("module").loc["0"]
    assert 0 < first_linear["ratio_linf"] < 1.5  # bf16 inputs with FP32 accumulation: closer than CPU BF16
    assert r.first_op is not None and "mm" in r.first_op, r.first_op  # DebugMode: the matmul diverges first
    assert not r.passed and r.verdict().startswith("FAIL: first module over 1.5: 2 (OffsetProjection)")


def test_module_names_are_escaped_in_html_and_widget(fresh_device, x):
    from trn_notebook.widgets import NumericsView

    model = nn.Sequential()
    model.add_module("<script>alert(1)</script>", nn.Linear(16, 4))
    r = trn_notebook.compare_numerics(model, x)
    html = r._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    view = NumericsView(r)
    assert "<script>" not in view.fallback_html() and "&lt;script&gt;" in view.fallback_html()
    assert view.points[0][1] == "<script>alert(1)</script>"  # raw in the model: the ESM writes textContent


def test_widget_selects_a_layer_heatmap_and_reports_a_bad_index(fresh_device, x):
    from trn_notebook.widgets import NumericsView

    r = trn_notebook.compare_numerics(sensitive_mlp(), x)
    view = NumericsView(r)
    assert view.threshold == 1.5 and len(view.points) == len(r.rows)
    assert view.selected == len(r.rows) - 1  # no crossing: the model's output
    view.selected = 2
    h = view.heatmap
    assert h["index"] == 2 and h["rows"] * h["cols"] == len(h["values"]) and (h["rows"], h["cols"]) == (4, 32)
    assert h["max"] == 0.0  # exact mode: neuron equals FP32 everywhere
    view.selected = 99
    assert "no module call 99" in view.error


def test_bad_arguments_say_what_to_do_and_change_nothing(fresh_device, x):
    model = sensitive_mlp()
    with pytest.raises(ValueError, match="threshold must be a positive number"):
        trn_notebook.compare_numerics(model, x, threshold=0)
    with pytest.raises(ValueError, match="autocast"):
        trn_notebook.compare_numerics(model, x, numerics={"autocast": "sometimes"})
    with pytest.raises(TypeError, match="unknown knob"):
        trn_notebook.compare_numerics(model, x, numerics={"colour": "red"})
    with pytest.raises(ValueError, match=r"needs a model with \.generate\(\)"):
        trn_notebook.compare_numerics(model, x, generate={"max_new_tokens": 2})
    with pytest.raises(TypeError, match="needs a torch.nn.Module"):
        trn_notebook.compare_numerics(lambda t: t, x)
    assert trn_notebook.numerics_policy().mode == "exact"
    r = trn_notebook.compare_numerics(model, x)  # the session is still usable
    assert r.first is None


@pytest.mark.slow  # one compile: ~4 s at load 6
def test_compiled_output_is_judged_too(fresh_compiler, x):
    r = trn_notebook.compare_numerics(sensitive_mlp(), x, compiled=True)
    assert r.compiled is not None and r.compiled.linf == 0 and r.compiled.passed
    assert "compiled (model output)" in r.text()


@pytest.mark.slow  # a tiny GPT-2 generating 3 tokens three ways, plus the transformers import: ~5 s at load 6
def test_generation_token_and_teacher_forced_logit_agreement(fresh_device):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    r = trn_notebook.compare_numerics(
        model, {"input_ids": torch.randint(0, 64, (1, 5))}, generate={"max_new_tokens": 3}
    )
    g = r.generation
    assert g is not None and g.new_tokens == 3
    assert g.neuron_token_agreement == 1.0 and g.neuron_first_divergence is None  # exact mode: equal to CPU
    assert [t.tier for t in g.neuron_tiers] == ["top-5", "top-50", "top-1000 (= all 64)", "all"]
    assert [t.rtol for t in g.neuron_tiers] == [0.01, 0.02, 0.03, 0.05] and g.passed
    assert all(t.positions == 3 and t.worst == 0 for t in g.neuron_tiers)
    assert max(t.worst for t in g.bf16_tiers) > 0  # CPU BF16's logits differ from FP32's
    assert "onboarding-models.rst" in r.text() and "teacher-forced logits, neuron" in r.text()


def test_an_inplace_op_after_a_module_does_not_change_its_capture(fresh_device, x):
    model = nn.Sequential(nn.Linear(16, 8), nn.ReLU(inplace=True))
    r = trn_notebook.compare_numerics(model, x, numerics={"mode": "exact"})
    assert (r.table["ratio_linf"] == 0).all()
    from trn_notebook.numerics_compare.capture import capture

    calls = capture(model, lambda: model(x)).calls
    captured = {k: c.output for k, c in calls.items()}
    assert (captured["0"] < 0).any() and (captured["1"] >= 0).all()  # the Linear's output before ReLU_ changed it
    assert torch.equal(captured["1"], torch.relu(captured["0"]))
    h = r.heatmaps["0"]
    assert h.max == 0.0 and (h.rows, h.cols) == (4, 8)


def test_the_widget_esm_ships_with_no_network_and_no_innerhtml():
    import re

    from trn_notebook.widgets import NumericsView
    from trn_notebook.widgets._base import STATIC

    text = (STATIC / "_dom.js").read_text() + "\n" + (STATIC / "numerics.js").read_text()
    assert str(NumericsView._esm) == text and "export default { render }" in text
    assert not re.search(r"^\s*import\b", text, re.M) and not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text)
    assert "innerHTML" not in text and "insertAdjacentHTML" not in text
