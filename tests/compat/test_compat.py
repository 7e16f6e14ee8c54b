"""The compatibility sweep and table (the device regressions it found are in tests/device/test_regressions.py)."""

from __future__ import annotations

import pytest
import torch

import trn_notebook


def _neuron(t: torch.Tensor) -> torch.Tensor:
    return t.to("neuron")


# -- the sweep and the table ------------------------------------------------------------------------


def test_sweep_of_an_op_counts_every_dtype_and_backward() -> None:
    from trn_notebook.compat.sweep import run_op

    result = run_op("add", quick=True)
    assert set(result.forward) == {"float32", "bfloat16", "int32", "bool"}
    assert all(t.passed == t.total == 2 for t in result.forward.values())
    assert result.backward is not None and result.backward.passed == result.backward.total == 2
    assert result.aten_ops["add"] == "native"


def test_table_reports_an_unsupported_op_with_its_error() -> None:
    from trn_notebook.compat import results_frame
    from trn_notebook.compat.sweep import run_op
    from trn_notebook.device import policy

    trn_notebook.set_op_category("cumsum", "unsupported")
    try:
        row = results_frame([run_op("cumsum", quick=True)]).iloc[0]
    finally:
        policy.clear("cumsum")
    assert row["category"] == "unsupported" and row["class"] == "N"
    assert row["forward"] == "fail"
    assert row["dtypes_passing"] == ""
    assert "aten::cumsum is not supported on the neuron device" in row["first_error"]


def test_float64_by_design_failures_are_named_and_confined_float64_passes() -> None:
    from trn_notebook.compat.sweep import run_op
    from trn_notebook.compat.table import reason_of

    double = run_op("double", quick=True).forward["float32"]
    assert double.passed == 0
    assert reason_of(double.first_error) == "float64/complex128 created on the device (rejected by design)"
    to = run_op("to").forward["float32"]  # x.to("cpu", torch.float64) passes with float64 kept on the CPU
    assert 0 < to.passed < to.total


def test_summary_and_markdown_carry_the_figures() -> None:
    from trn_notebook.compat import summarize, to_markdown
    from trn_notebook.compat.sweep import run_op

    results = [run_op("mul", quick=True), run_op("double", quick=True)]
    s = summarize(results)
    assert (s.forward_passed, s.forward_total, s.crashes) == (2, 4, 0)
    assert s.reasons[0][0].startswith("double: float64")
    md = to_markdown(results)
    assert "forward float32 samples passing: **2/4 (50.00%)**" in md
    assert "| `mul` | native | Y: Native | float32, bfloat16, int32, bool |" in md
    assert "`CPU_FALLBACK (dtypes)`" in md and "torch_api_compatibility.md" in md


def test_class_names_the_dtypes_a_fallback_affects_in_aws_words() -> None:
    """A fallback op's class names its dtypes as AWS's table does: all of them for an op placed on the CPU, only
    those outside the native set for a native op (every swept dtype is native, so none is named)."""
    from trn_notebook.compat.sweep import OpResult, Tally
    from trn_notebook.compat.table import class_of

    whole = OpResult("linalg.det", "linalg_det")
    assert class_of(whole, "cpu_fallback") == "CPU_FALLBACK (all dtypes)"
    assert class_of(whole, "host_only") == "Y: Host-only"
    partial = OpResult("add", "add")
    partial.forward.update({"float32": Tally(), "bfloat16": Tally(), "bool": Tally()})
    assert class_of(partial, "cpu_fallback") == "CPU_FALLBACK (dtypes outside its native set)"
    assert class_of(partial, "native") == "Y: Native" and class_of(partial, "unsupported") == "N"


def test_unknown_op_pattern_is_a_clear_error() -> None:
    from trn_notebook.compat import compatibility_table

    with pytest.raises(ValueError, match="no OpInfo entry matches 'no_such_op'"):
        compatibility_table("no_such_op")


@pytest.mark.slow
def test_compatibility_table_runs_isolated_and_flags_a_dying_worker() -> None:
    from trn_notebook.compat import compatibility_table
    from trn_notebook.compat.isolate import run_isolated

    df = compatibility_table("eye,logical_not", quick=True)
    assert set(df["op"]) == {"eye", "logical_not"}
    assert set(df["forward"]) == {"pass"}
    assert {"op", "category", "dtypes_passing", "dtypes_failing", "first_error", "forward", "backward"} <= set(df)
    dead = run_isolated(["abs", "__no_such_op__"], quick=True)  # the worker dies on the unknown name
    assert dead[0].crashed == "" and dead[0].forward["float32"].passed == 1
    assert "exit status 1" in dead[1].crashed


@pytest.mark.slow
def test_quick_sweep_has_no_failures_and_no_crashes() -> None:
    from trn_notebook.compat import summarize
    from trn_notebook.compat.api import sweep

    s = summarize(sweep(quick=True, isolated=False))
    assert s.crashes == 0
    assert s.forward_rate == 1.0, s.reasons
    assert s.backward_rate >= 0.95
