"""%trn numerics and the migration report's "is the result acceptable?" row read the three-way comparison."""

from __future__ import annotations

import pytest
import torch
from IPython.core.error import UsageError

import trn_notebook
from trn_notebook.device.numerics.policy import SOURCED
from trn_notebook.magics import render
from trn_notebook.migration import report
from trn_notebook.numerics_compare import NumericsComparison, last_comparison

from .models import sensitive_mlp


@pytest.fixture(scope="module")
def ip():
    from IPython.testing import globalipapp

    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "trn_notebook")
    yield shell
    shell.run_line_magic("unload_ext", "trn_notebook")


def test_magic_runs_the_comparison_on_names_of_the_notebook(ip, fresh_device):
    torch.manual_seed(1)
    ip.user_ns.update(net=sensitive_mlp(), batch={"x": torch.randn(2, 16)})
    ip.user_ns["inputs"] = (torch.randn(2, 16),)
    render.prefer_widgets = False
    try:
        out = ip.run_line_magic("trn", "numerics net inputs --numerics exact")
    finally:
        render.prefer_widgets = True
    assert isinstance(out, NumericsComparison) and out.mode == "exact" and last_comparison() is out
    view = ip.run_line_magic("trn", "numerics net inputs --threshold 2")
    assert type(view).__name__ == "NumericsView" and view.threshold == 2.0
    with pytest.raises(UsageError, match="'nope' is not a name in the notebook"):
        ip.run_line_magic("trn", "numerics nope inputs")
    with pytest.raises(UsageError, match="is not a name"):
        ip.run_line_magic("trn", "numerics __import__('os') inputs")  # never evaluated
    with pytest.raises(UsageError, match=r"(?s)numerics mode='fast' is not valid.*correct form"):
        ip.run_line_magic("trn", "numerics net inputs --numerics fast")
    with pytest.raises(UsageError, match="threshold"):
        ip.run_line_magic("trn", "numerics net inputs --threshold -1")


@pytest.mark.slow  # the report's latency runs and first device use: ~6 s at load 6
def test_report_never_passes_on_exact_numerics(fresh_device):
    torch.manual_seed(1)
    rep = report(sensitive_mlp(), torch.randn(2, 16), runs=1)
    row = rep.rows()[1][1]
    assert row.startswith("NOT JUDGED on exact numerics") and "run under trainium" in row, row
    assert "numerics mode: exact" in row and "assumed: exact mode" in row and "FP32 check within tolerance" in row


def test_report_uses_the_sessions_trainium_comparison_and_states_sourced_and_assumed(fresh_device):
    torch.manual_seed(1)
    x = torch.randn(2, 16)
    trn_notebook.compare_numerics(sensitive_mlp(), x, numerics={"mode": "trainium", "autocast": "none"})
    row = report().rows()[1][1]
    assert row.startswith("PASS (the session's last compare_numerics)"), row
    assert (
        "numerics mode: trainium (auto-cast none" in row and f"sourced ({len(SOURCED)}):" in row and "assumed:" in row
    )
    assert "TensorE/PSUM accumulate in FP32" in row and "not published" in row
    trn_notebook.compare_numerics(sensitive_mlp(), x, numerics={"mode": "trainium", "autocast": "matmult"})
    row = report().rows()[1][1]
    assert row.startswith("FAIL (the session's last compare_numerics): FAIL: first module over 1.5: 2"), row
    trn_notebook.reset()
    assert "three-way comparison (CPU FP32 / CPU BF16 / neuron): not measured" in report().rows()[1][1]
