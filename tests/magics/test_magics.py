"""``%trn`` / ``%%trn`` through a real IPython shell: every subcommand, bad input, completion, hooks."""

from __future__ import annotations

import importlib.util
import re
import warnings

import pytest
import torch
from IPython.core.error import UsageError

import trn_notebook
from trn_notebook.device import get_config, placement_log
from trn_notebook.device.memory.runtime import allocator, get_chip
from trn_notebook.display.results import Result
from trn_notebook.facts.status import state_snapshot, status_payload
from trn_notebook.magics import render
from trn_notebook.session.events import cell_finished

from .helpers import line, run

pytestmark = pytest.mark.usefixtures("clean")


# -- loading ----------------------------------------------------------------------------------------
def test_load_ext_registers_magic_and_unload_removes_everything(ip):
    assert "trn" in ip.magics_manager.magics["line"] and "trn" in ip.magics_manager.magics["cell"]
    assert getattr(warnings.formatwarning, "trn_shell", None) is ip  # warnings name cells
    from trn_notebook.magics import status_comm

    assert ip in status_comm._registered  # the status bar's comm target is registered on load
    assert status_comm.TARGET_NAME in status_comm.comm_manager(ip).targets
    ip.run_line_magic("unload_ext", "trn_notebook")
    try:
        assert "trn" not in ip.magics_manager.magics["line"]
        assert "trn" not in ip.magics_manager.magics["cell"]
        assert cell_finished.emit not in ip.events.callbacks["post_run_cell"]
        assert "%trn" not in ip.strdispatchers["complete_command"].strs
        assert getattr(warnings.formatwarning, "trn_shell", None) is None
        assert ip not in status_comm._registered
        assert status_comm.TARGET_NAME not in status_comm.comm_manager(ip).targets
    finally:
        ip.run_line_magic("load_ext", "trn_notebook")
    trn_notebook.load_ipython_extension(ip)  # idempotent: one hook, one completer
    assert ip.events.callbacks["post_run_cell"].count(cell_finished.emit) == 1
    assert len(ip.strdispatchers["complete_command"].strs["%trn"].chain) == 1


def test_labextension_paths_point_at_the_shipped_folder():
    assert trn_notebook._jupyter_labextension_paths() == [{"src": "labextension", "dest": "trn-notebook"}]


# -- device -----------------------------------------------------------------------------------------
def test_device_neuron_makes_new_tensors_neuron_and_shows_a_card(ip):
    card = line(ip, "device neuron --chip trn3 --cores 2")
    assert torch.get_default_device().type == "neuron"
    run(ip, "t = torch.zeros(3)")
    assert ip.user_ns["t"].device.type == "neuron"
    text = card.text()
    assert "Trainium3" in text and "2 logical cores" in text and "simulator" in text
    assert get_chip().name == "trn3" and get_chip().logical_cores == 2
    assert "Trainium3" in card._repr_html_()


def test_device_cpu_switches_back_and_show_reports_it(ip):
    line(ip, "device neuron")
    line(ip, "device cpu")
    assert torch.get_default_device().type == "cpu"
    assert "default device: cpu" in line(ip, "device").text()
    assert "default device: cpu" in line(ip, "device show").text()


def test_device_flags_set_launch_blocking_and_fusion(ip):
    line(ip, "device neuron --blocking --fusion")
    assert get_config().launch_blocking and get_config().eager_fusion
    card = line(ip, "device neuron --no-blocking")
    assert not get_config().launch_blocking and get_config().eager_fusion
    assert ("eager fusion", "on") in card.fields


BAD_LINES = [
    ("", "needs a subcommand"),
    ("nope", "invalid choice: 'nope'"),
    ("device gpu", "invalid choice: 'gpu'"),
    ("device neuron --chip trn9", "invalid choice: 'trn9'"),
    ("device neuron --cores 0", "positive integer"),
    ("device neuron --cores 99", "cores must be between 1 and 8"),
    ("device cpu --chip trn3", "neuron device only"),
    ("device --chip trn3", "options need a device"),
    ("ops --bogus", "unrecognized arguments: --bogus"),
    ("memory --reset", "unrecognized arguments"),
    ("explain --stage llvm", "invalid choice: 'llvm'"),
    ("eager", "is a cell mode"),
    ("compile --fullgraph", "is a cell mode"),
    ("timeit", "no statement"),
    ("timeit -n 0 x", "positive integer"),
    ("timeit -q 3 x", "unrecognized arguments: -q"),
    ("status 'unclosed", "quote values"),
]


