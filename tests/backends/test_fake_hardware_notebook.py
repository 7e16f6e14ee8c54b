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
