"""Every command the README names answers ``--help`` (issue 34 item 9), and the quickstart's small fixes hold."""

from __future__ import annotations

import importlib

import nbformat
import pytest

from trn_notebook import quickstart, workshop

CLIS = {  # module -> the name its usage line shows
    "trn_notebook.quickstart": "python -m trn_notebook.quickstart",
    "trn_notebook.demo": "trn-notebook-demo",
    "trn_notebook.workshop": "trn-notebook-workshop",
    "trn_notebook.compat.__main__": "python -m trn_notebook.compat",
    "trn_notebook.zoo.__main__": "python -m trn_notebook.zoo",
}


@pytest.mark.parametrize("module", sorted(CLIS))
def test_help_prints_usage_and_does_nothing_else(module, capsys):
    main = importlib.import_module(module).main
    with pytest.raises(SystemExit) as stop:
        main(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {CLIS[module]}") and "-h, --help" in out, out


def test_quickstart_refuses_an_unknown_option_with_usage(capsys):
    with pytest.raises(SystemExit) as stop:
        quickstart.main(["--nope"])
    assert stop.value.code == 2 and "unrecognized arguments: --nope" in capsys.readouterr().err


def _cell(*texts: str, tags=("summary",)):
    cell = nbformat.v4.new_code_cell("print()", metadata={"tags": list(tags)})
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in texts]
    return cell


def test_summary_joins_a_cells_stream_chunks_as_they_came():
    # Issue 34: under load a cell's stdout arrives in several chunks, split anywhere; stripping and re-joining
    # each chunk gained a blank line when a split fell just before a line break, and broke lines split mid-way.
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("device: neuron:0", "\nallocated: 1 KiB\n", "quick", "start: all checks passed\n"),
        _cell("not a summary\n", tags=()),
        _cell("second cell\n"),
    ]
    text = quickstart.summary_text(nb)
    assert text == "device: neuron:0\nallocated: 1 KiB\nquickstart: all checks passed\nsecond cell"


def test_every_document_a_notebook_names_is_in_the_copied_workshop(tmp_path):
    import re

    workshop.copy_workshop(tmp_path / "ws")
    named = set()
    for nb in workshop.notebooks():
        named |= set(re.findall(r"docs/[\w.-]+\.md", nb.read_text(encoding="utf-8")))
    assert named and {f"docs/{n}" for n in workshop.WORKSHOP_DOCS} >= named
    for doc in named:
        assert (tmp_path / "ws" / doc).read_bytes() == (workshop.PACKAGE_DIR.parent / doc).read_bytes(), doc