@pytest.mark.parametrize(("text", "expected"), BAD_LINES)
def test_bad_line_input_is_a_usage_error_that_changes_nothing(ip, text, expected):
    ip.user_ns["keep"] = keep = object()
    names = set(ip.user_ns)
    device, config, chip = torch.get_default_device(), get_config(), get_chip()
    with pytest.raises(UsageError) as info:
        line(ip, text)
    assert expected in str(info.value)
    assert "Traceback" not in str(info.value)
    assert set(ip.user_ns) == names and ip.user_ns["keep"] is keep
    assert (torch.get_default_device(), get_config(), get_chip()) == (device, config, chip)


BAD_CELLS = [
    ("compile --option fusion", "y = x + 1", "expected KEY=VALUE"),
    ("compile --option =3", "y = x + 1", "expected KEY=VALUE"),
    ("compile", "y = x + 1\nreturn y", "`return` cannot be used"),
    ("compile", "y = x\nyield y", "`yield`"),
    ("compile", "global x\nx = x + 1", "`global x` is not needed"),
    ("compile", "y = x\ndel x", "`del x` removes a notebook name"),
    ("compile", "from os.path import *", "import *"),
    ("compile", "", "empty"),
    ("status", "x", "is a line command"),
    ("eager --bogus", "x", "unrecognized arguments: --bogus"),
]


@pytest.mark.parametrize(("text", "cell", "expected"), BAD_CELLS)
def test_bad_cell_input_is_a_usage_error_that_changes_nothing(ip, text, cell, expected):
    ip.user_ns["x"] = x = torch.ones(2)
    names = set(ip.user_ns)
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("trn", text, cell)
    assert expected in str(info.value)
    assert set(ip.user_ns) == names and ip.user_ns["x"] is x


def test_help_lists_subcommands_and_each_subcommand_has_help(ip):
    text = line(ip, "help").text()
    for sub in ("device", "eager", "compile", "status", "ops", "memory", "cache", "shapes", "explain", "timeit"):
        assert sub in text
    assert "%%trn eager" in text
    assert "--chip {trn1,trn1n,trn2,trn3}" in line(ip, "device --help").text()
    assert "--fullgraph" in ip.run_cell_magic("trn", "compile --help", "x").text()


# -- views ------------------------------------------------------------------------------------------
def test_status_card_counts_fallback_ops_and_memory(ip):
    line(ip, "device neuron")
    placement_log.reset()
    run(ip, "m = torch.ones(3, 3) + torch.eye(3)\nd = torch.linalg.det(m)")
    card = line(ip, "status")
    payload = status_payload()
    assert payload["fallback_ops"] == 1
    assert payload["label"] == f"neuron:0 {get_chip().name} (sim)"
    assert payload["memory_allocated"] == allocator.counters.allocated > 0
    assert "1 (see %trn ops)" in card.text()
    assert "neuron:0" in card._repr_html_()


def test_ops_table_names_cell_lines_and_reset_clears_the_log(ip):
    line(ip, "device neuron")
    placement_log.reset()
    result = run(ip, "a = torch.ones(4)\nb = torch.linalg.det(torch.ones(2, 2) * 2)")
    count = result.execution_count
    table = line(ip, "ops")
    text = table.text()
    assert "aten::_linalg_det" in text and "cpu_fallback" in text
    assert f"cell [{count}] line 2" in text
    cleared = line(ip, "ops --reset")
    assert "cleared" in cleared.text()
    assert placement_log.snapshot() == {}


def test_ops_escapes_user_text_in_html(ip):
    placement_log.reset()
    placement_log.record("evil<script>", "native", 0.0, 0.0)
    html = line(ip, "ops")._repr_html_()
    assert "<script>" not in html and "evil&lt;script&gt;" in html
    placement_log.reset()


@pytest.mark.slow
def test_ops_table_flag_shows_the_compatibility_table_of_the_chosen_ops(ip):
    out = line(ip, "ops --table --op add")
    assert hasattr(out, "_repr_html_")
    if hasattr(importlib.import_module("trn_notebook.compat"), "compatibility_table"):
        assert list(out["op"]) == ["add"] and out["category"][0] == "native"
    else:
        assert "not available" in out.text()


