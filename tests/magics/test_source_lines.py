"""One source-line rule (``device/source_lines.py``) read by every view, with or without the magics."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from trn_notebook.device import placement_log
from trn_notebook.device.source_lines import (
    NO_USER_FRAME,
    SourceLine,
    format_source,
    parse_source,
    source_line,
    user_frame,
)


def test_a_cell_is_named_by_its_count_even_without_the_magics(ip):
    """IPython's own cell map names the line: the placement log and the profiler agree, and the code
    of the line is read from the file it names."""
    ip.run_line_magic("unload_ext", "trn_notebook")
    try:
        placement_log.reset()
        result = ip.run_cell(
            "import torch\nx = torch.ones(3, device='neuron')\ny = torch.linalg.det(torch.ones(2, 2, device='neuron'))"
        )
        assert result.success
        snap = placement_log.snapshot()
        assert "_linalg_det" in snap, list(snap)
        source = snap["_linalg_det"].source
        assert source == f"cell [{result.execution_count}] line 3"
        parsed = parse_source(source)
        assert parsed is not None and parsed.cell == result.execution_count and parsed.line == 3
        assert source_line(parsed.file, 3, code=True).code == "y = torch.linalg.det(torch.ones(2, 2, device='neuron'))"
    finally:
        ip.run_line_magic("load_ext", "trn_notebook")


def test_names_round_trip_and_library_frames_are_skipped():
    here = user_frame()
    assert here is not None and here[0] == __file__  # the test itself is user code
    name = format_source(__file__, 7)
    assert name == f"{__file__}:7" and parse_source(name) == SourceLine(__file__, 7)
    assert str(SourceLine("f.py", 3, cell=5)) == "cell [5] line 3"
    assert parse_source("cell [5] line 3") == SourceLine("cell [5]", 3, 5)  # a cell no shell knows
    assert parse_source("<no user frame>") is None and parse_source("nonsense") is None


def test_a_call_from_library_frames_only_has_no_user_frame():
    """On a worker thread that only library code started (the standard library's executor, as the
    autograd engine's thread is torch's), there is no user line: the log says so instead of guessing."""
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(placement_log.user_source).result() == NO_USER_FRAME
        assert pool.submit(user_frame).result() is None
    assert placement_log.user_source().startswith(__file__)  # called from here: this line
