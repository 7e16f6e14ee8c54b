"""The quickstart notebook runs unchanged in a real kernel under the stand-in torch_neuronx.

Cells tagged ``simulator-only`` (port-check's mark; in the quickstart only the modeled-time print) are left
out, as a notebook moved to a Trn2 would skip them; every other cell runs and its checks pass, on TorchNeuron's
(canned) figures. ``benchmarks/bench_fake_hardware_workshop.py`` runs every workshop notebook the same way.
"""

from __future__ import annotations

import pytest

from .fakehw import run_notebook

pytest.importorskip("nbclient")
pytest.importorskip("nbformat")


@pytest.mark.slow
def test_quickstart_runs_on_the_fake_torchneuron(tmp_path):
    run = run_notebook("01_quickstart.ipynb", tmp_path)
    assert run.skipped == ["c10b"]  # the modeled-time print: "not measured" on hardware
    assert run.ok, f"cell {run.error_cell}: {run.error}"
    texts = run.texts
    device = texts["c01"]
    assert "TorchNeuron (torch_neuronx 2.14.0+fake)" in device and "Trainium2 (fake)" in device
    assert "neuron:0" in texts["c03"]
    assert "(TorchNeuron)" in texts["c09"] and "n/a hits" in texts["c09"]
    summary = texts["c10"]
    assert "{'native': 6, 'cpu_fallback': 1}" in summary and "aten::_linalg_svd" in summary  # canned placement
    assert "memory allocated: 3072.0 KiB" in summary
    assert "quickstart: all checks passed" in texts["c12"]


@pytest.mark.slow
def test_credible_comparison_report_renders_on_the_fake_torchneuron(tmp_path):
    # The one other notebook CI runs this way (benchmarks/bench_fake_hardware_workshop.py runs all twelve): the
    # migration report, built from the API (c04) and by the magic (c06), on TorchNeuron's figures with "n/a" /
    # "not measured" where hardware has no such figure. Its compile (c02) and check cell (c08) are the simulator's.
    run = run_notebook("08_credible_comparison.ipynb", tmp_path)
    assert run.skipped == ["c02", "c08"]
    assert run.ok, f"cell {run.error_cell}: {run.error}"
    assert "TorchNeuron (torch_neuronx 2.14.0+fake) on Trainium hardware" in run.texts["c01"]
    for cell in ("c04", "c06"):
        report = run.texts[cell]  # the text view: plain, nothing escaped (issue 34 item 7)
        assert report.startswith("Migration evidence report") and "\\" not in report
        assert "execution TorchNeuron (torch_neuronx 2.14.0+fake) on Trainium hardware" in report
        # the three-way on the device judges the hardware's own numerics (no simulator policy), then the FP32 check
        assert "2. Is the result acceptable?\n   PASS (" in report
        assert "numerics mode: Trainium hardware (TorchNeuron (torch_neuronx 2.14.0+fake))" in report
        assert "FP32 check within tolerance: max |device - CPU fp32|" in report and "assumed:" not in report
        assert (
            "cpu_fallback 1 (CPU_FALLBACK), native 6 (Y: Native). Top fallbacks: aten::_linalg_svd ×1 (n/a moved; CPU_FALLBACK (all dtypes)) at n/a"
            in report
        )
        assert "p50 wall (Trainium hardware)" in report and "p50 modeled device time not measured" in report
        assert "cold vs warm: not measured in this session (no compiled run)" in report
        assert "op policy overrides: n/a" in report
    assert (tmp_path / "migration_report.md").read_text().startswith("# Migration evidence report")