def test_ops_table_options_need_table(ip):
    with pytest.raises(UsageError) as info:
        line(ip, "ops --op add")
    assert "go with --table" in str(info.value)


def test_memory_reset_peak_and_empty_cache(ip):
    line(ip, "device neuron")
    run(ip, "big = torch.ones(1 << 20)\ndel big")
    assert allocator.counters.peak_allocated > allocator.counters.allocated
    out = line(ip, "memory --reset-peak --empty-cache")
    assert allocator.counters.peak_allocated == allocator.counters.allocated
    assert "peaks reset" in out.text() and "empty_cache released" in out.text()
    assert allocator.counters.reserved <= allocator.counters.peak_reserved


def test_report_and_dashboard_render(ip):
    report = line(ip, "report")
    assert type(report).__name__ == "MigrationReport" and "<table" in report._repr_html_()
    dash = line(ip, "dashboard")
    assert "trn status" in dash.text() and "op placement" in dash.text() and "device memory" in dash.text()


def test_views_prefer_widgets_when_available(ip):
    render.prefer_widgets = True
    from trn_notebook import widgets

    out = line(ip, "ops")
    assert isinstance(out, widgets.PlacementView)
    assert isinstance(line(ip, "memory"), widgets.MemoryView)
    assert isinstance(line(ip, "ops --reset"), Result)  # the cleared rows stay visible
    assert isinstance(line(ip, "dashboard"), widgets.Dashboard)
    assert isinstance(line(ip, "cache"), widgets.CacheView)
    assert isinstance(line(ip, "shapes"), Result)  # all callables: the tables; one name: the tuner


# -- eager cells ------------------------------------------------------------------------------------
def test_eager_cell_reports_only_its_own_ops_syncs_memory_and_fallback_lines(ip, capsys):
    run(ip, "pre = torch.ones(2, device='neuron') * 3")
    result = ip.run_cell("%%trn eager\ne = torch.ones(8) * 2\nf = torch.linalg.det(torch.eye(3))\nv = e.sum().item()")
    assert result.success
    assert ip.user_ns["e"].device.type == "neuron" and ip.user_ns["v"] == 16.0
    assert torch.get_default_device().type == "cpu"  # only inside the cell
    out = capsys.readouterr().out
    assert "%%trn eager" in out and "fallback 1" in out
    assert "aten::_linalg_det" in out and f"cell [{result.execution_count}] line 3" in out
    assert re.search(r"sync points\s+[12] \(", out) and ".item()" in out


def test_eager_report_object_has_window_figures():
    from trn_notebook.session import EagerWindow

    with EagerWindow("block", fusion=True) as w:
        x = torch.ones(1024) + 1
        x.sum().item()
    r = w.report
    assert r is not None and r.fusion and not r.failed and r.fused_groups >= 1
    assert r.calls_by_category.get("native", 0) >= 2 and r.sync_points == 1
    assert r.memory_after - r.memory_before == allocator.counters.allocated - r.memory_before
    assert r.peak_allocated >= r.memory_after and r.device_s > 0
    assert get_config().eager_fusion is False


def test_eager_strict_makes_a_fallback_fail_the_outer_cell(ip):
    ip.user_ns.pop("strict_out", None)
    result = ip.run_cell("%%trn eager --strict\nstrict_out = torch.linalg.det(torch.eye(2))")
    assert not result.success
    assert "strict mode is on" in str(result.error_in_exec) and "aten::_linalg_det" in str(result.error_in_exec)
    assert "strict_out" not in ip.user_ns
    assert get_config().strict is False


def test_eager_cell_as_name_binds_the_card_it_showed(ip, capsys):
    """``--as NAME``: a check cell reads the figures of the card the eager cell displayed (issue 30)."""
    ip.user_ns.pop("card", None)
    result = ip.run_cell("%%trn eager --fusion --as card\nq = torch.ones(64) * 2\nq = q + 1")
    assert result.success
    card = ip.user_ns["card"]
    shown = capsys.readouterr().out
    assert (
        card.fusion and card.ops.total_calls == 3 and re.search(rf"launches\s+{re.escape(card.launch_text())}\n", shown)
    )
    for bad in ("2x", "class", "a-b"):
        assert not ip.run_cell(f"%%trn eager --as {bad}\nq = torch.ones(2)").success
    assert capsys.readouterr().err.count("is not a Python name") == 3


