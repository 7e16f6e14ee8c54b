"""Bounds and bad input: host memory, environment variables, bucket specs, tuner and widget input, report.

Catalogue (issue 14):
* the simulated HBM never outgrows the host: a simulated OOM comes first (Medium 4);
* a bad ``TRN_NOTEBOOK_*`` value warns naming variable, value and accepted forms and never
  breaks ``import torch`` (Medium 5);
* bucket specs and tuner inputs are bounded, with the limit in the error (Medium 6);
* ``report(model, x)`` copies a model already on the device at most once and says when a stage
  could not run for memory (Medium 9);
* a bucket policy leaves dynamo's recompile limit alone (Low 12); hostile widget values are
  errors in the view (Low 15); ``report(runs=0)``, bad ``set_op_category`` names (Low 16);
  negative dimensions, quantize and ``to_mkldnn`` (Low 17); Markdown escaping (Low 18).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import trn_notebook
from trn_notebook.compiler.buckets import MAX_BUCKET_SIZE, MAX_BUCKETS, BucketPolicy, bucketed
from trn_notebook.compiler.tuner import suggest_policy
from trn_notebook.device.config import ConfigWarning, DeviceConfig
from trn_notebook.device.memory import hostmem
from trn_notebook.device.memory.runtime import allocator

MiB = 1 << 20
GiB = 1 << 30


# -- Medium 4: host memory -------------------------------------------------------------------------------


def test_the_device_refuses_before_the_host_runs_out(fresh_device, monkeypatch):
    """A 1.5 GiB host (a container limit) and eight 512 MiB tensors: a simulated OOM, not a killed kernel."""
    start = allocator.counters.active
    monkeypatch.setattr(hostmem.guard, "probe", lambda: int(1.5 * GiB) - (allocator.counters.active - start))
    monkeypatch.setattr(hostmem.guard, "_at", -1.0)
    kept = []
    with pytest.raises(torch.OutOfMemoryError, match="host memory backing the simulator") as info:
        for _ in range(8):
            kept.append(torch.empty(512 * MiB // 4, device="neuron"))
    assert len(kept) == 2  # 1.5 GiB minus the 512 MiB kept for the notebook holds two
    assert info.value.asked == 512 * MiB and info.value.capacity == allocator.capacity
    del kept
    assert torch.ones(3, device="neuron").sum().item() == 3.0  # the session goes on


def test_the_device_card_says_the_simulated_hbm_is_host_memory(fresh_device):
    from trn_notebook.session.device import device_card

    torch.set_default_device("neuron")
    rows = dict(device_card().fields)
    assert "refused (simulated OOM) while 512.00 MiB are still free" in rows["host memory"]


# -- Medium 5: environment variables --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"), [("4G", 4 * GiB), ("512MiB", 512 * MiB), ("4194304", 4 * MiB), (" 2 gib ", 2 * GiB)]
)
def test_hbm_bytes_accepts_plain_and_unit_sizes(value, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DeviceConfig.from_env({"TRN_NOTEBOOK_HBM_BYTES": value}).hbm_bytes == expected


@pytest.mark.parametrize("value", ["-1", "0", "4X", "lots", "9" * 30])
def test_a_bad_hbm_bytes_warns_with_variable_value_and_forms_and_uses_the_default(value):
    with pytest.warns(ConfigWarning, match=r"TRN_NOTEBOOK_HBM_BYTES=.*is not valid; accepted: .*24G"):
        assert DeviceConfig.from_env({"TRN_NOTEBOOK_HBM_BYTES": value}).hbm_bytes is None


def test_a_bad_chip_warns_with_the_valid_chips():
    with pytest.warns(ConfigWarning, match=r"TRN_NOTEBOOK_CHIP='trn9' is not valid; accepted: trn1, trn1n, trn2, trn3"):
        assert DeviceConfig.from_env({"TRN_NOTEBOOK_CHIP": "trn9"}).chip == "trn2"
    assert DeviceConfig.from_env({"TRN_NOTEBOOK_CHIP": "Trainium3"}).chip == "trn3"


def test_bad_settings_never_break_import_torch():
    env = dict(os.environ, TRN_NOTEBOOK_HBM_BYTES="-1", TRN_NOTEBOOK_CHIP="trn9", PYTHONPATH=os.getcwd())
    code = "import torch; print(torch.ones(2, device='neuron').sum().item(), torch.neuron.get_device_name())"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[0] == "2.0"
    assert "TRN_NOTEBOOK_HBM_BYTES='-1'" in proc.stderr and "TRN_NOTEBOOK_CHIP='trn9'" in proc.stderr
    assert "Failed to load the backend extension" not in proc.stderr


# -- Medium 6: bounds ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("step:1:1-1000000", f"makes 1000000 buckets, above the limit of {MAX_BUCKETS}"),
        ("step:1:1-100000000", f"above the limit of {MAX_BUCKET_SIZE}"),
        (f"step:1:1-{10**12}", f"above the limit of {MAX_BUCKET_SIZE}"),
        (f"pow2:1-{10**12}", f"above the limit of {MAX_BUCKET_SIZE}"),
        ("list:" + ",".join(str(i) for i in range(1, 5000)), f"above the limit of {MAX_BUCKETS}"),
        ("list:" + "1" * 40_000, "too long"),
        ("list:" + "1" * 5000, "cannot parse bucket policy"),
    ],
)
def test_bucket_specs_are_bounded_with_the_limit_in_the_error(spec, match):
    with pytest.raises(ValueError, match=match):
        BucketPolicy.parse(spec)


def test_the_magic_reports_a_bucket_limit_as_a_usage_error(fresh_compiler):
    from IPython.core.error import UsageError
    from IPython.testing.globalipapp import get_ipython

    shell = get_ipython()
    shell.run_line_magic("load_ext", "trn_notebook")
    with pytest.raises(UsageError, match=f"limit of {MAX_BUCKETS}"):
        shell.run_cell_magic("trn", "compile --buckets step:1:1-1000000", "y_bounds = 1")
    assert "y_bounds" not in shell.user_ns


def test_suggest_policy_is_bounded_in_budget_and_work():
    with pytest.raises(ValueError, match=f"from 1 to {MAX_BUCKETS}"):
        suggest_policy([5, 9], 10**7)
    lengths = np.arange(1, 200_001)  # 200k distinct lengths: coarsened to at most ~512 before the DP
    policy = suggest_policy(lengths, MAX_BUCKETS)
    assert len(policy.buckets()) <= MAX_BUCKETS and policy.buckets()[-1] >= 200_000


def test_the_tuner_widget_reports_huge_browser_values_as_an_error(fresh_compiler):
    from trn_notebook.widgets.tuner import ShapeTuner

    view = ShapeTuner(lengths=[3, 5, 9])
    before = view.policy
    view._handle_msg(
        {
            "content": {"data": {"method": "update", "state": {"kind": "step", "count": 10**7, "max_len": 10**7}}},
            "buffers": [],
        }
    )
    assert f"limit of {MAX_BUCKETS}" in view.error
    assert not view.valid and not view.can_apply and view.policy in ("", before)  # nothing huge can be applied


# -- Medium 9 and Low 16, 18: the migration report -------------------------------------------------------------


class _Wide(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(512, 512) for _ in range(8)])  # 8 MiB of weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def test_report_of_a_model_on_the_device_needs_no_second_device_copy(fresh_device):
    from trn_notebook.migration import report

    torch.manual_seed(0)
    model = _Wide().to("neuron")
    x = torch.randn(4, 512)
    torch.neuron.empty_cache()
    allocator.capacity = allocator.counters.reserved + 6 * MiB  # room for activations, not for a copy
    rep = report(model, x, runs=2)
    numerics = rep.rows()[1][1]
    assert "FP32 check within tolerance" in numerics, numerics  # measured on the user's device model, no copy
    assert all(p.device.type == "neuron" for p in model.parameters()) and model.training


def test_report_says_when_a_stage_could_not_run_for_memory(fresh_device):
    from trn_notebook.migration import report

    model = _Wide()
    gc.collect()  # tensors of earlier tests held in cycles would leave free room inside live segments
    torch.neuron.empty_cache()
    allocator.capacity = allocator.counters.reserved + 2 * MiB  # the model cannot even move there
    rep = report(model, torch.randn(4, 512), runs=2)
    assert "could not run: out of device memory" in rep.rows()[1][1]
    assert "could not run: out of device memory" in rep.rows()[3][1]


def test_report_refuses_zero_runs(fresh_device):
    from trn_notebook.migration import report

    with pytest.raises(ValueError, match="runs must be a positive integer"):
        report(nn.Linear(2, 2), torch.randn(1, 2), runs=0)


def test_markdown_report_escapes_model_names(fresh_device):
    from trn_notebook.migration import report

    hostile = type("<img src=x onerror=alert(1)>|*_[link](javascript:x)", (nn.Linear,), {})
    md = report(hostile(2, 2), torch.randn(1, 2), runs=1).to_markdown()
    assert "<img" not in md and "&lt;img src=x onerror=alert\\(1\\)&gt;" in md
    assert "\\[link\\]\\(javascript:x\\)" in md and "\\|\\*\\_" in md
    assert md.count("\n|") == 8  # no row was split by a pipe in a name


def test_set_op_category_rejects_unknown_names_and_non_strings():
    with pytest.raises(ValueError, match="'sortt' is not an ATen op; did you mean sort"):
        trn_notebook.set_op_category("sortt", "cpu_fallback")
    with pytest.raises(TypeError, match="op name must be a string"):
        trn_notebook.set_op_category(3, "cpu_fallback")  # type: ignore[arg-type]


# -- Low 12: recompile limit ------------------------------------------------------------------------------------


def test_a_bucket_policy_leaves_dynamos_recompile_limit_alone(fresh_compiler):
    limit = torch._dynamo.config.recompile_limit
    runner = bucketed(lambda input_ids: input_ids + 1, dims={"input_ids": 0}, policy="step:1:1-12")
    runner.policy = "list:8,200"
    for n in (3, 5):  # two signatures, one bucket
        assert runner(torch.zeros(n)).tolist() == [1.0] * n
    assert torch._dynamo.config.recompile_limit == limit  # raised inside the call only
    from trn_notebook.session import views

    title = views.shapes(runner.name).parts()[0].title
    assert "2 input shapes seen → 1 graph" in title


# -- Low 15: widget input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1.0, 1e9])
def test_memory_widget_rejects_a_hostile_interval_and_keeps_its_own(fresh_device, value):
    from trn_notebook.widgets.memory import MemoryView, _interval_of

    view = MemoryView()
    view._handle_msg({"content": {"data": {"method": "update", "state": {"interval_s": value}}}, "buffers": []})
    assert "interval_s must be a number of seconds" in view.error
    assert view.interval_s == 0.2
    import weakref

    assert _interval_of(weakref.ref(view)) == 0.2


# -- Low 17: errors PyTorch users know --------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(-1,), (2, -3)])
def test_negative_dimensions_give_pytorchs_own_error(fresh_device, size):
    with pytest.raises(RuntimeError) as cpu:
        torch.empty(size)
    with pytest.raises(RuntimeError) as dev:
        torch.empty(size, device="neuron")
    assert str(dev.value) == str(cpu.value)


def test_quantize_and_to_mkldnn_say_what_to_do(fresh_device):
    x = torch.randn(4, device="neuron")
    with pytest.raises(NotImplementedError, match=r"no quantized tensors.*quantize_per_tensor\(x.cpu\(\)"):
        torch.quantize_per_tensor(x, 0.1, 0, torch.quint8)
    with pytest.raises(NotImplementedError, match=r"no MKL-DNN.*x.cpu\(\).to_mkldnn\(\)"):
        x.to_mkldnn()
    assert (x + 1).device.type == "neuron"
