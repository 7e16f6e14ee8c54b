"""The migration evidence report: every row present, measured values, missing evidence said to be missing."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trn_notebook.migration import MigrationReport, report
from trn_notebook.migration.evidence import NOT_MEASURED


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))


def test_report_for_a_small_model_has_every_row_with_measured_values(fresh_device, tmp_path):
    rep = report(_model(), torch.randn(4, 8), batch=4, runs=3)
    rows = rep.rows()
    assert [q for q, _, _ in rows] == [q for q, _, _ in MigrationReport.QUESTIONS]
    run, numerics, placement, speed, _startup, maintain = (a for _, a, _ in rows)
    assert "torch 2.13.0" in run and "forward completed on neuron" in run
    assert numerics.startswith("NOT JUDGED on exact numerics") and "proves plumbing only" in numerics, numerics
    assert "atol=0.0001" in numerics and "bf16" in numerics and "FP32 check within tolerance" in numerics
    assert "native" in placement and "(Y: Native)" in placement  # our category, then AWS's published class
    assert "batch 4" in speed and "modeled device time" in speed and "synchronised" in speed
    assert "torch==2.13.0" in maintain
    md = rep.to_markdown()
    assert md.count("\n|") == 8  # header, rule and six rows
    path = rep.save(tmp_path / "report.md")
    assert path.read_text() == md


def test_report_without_a_compiled_run_says_so_in_the_cold_warm_row(fresh_device):
    from trn_notebook.compiler import compile_log

    compile_log.reset()
    rep = report()
    startup = rep.rows()[4][1]
    assert NOT_MEASURED in startup and "no compiled run" in startup
    assert NOT_MEASURED in rep.rows()[1][1]  # no model: no numerical check, said plainly


def test_report_html_escapes_user_text(fresh_device):
    import trn_notebook

    trn_notebook.device.policy.set("<script>alert(1)</script>", "cpu_fallback")
    try:
        html = report()._repr_html_()
    finally:
        trn_notebook.device.policy.clear("<script>alert(1)</script>")
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_maintain_row_lists_the_custom_kernels_that_ran(fresh_device):
    from trn_notebook.nki import nki_op
    from trn_notebook.nki.kernels import softmax_kernel

    assert "none ran on neuron" in report().rows()[5][1]  # nothing ran yet: said, never "the simulator has none"
    softmax = nki_op("reporttest::softmax")(softmax_kernel)
    x = torch.randn(128, 64)
    torch.testing.assert_close(softmax(x.to("neuron")).cpu(), torch.softmax(x, -1), rtol=1e-5, atol=1e-5)
    maintain = report().rows()[5][1]
    assert "reporttest::softmax (1 eager call)" in maintain and "none ran" not in maintain


def test_maintain_row_lists_a_kernel_that_ran_only_inside_a_compiled_graph(fresh_compiler):
    from trn_notebook.nki import nki_op
    from trn_notebook.nki.kernels import softmax_kernel

    softmax = nki_op("reporttest::softmax_compiled")(softmax_kernel)
    compiled = torch.compile(lambda t: softmax(t * 2.0), backend="neuron", fullgraph=True)
    x = torch.randn(128, 64)
    for _ in range(2):
        torch.testing.assert_close(compiled(x.to("neuron")).cpu(), torch.softmax(2.0 * x, -1), rtol=1e-5, atol=1e-5)
    maintain = report().rows()[5][1]
    assert "reporttest::softmax_compiled (in 1 compiled graph, 2 runs)" in maintain, maintain
    assert "eager call" not in maintain  # it never ran outside the graph


def test_startup_row_on_a_warm_cache_says_no_cold_compile_happened(fresh_compiler):
    from trn_notebook.compiler import backend, compile_log

    model, x = _model().to("neuron"), torch.randn(4, 8).to("neuron")
    torch.compile(model, backend="neuron")(x)
    assert "1 miss" in report().rows()[4][1] and "no cold compile" not in report().rows()[4][1]
    torch._dynamo.reset()
    backend.clear_memory_cache()  # a new kernel: only the disk cache is left
    compile_log.reset()
    torch.compile(model, backend="neuron")(x)
    startup = report().rows()[4][1]
    assert "0 miss, 1 disk hit" in startup, startup
    assert "no cold compile in this session" in startup and "cold compile 0.000 s" not in startup


def test_trn_report_reads_the_session_at_render_time_not_when_the_model_was_measured(fresh_compiler):
    from trn_notebook import session

    model = _model()
    report(model, torch.randn(4, 8), runs=1)
    assert "no compiled run" in session.report().rows()[4][1]
    dev = model.to("neuron")
    torch.compile(dev, backend="neuron")(torch.randn(4, 8).to("neuron"))
    with pytest.warns(UserWarning, match="linalg_qr' fell back to CPU"):  # documented fallback, after the report
        torch.linalg.qr(torch.randn(4, 4).to("neuron"))
    rows = session.report().rows()
    assert "1 miss" in rows[4][1], rows[4][1]
    assert "linalg_qr" in rows[2][1], rows[2][1]
    assert "FP32 check within tolerance" in rows[1][1]  # the model's numerics, measured by the report call, are kept
    assert rows[1][1].startswith("NOT JUDGED")  # the report's three-way, in exact mode: plumbing only


def test_each_view_escapes_for_its_own_format_and_the_text_view_not_at_all(fresh_device):
    # Issue 34 item 8: str(report) showed `torch 2.13.0\+cpu`, `trn\_notebook`, `torch&gt;=2.13,&lt;2.15`.
    import trn_notebook

    trn_notebook.device.policy.set("<b>x_y</b>", "cpu_fallback")
    try:
        rep = report()
        text, md, html = str(rep), rep.to_markdown(), rep._repr_html_()
    finally:
        trn_notebook.device.policy.clear("<b>x_y</b>")
    assert text == rep.text() and repr(rep) == text
    for plain in (f"torch {torch.__version__}", "trn_notebook simulator", "torch>=2.13,<2.15", "<b>x_y</b>"):
        assert plain in text, plain
    assert "\\" not in text and "&lt;" not in text and "&gt;" not in text
    assert "1. Does the model run?" in text and "Common ambiguity: Hiding compilation" in text
    assert torch.__version__.replace("+", "\\+") in md and "trn\\_notebook" in md and "&lt;b&gt;x\\_y" in md
    assert "<b>x_y</b>" not in md and "<b>x_y</b>" not in html and "&lt;b&gt;x_y&lt;/b&gt;" in html
    assert "torch&gt;=2.13,&lt;2.15" in html and "\\+" not in html


def test_markdown_view_carries_the_notes_the_other_views_show(fresh_device):
    rep = MigrationReport(report().evidence, notes=["check <this> before_shipping"])
    md, text, html = rep.to_markdown(), rep.text(), rep._repr_html_()
    assert "note: check <this> before_shipping" in text
    assert "Note: check &lt;this&gt; before\\_shipping" in md and "<this>" not in md
    assert "check &lt;this&gt; before_shipping" in html