def test_failing_eager_cell_fails_the_outer_cell(ip):
    result = ip.run_cell("%%trn eager\nraise ValueError('boom')")
    assert not result.success and isinstance(result.error_in_exec, ValueError)


# -- timeit -----------------------------------------------------------------------------------------
def test_timeit_line_separates_first_call_and_reports_both_clocks(ip):
    ip.user_ns["tx"] = torch.ones(16, 16, device="neuron")
    r = line(ip, "timeit -n 3 -r 2 --warmup 2 tx @ tx")
    assert (r.loops, r.repeats, r.warmup, r.synced) == (3, 2, 2, True)
    assert len(r.wall_s) == 2 and all(d > 0 for d in r.device_s)
    text = r.text()
    assert "first call" in text and "modeled device" in text and "torch.neuron.synchronize()" in text


def test_timeit_no_sync_is_labelled_enqueue_only_and_cell_mode_runs_setup(ip):
    r = line(ip, "timeit --no-sync -n 2 -r 1 torch.ones(4, device='neuron')")
    assert not r.synced and "enqueue only" in r.text()
    r = ip.run_cell_magic("trn", "timeit -n 2 -r 1 setup_val = torch.ones(4, device='neuron')", "setup_val * 2")
    assert "setup_val" in ip.user_ns and r.loops == 2 and r.statement == "setup_val * 2"


# -- completion -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("%trn dev", ["device"]),
        ("%trn ", ["device", "status", "ops", "memory", "timeit"]),
        ("%trn device ", ["neuron", "cpu", "show", "--chip"]),
        ("%trn device neuron --ch", ["--chip"]),
        ("%trn device neuron --chip ", ["trn2", "trn3"]),
        ("%trn explain --stage ", ["fx", "aten", "ir", "passes", "schedule"]),
        ("%trn memory --", ["--reset-peak", "--empty-cache"]),
        ("%%trn ", ["eager", "compile", "timeit"]),
        ("%%trn compile --f", ["--fullgraph"]),
        ("x = 1\n%trn mem", ["memory"]),
    ],
)
def test_completion(ip, text, expected):
    from IPython.core.completer import provisionalcompleter

    with provisionalcompleter():  # the API the kernel uses for Jupyter's completion requests
        matches = [c.text for c in ip.Completer.completions(text, len(text))]
    for word in expected:
        assert word in matches


# -- hooks ------------------------------------------------------------------------------------------
def test_post_run_cell_refreshes_the_snapshot_only_when_something_changed(ip):
    run(ip, "pass")
    snap, changed = state_snapshot()
    assert not changed
    run(ip, "grown = torch.ones(100, device='neuron')")
    snap2, changed = state_snapshot()
    assert not changed  # the hook already refreshed it after the cell
    assert snap2 is not snap and snap2["memory_allocated"] == allocator.counters.allocated
    assert snap2["memory_allocated"] > snap["memory_allocated"]
    assert state_snapshot()[0] is snap2  # nothing moved: the same payload, not recomputed


def test_status_payload_has_every_status_bar_field():
    from trn_notebook.facts.status import StatusPayload

    assert set(status_payload()) == set(StatusPayload.__annotations__)


# -- the cell rewrite (no compiler needed) -----------------------------------------------------------
# -- the library behind the magics, without IPython ---------------------------------------------------
def test_library_functions_work_without_ipython():
    from trn_notebook import session
    from trn_notebook.session.status_card import status

    card = session.use_device("neuron", chip="trn2", fusion=False)
    assert torch.get_default_device().type == "neuron" and ("eager fusion", "off") in card.fields
    x = torch.ones(32, 32)
    timing = session.timeit(lambda: x @ x, number=2, repeat=2, warmup=0, statement="x @ x")
    assert (timing.loops, timing.repeats, len(timing.wall_s)) == (2, 2, 2) and timing.device_s[0] > 0
    assert "neuron:0" in status().text()
    assert "aten::mm" in session.ops().text()
    assert "device memory" in session.memory().text()
    assert session.parse_options(["a=1", "b=2.5", "c=true", "d=text"]) == {"a": 1, "b": 2.5, "c": True, "d": "text"}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        session.parse_options(["novalue"])
    with pytest.raises(ValueError, match="unknown device"):
        session.use_device("tpu")
    with pytest.raises(ValueError, match="-n and -r"):
        session.timeit(lambda: None, number=0)
    torch.set_default_device("cpu")
