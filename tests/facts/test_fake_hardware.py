"""Under a stand-in torch_neuronx, api.py and the report read TorchNeuron's answers and say "n/a" elsewhere.

Also the first direction of the compiler stand-down: the real package's `neuron` entry point is found first.
"""

from __future__ import annotations

import html

import pytest

from .fakehw import run

PROBE = r"""
import torch, trn_notebook
from trn_notebook import facts
from trn_notebook.facts import SimulatorOnlyError

b = facts.current()
assert type(b).__name__ == "TorchNeuronBackend" and not b.is_simulator, b
print("DESCRIBE", facts.describe())
assert trn_notebook.get_executed_ops() == {"aten::_linalg_svd": 1, "aten::add.Tensor": 2, "aten::mm": 4}
assert trn_notebook.get_fallback_ops() == ["aten::_linalg_svd"]
table = trn_notebook.op_table()
assert set(table["category"]) == {"native", "cpu_fallback"} and set(table["device_ms"]) == {"not measured"}, table
summary = trn_notebook.placement_summary()
assert summary["calls"] == {"native": 6, "cpu_fallback": 1} and summary["device_s"] == "not measured", summary
assert b.memory_stats()["allocated_bytes.all.current"] == 3 << 20
assert b.device_properties()["name"] == "Trainium2 (fake)" and b.device_properties()["simulated"] is False
print("CACHE", b.cache_dir())

errors = []
for call in (
    lambda: trn_notebook.set_chip("trn3"),
    lambda: trn_notebook.set_memory_capacity(1 << 30),
    lambda: trn_notebook.set_op_category("sort", "cpu_fallback"),
    lambda: trn_notebook.phase("load").__enter__(),
    lambda: trn_notebook.save_trace("t.json"),
    lambda: trn_notebook.memory_timeline(),
):
    try:
        call()
    except SimulatorOnlyError as exc:
        errors.append(str(exc))
assert len(errors) == 6, errors
print("ERROR", errors[0])

import torch_neuronx
from torch._dynamo.backends.registry import lookup_backend
from trn_notebook.compiler.backend import neuron_backend

torch.compile(lambda x: x.sin() + 1, backend="neuron")(torch.randn(3))
assert len(torch_neuronx.compiled_graphs) == 1  # `neuron` is TorchNeuron's compiler (its entry point found first)
assert lookup_backend("neuron_sim") is neuron_backend  # ours stays reachable
records = b.compile_records()
assert len(records) == 1 and records[0].compile_s == 1.00003, records
md = trn_notebook.report().to_markdown()
print("REPORT", md)
trn_notebook.clear_op_tracking()
assert trn_notebook.get_executed_ops() == {} and trn_notebook.placement_summary()["calls"] == {"native": 0, "cpu_fallback": 0}
"""


@pytest.mark.slow
def test_api_and_report_under_fake_torchneuron(tmp_path):
    out = run(PROBE, tmp_path, fake=True)
    assert "DESCRIBE live backend: TorchNeuron (torch_neuronx 2.14.0+fake)" in out
    assert f"CACHE {tmp_path / 'neff'}" in out
    assert "ERROR trn_notebook.set_chip is simulator-only" in out and "the instance decides the chip" in out
    report = html.unescape(out.split("REPORT", 1)[1]).replace("\\", "")  # the Markdown is escaped
    assert "TorchNeuron (torch_neuronx 2.14.0+fake) on Trainium hardware" in report
    assert "device Trainium2 (fake)" in report
    assert "cpu_fallback 1 (CPU_FALLBACK), native 6 (Y: Native)" in report
    assert "aten::_linalg_svd ×1 (n/a moved; CPU_FALLBACK (all dtypes)) at n/a" in report
    assert "1 graph (cache hits n/a" in report and "cold compile 1.000 s" in report
    assert "op policy overrides: n/a" in report
    assert "simulator" not in report.split("| Common ambiguity |", 1)[1].lower()  # no simulator claim on hardware
