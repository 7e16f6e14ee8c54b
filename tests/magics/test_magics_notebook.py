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


def _run_cells(cells: list[str], tmp_path, *, timeout: int) -> list[str]:
    """Run ``cells`` in order in one real kernel; each cell's output text. Fails on any error output."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=timeout, resources={"metadata": {"path": tmp_path}}
    )
    client.execute()
    errors = [o for cell in nb.cells for o in cell.outputs if o.get("output_type") == "error"]
    assert not errors, errors
    return ["".join(_text(o) for o in cell.outputs) for cell in nb.cells]


@pytest.mark.slow
def test_notebook_with_device_and_compiled_cells_runs_in_a_real_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff_cache"))  # a cold cache: a miss
    outs = _run_cells(CELLS, tmp_path, timeout=600)
    assert "default device: neuron:0" in outs[1] and "simulator" in outs[1]
    # The live progress line was replaced in place by the summary (same display id).
    assert "%%trn compile: nb_cell" in outs[3] and "miss" in outs[3] and "compiling nb_cell" not in outs[3]
    assert "neuron:0 (8, 4) True" in outs[4]
    assert "reused" in outs[5]
    assert "neuron:0" in outs[6] and "compile cache" in outs[6]
    assert "8.0" in outs[7] and "%%trn eager: cell [8]" in outs[7] and "sync points" in outs[7]
    assert "aten::_linalg_det" in outs[7] and "cell [8] line 4" in outs[7]  # counted from the %%trn line


DRY_CELLS = [
    "%load_ext trn_notebook",
    "import torch\nx = torch.randn(4, 4, device='neuron')\nfor _ in range(3):\n    y = x + x",
    "print(float((y @ x).sum().cpu()) == float((y.cpu() @ x.cpu()).sum()))",
    "%%trn dryrun --capacity 64MiB\nbig = [torch.empty(4 << 20, device='neuron') for _ in range(8)]",
    "mem = torch.neuron.memory_allocated()\nz = (x * 3).cpu()\nprint(z.shape, mem == torch.neuron.memory_allocated())",
    "%%trn dryrun\nw = torch.nn.Linear(16, 16).to('neuron')\nprint(torch.neuron.max_memory_allocated() > 0)",
    "print((x + 1).sum().item() == (x.cpu() + 1).sum().item())",
    "%trn report",
]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_dry_runs_between_eager_cells_in_a_real_kernel(tmp_path):
    """Issue 48: eager cells, ``%%trn dryrun`` over capacity (a finding, not a traceback), more eager cells, a
    second dry run, the report: every cell returns, in one kernel."""
    outs = _run_cells(DRY_CELLS, tmp_path, timeout=120)
    assert "True" in outs[2]
    assert (
        "DOES NOT FIT (modeled): needs peak allocated 128.00 MiB" in outs[3] and "cell [4] line 2" in outs[3]
    )  # counted from the %%trn line
    assert "≥ 2 logical cores" in outs[3]
    assert "torch.Size([4, 4]) True" in outs[4]
    assert outs[5].startswith("True") and "DRY RUN" in outs[5] and "DOES NOT FIT" not in outs[5]
    assert "True" in outs[6]
    assert "Migration evidence report" in outs[7] and "Does the model run?" in outs[7]
