"""The placement log and op policy: categories, counts, costs, source lines, warnings, strict mode."""

from __future__ import annotations

import warnings

import pytest
import torch

import trn_notebook
from trn_notebook.device import NeuronFallbackWarning, override, placement_log

N = "neuron"


def test_known_snippet_gives_known_placement_counts(fresh_device):
    x = torch.ones(4, 4, device=N)  # empty + fill_
    y = x @ x  # mm
    z = y.t()  # host-only view... (t runs in C++; as_strided may not reach us)
    q, _ = torch.linalg.qr(torch.eye(4).to(N))  # documented linear-algebra fallback
    snap = placement_log.snapshot()
    assert snap["mm"].category == "native" and snap["mm"].calls == 1
    assert snap["fill_"].category == "native"
    assert snap["linalg_qr"].category == "cpu_fallback"
    assert snap["linalg_qr"].d2h > 0  # bytes device->host
    assert snap["linalg_qr"].h2d > 0  # bytes host->device
    assert snap["mm"].device_s > 0  # modeled device time
    assert "aten::linalg_qr" in trn_notebook.get_fallback_ops()
    assert trn_notebook.get_executed_ops()["aten::mm"] == 1
    summary = trn_notebook.placement_summary()
    assert summary["calls"]["cpu_fallback"] >= 1 and summary["calls"]["native"] >= 2
    del z, q


def test_source_line_points_at_the_user_code(fresh_device):
    x = torch.ones(3, device=N)
    x.exp()  # the line recorded for aten::exp
    source = placement_log.snapshot()["exp"].source
    assert source.endswith(f"test_placement.py:{_line_of('x.exp()  # the line')}")


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if marker in line and "_line_of" not in line:
                return i
    raise AssertionError(marker)


def test_fallback_warns_once_per_op(fresh_device):
    from trn_notebook.device.eager import dispatch

    dispatch._warned.discard("linalg_inv_ex")
    a = (torch.eye(3) * 2).to(N)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.linalg.inv(a)
        torch.linalg.inv(a)
    msgs = [str(w.message) for w in caught if issubclass(w.category, NeuronFallbackWarning)]
    assert msgs == ["Operator 'aten::linalg_inv_ex' fell back to CPU"]


def test_strict_mode_turns_a_fallback_into_an_error(fresh_device):
    a = torch.eye(3).to(N)
    with override(strict=True), pytest.raises(RuntimeError, match="linalg_inv_ex.*strict"):
        torch.linalg.inv(a)
    torch.testing.assert_close(torch.linalg.inv(a).cpu(), torch.eye(3))


def test_policy_is_data_overridable_and_exportable(fresh_device):
    table = trn_notebook.device.policy_table()
    assert table.loc["linalg_qr", "category"] == "cpu_fallback"
    assert table.loc["mm", "category"] == "native"
    trn_notebook.set_op_category("exp", "cpu_fallback", "testing an override")
    try:
        torch.ones(2, device=N).exp()
        assert placement_log.snapshot()["exp"].category == "cpu_fallback"
        assert trn_notebook.device.policy_table().loc["exp", "source"] == "override"
    finally:
        trn_notebook.device.policy.clear("exp")
    with pytest.raises(ValueError, match="valid: native"):
        trn_notebook.set_op_category("exp", "gpu")


def test_fallback_only_for_unimplemented_refuses_dtype_fallbacks(fresh_device):
    c = torch.ones(2, dtype=torch.complex64).to(N)
    (c + c).cpu()  # complex64 has no native kernel: falls back by default
    assert placement_log.snapshot()["add"].category == "cpu_fallback"
    with override(fallback_only_for_unimplemented=True), pytest.raises(RuntimeError, match="native kernel but not"):
        c + c


def test_op_table_is_a_dataframe_sorted_by_device_time(fresh_device):
    x = torch.randn(64, 64).to(N)
    (x @ x).relu()
    df = trn_notebook.op_table()
    assert list(df.columns[:3]) == ["op", "category", "calls"]
    assert df.iloc[0]["op"] == "mm"
    assert df["device_ms"].is_monotonic_decreasing


def test_the_op_table_and_the_policy_table_carry_the_class_aws_publishes(fresh_device):
    # Issue 56 item 4: AWS's words (Y: Native / Host-only / Needs a process group, CPU_FALLBACK (dtypes), N).
    from trn_notebook.device.ops.policy import policy_table
    from trn_notebook.device.ops.registry import aws_class

    x = torch.ones(4, device="neuron")
    (x + 1).sort()
    x.view(2, 2)
    table = trn_notebook.op_table().set_index("op")
    assert table.loc["add", "class"] == "Y: Native"
    assert table.loc["sort", "class"] == "CPU_FALLBACK (all dtypes)"
    assert table.loc["view", "class"] == "Y: Host-only"
    policy = policy_table()
    assert set(policy["class"]) <= {"Y: Native", "Y: Host-only", "CPU_FALLBACK (all dtypes)", "N"}
    assert (policy["category"] == "unsupported").sum() == (policy["class"] == "N").sum()
    assert aws_class("c10d::allreduce_", "native") == "Y: Needs a process group"
    assert aws_class("zero_", "cpu_fallback", always_falls_back=False) == "CPU_FALLBACK (dtypes outside its native set)"
