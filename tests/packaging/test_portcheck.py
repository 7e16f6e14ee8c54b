"""port_check lists simulator-only uses with line and hardware equivalent; marked cells do not fail it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trn_notebook.migration.portcheck import MARK_TAG, PortCheckError, port_check, port_check_magic

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """\
import torch
import trn_notebook as tn
from trn_notebook import set_memory_capacity as cap
from trn_notebook.device.clocks import clocks

tn.set_chip("trn3")
cap(2**30)
x = torch.randn(3, device="neuron")
print(tn.get_fallback_ops(), tn.op_table(), tn.report)
f = torch.compile(lambda v: v * 2, backend="neuron")
t = clocks.snapshot().sim_device_s
import os; os.environ["TRN_NOTEBOOK_STRICT"] = "1"
with torch.neuron.phase("load"): pass
from torch import neuron as tn2; tn2.elapsed_modeled_device_time(); torch.neuron.memory_stats()
"""


def test_script_findings_name_line_and_hardware_equivalent(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    report = port_check(path)
    found = {(f.line, f.name) for f in report.findings}
    assert found == {
        (3, "trn_notebook.set_memory_capacity"),
        (4, "trn_notebook.device.clocks.clocks"),
        (6, "trn_notebook.set_chip"),
        (7, "trn_notebook.set_memory_capacity"),
        (11, "trn_notebook.device.clocks"),
        (12, "$TRN_NOTEBOOK_STRICT"),
        (13, "torch.neuron.phase"),
        (14, "torch.neuron.elapsed_modeled_device_time"),
    }  # portable calls (get_fallback_ops, op_table, report, torch.compile) are not flagged
    assert not report.ok
    by_name = {f.name: f for f in report.findings}
    assert "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS" in by_name["$TRN_NOTEBOOK_STRICT"].hardware
    assert by_name["trn_notebook.set_chip"].code == 'tn.set_chip("trn3")'
    assert "line 6" in str(report) and "on hardware" in str(report)
    assert "<table>" in report._repr_html_()


def _nb(*cells: tuple[str, list[str]]) -> dict:
    return {
        "cells": [
            {"cell_type": "code", "source": src, "metadata": {"tags": tags}, "outputs": []} for src, tags in cells
        ]
        + [{"cell_type": "markdown", "source": "trn_notebook.set_chip('trn3') in prose is fine", "metadata": {}}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_notebook_magics_cells_and_marks():
    nb = _nb(
        ("import trn_notebook\n%load_ext trn_notebook\n%trn device neuron --chip trn3", []),
        ("%%trn compile --name block --buckets x:1=pow2:16-256\ny = block(x)", []),
        ("trn_notebook.set_chip('trn2')  # imports carry over from earlier cells", [MARK_TAG]),
        ("%%bash\necho trn_notebook.set_chip", []),
        ("%trn ops\nprint(trn_notebook.get_executed_ops())\ndef broken(:", []),
    )
    report = port_check(nb)
    assert [(f.cell, f.line, f.name, f.marked) for f in report.findings] == [
        (0, 3, "%trn device --chip", False),
        (1, 1, "%%trn compile --buckets", False),
        (2, 1, "trn_notebook.set_chip", True),
    ]
    nb["cells"][0]["metadata"]["tags"] = nb["cells"][1]["metadata"]["tags"] = [MARK_TAG]
    assert port_check(nb).ok and "passes: 3 simulator-only uses" in str(port_check(nb))
    assert "ready for a Trn2" in str(port_check("import torch\nprint(1)\n"))
    # a plain %%trn compile runs TorchNeuron's compiler on hardware; profile/ranks/shapes/explain are the simulator's
    assert port_check(_nb(("%%trn compile --name block\ny = block(x)", []))).ok
    names = [
        f.name
        for f in port_check(
            _nb(
                *[
                    (c, [])
                    for c in ("%%trn profile\nf()", "%%trn ranks 2\nf()", "%trn shapes", "%%trn eager --fusion\nf()")
                ]
            )
        ).findings
    ]
    assert names == ["%%trn profile", "%%trn ranks", "%trn shapes", "%%trn eager --fusion"], names


def test_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(PortCheckError, match="no such file"):
        port_check(tmp_path / "missing.ipynb")
    (tmp_path / "bad.ipynb").write_text("{not json")
    with pytest.raises(PortCheckError, match="not a notebook"):
        port_check(tmp_path / "bad.ipynb")
    with pytest.raises(PortCheckError, match="got int"):
        port_check(3)  # type: ignore[arg-type]
    with pytest.raises(PortCheckError, match="give a notebook or script path"):
        port_check_magic("")


def test_magic_checks_a_path_or_the_session_history(tmp_path):
    (tmp_path / "nb.ipynb").write_text(json.dumps(_nb(("import trn_notebook\ntrn_notebook.set_chip('trn3')", []))))
    assert [f.line for f in port_check_magic(f"  {tmp_path / 'nb.ipynb'} ").findings] == [2]
    report = port_check_magic("", history=["", "import trn_notebook as t", "t.phase('load')"])
    assert [(f.cell, f.name) for f in report.findings] == [(1, "trn_notebook.phase")]
    assert report.source == "this session's cells"


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "examples").glob("*.ipynb")))
def test_workshop_notebooks_pass_or_mark_their_simulator_only_cells(name):
    report = port_check(ROOT / "examples" / name)
    assert report.ok, str(report)


def test_a_magic_assigned_to_a_name_and_the_simulators_helpers_are_found():
    cells = (
        "shapes = %trn shapes\nt = %trn timeit -n 3 f()\nir = %trn explain block --stage ir",
        "import trn_notebook\ntrn_notebook.compare_ranks(m, b)\ntrn_notebook.why_slow('t.json')",
        "with trn_notebook.profile() as r:\n    f()\ntrn_notebook.cache.export('b.json')",
        "from trn_notebook.widgets import MemoryView, ShapeTuner\nShapeTuner(model, lengths=lengths)",
    )
    report = port_check(_nb(*[(c, []) for c in cells]))
    assert [(f.cell, f.line, f.name) for f in report.findings] == [
        (0, 1, "%trn shapes"),
        (0, 3, "%trn explain"),  # timeit is portable: on hardware it reports wall times only
        (1, 2, "trn_notebook.compare_ranks"),
        (1, 3, "trn_notebook.why_slow"),
        (2, 1, "trn_notebook.profile"),
        (2, 3, "trn_notebook.cache.export"),
        (3, 1, "trn_notebook.widgets.ShapeTuner"),  # the simulator's bucket tuner; MemoryView is portable
        (3, 2, "trn_notebook.widgets.ShapeTuner"),
    ]
    assert "torchrun" in report.findings[2].hardware


def test_cells_are_read_as_ipython_runs_them():
    # Probe: a trailing `?` in a comment was taken as help syntax (the line was dropped), and a continuation
    # line starting with `% n` (string formatting) was taken as a magic, which hid the whole cell.
    cells = (
        'import trn_notebook as tn\ntn.set_chip("trn3")  # needed here?',
        'label = ("step %d" \n% n)\ntn.set_chip("trn3")',
        "tn?\n%trn device --chip trn3\n!echo $TRN_NOTEBOOK_CHIP",
        "%%trn compile --buckets x:1=pow2:16-256\ntn.set_chip('trn3')",
    )
    report = port_check(_nb(*[(c, []) for c in cells]))
    assert [(f.cell, f.line, f.name) for f in report.findings] == [
        (0, 2, "trn_notebook.set_chip"),
        (1, 3, "trn_notebook.set_chip"),
        (2, 2, "%trn device --chip"),
        (2, 3, "$TRN_NOTEBOOK_CHIP"),
        (3, 1, "%%trn compile --buckets"),
        (3, 2, "trn_notebook.set_chip"),
    ]
