"""The quickstart notebook runs unchanged in a real kernel under the stand-in torch_neuronx.

Cells tagged ``simulator-only`` (port-check's mark; in the quickstart only the modeled-time print) are left
out, as a notebook moved to a Trn2 would skip them; every other cell runs and its checks pass, on TorchNeuron's
(canned) figures.
"""

from __future__ import annotations

import shutil

import pytest

from trn_notebook.portcheck import MARK_TAG

from .fakehw import ROOT, environment

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")


def _text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out["text"])
        elif "data" in out:
            parts.append(str(out["data"].get("text/plain", "")))
    return "".join(parts)


@pytest.mark.slow
def test_quickstart_runs_on_the_fake_torchneuron(tmp_path, monkeypatch):
    for key, value in environment(tmp_path, fake=True, device=True).items():
        monkeypatch.setenv(key, value)  # the kernel inherits it
    # The stand-in borrows the simulator's kernels for its device at `import torch`, which cannot happen while
    # trn_notebook itself is being imported (a real torch_neuronx has its own runtime): the kernel imports torch
    # first, in an IPython startup file.
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-import-torch.py").write_text("import torch  # noqa: F401\n")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    path = tmp_path / "01_quickstart.ipynb"
    shutil.copy(ROOT / "examples" / "01_quickstart.ipynb", path)
    nb = nbformat.read(path, as_version=4)
    skipped = [c.id for c in nb.cells if MARK_TAG in c.metadata.get("tags", [])]
    assert skipped == ["c10b"]  # the modeled-time print: "not measured" on hardware
    nb.cells = [c for c in nb.cells if MARK_TAG not in c.metadata.get("tags", [])]
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": tmp_path}})
    client.execute()
    texts = {c.id: _text(c) for c in nb.cells if c.cell_type == "code"}
    device = texts["c01"]
    assert "TorchNeuron (torch_neuronx 2.14.0+fake)" in device and "Trainium2 (fake)" in device
    assert "neuron:0" in texts["c03"]
    assert "(TorchNeuron)" in texts["c09"] and "n/a hits" in texts["c09"]
    summary = texts["c10"]
    assert "{'native': 6, 'cpu_fallback': 1}" in summary and "aten::_linalg_svd" in summary  # canned placement
    assert "memory allocated: 3072.0 KiB" in summary
    assert "quickstart: all checks passed" in texts["c12"]
