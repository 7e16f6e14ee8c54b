"""One notebook executed by a real kernel (nbclient + ipykernel): load the extension, pick the device, compile,
run an eager cell."""

from __future__ import annotations

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

CELLS = [
    "%load_ext trn_notebook",
    "%trn device neuron",
    "import torch\ntorch.manual_seed(0)\nx = torch.randn(8, 16)\nw = torch.randn(16, 4)",
    "%%trn compile --name nb_cell\nh = torch.relu(x @ w)\ntotal = h.sum()",
    "ref = torch.relu(x.cpu() @ w.cpu())\nprint(h.device, tuple(h.shape), torch.allclose(h.cpu(), ref, atol=1e-5))",
    "%%trn compile --name nb_cell\nh = torch.relu(x @ w)\ntotal = h.sum()",
    "%trn status",
    "%%trn eager\nq = torch.ones(4) * 2\nprint(q.sum().item())\nd = torch.linalg.det(torch.eye(3))",
]


def _text(output: dict) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    data = output.get("data", {})
    return str(data.get("text/plain", "")) + str(data.get("text/html", ""))


@pytest.mark.slow
def test_notebook_with_device_and_compiled_cells_runs_in_a_real_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff_cache"))  # a cold cache: a miss
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": tmp_path}})
    client.execute()
    outs = ["".join(_text(o) for o in cell.outputs) for cell in nb.cells]
    errors = [o for cell in nb.cells for o in cell.outputs if o.get("output_type") == "error"]
    assert not errors, errors
    assert "default device: neuron:0" in outs[1] and "simulator" in outs[1]
    # The live progress line was replaced in place by the summary (same display id).
    assert "%%trn compile: nb_cell" in outs[3] and "miss" in outs[3] and "compiling nb_cell" not in outs[3]
    assert "neuron:0 (8, 4) True" in outs[4]
    assert "reused" in outs[5]
    assert "neuron:0" in outs[6] and "compile cache" in outs[6]
    assert "8.0" in outs[7] and "%%trn eager: cell [8]" in outs[7] and "sync points" in outs[7]
    assert "aten::_linalg_det" in outs[7] and "cell [8] line 4" in outs[7]  # counted from the %%trn line
