"""``%trn`` / ``%%trn`` through a real IPython shell: every subcommand, bad input, completion, hooks."""

from __future__ import annotations

import importlib.util
import re

import pytest
import torch
from IPython.core.error import UsageError
from IPython.testing import globalipapp

import trn_notebook
from trn_notebook.device import get_config, placement_log, set_config
from trn_notebook.device.runtime import allocator, get_chip, set_chip
from trn_notebook.magics import render
from trn_notebook.results import Result
from trn_notebook.session import CellRewriteError, rewrite_cell
from trn_notebook.session.events import cell_finished
from trn_notebook.status import state_snapshot, status_payload


@pytest.fixture(scope="module")
def ip():
    shell = globalipapp.get_ipython()  # the module attribute: start_ipython() rebinds it after the first call
    shell.run_line_magic("load_ext", "trn_notebook")
    yield shell
    shell.run_line_magic("unload_ext", "trn_notebook")


@pytest.fixture(autouse=True)
def clean(ip):
    render.prefer_widgets = False
    torch.set_default_device("cpu")  # whatever an earlier test module left behind
    config = get_config()
    chip = get_chip()
    ip.run_cell("import torch")
    yield
    render.prefer_widgets = True
    torch.set_default_device("cpu")
    set_config(**{f: getattr(config, f) for f in ("launch_blocking", "eager_fusion", "strict")})
    set_chip(chip.name)


def line(ip, text: str):
    return ip.run_line_magic("trn", text)


def run(ip, source: str):
    result = ip.run_cell(source)
    return result


# -- loading ----------------------------------------------------------------------------------------
def test_load_ext_registers_magic_and_unload_removes_everything(ip):
    assert "trn" in ip.magics_manager.magics["line"] and "trn" in ip.magics_manager.magics["cell"]
    assert getattr(placement_log.source_formatter, "trn_shell", None) is ip
    from trn_notebook.magics import status_comm

    assert ip in status_comm._registered  # the status bar's comm is opened on load
    ip.run_line_magic("unload_ext", "trn_notebook")
    try:
        assert "trn" not in ip.magics_manager.magics["line"]
        assert "trn" not in ip.magics_manager.magics["cell"]
        assert cell_finished.emit not in ip.events.callbacks["post_run_cell"]
        assert "%trn" not in ip.strdispatchers["complete_command"].strs
        assert getattr(placement_log.source_formatter, "trn_shell", None) is None
        assert ip not in status_comm._registered
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
    assert "--chip {trn2,trn3}" in line(ip, "device --help").text()
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
    widgets = pytest.importorskip("trn_notebook.widgets")
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
    from trn_notebook.magics.status_comm import StatusPayload

    assert set(status_payload()) == set(StatusPayload.__annotations__)


# -- the cell rewrite (no compiler needed) -----------------------------------------------------------
def test_rewrite_reads_before_writes_become_parameters_and_assignments_results():
    ns = {"torch": torch, "x": torch.ones(2), "w": torch.full((2,), 2.0), "k": 7}
    cell = rewrite_cell("y = x * w\nx = y + 1\nz = [k * 2 for k in range(3)]\ny.sum()", ns)
    assert cell.params == ("x", "w")  # torch is a module (global lookup); k is the comprehension's
    assert cell.results == ("y", "x", "z") and cell.has_value
    out = cell.make(ns)(ns["x"], ns["w"])
    assert torch.equal(out[0], torch.full((2,), 2.0)) and out[2] == [0, 2, 4] and float(out[3]) == 4.0


def test_rewrite_keeps_the_cell_line_numbers():
    cell = rewrite_cell("a = 1\n\nb = 1 / 0", {}, filename="<cellfile>")
    with pytest.raises(ZeroDivisionError) as info:
        cell.make({})()
    assert info.traceback[-1].lineno + 1 == 3 and info.traceback[-1].path == "<cellfile>"


def test_rewrite_refuses_return_with_the_line():
    with pytest.raises(CellRewriteError) as info:
        rewrite_cell("a = 1\nreturn a", {})
    assert info.value.lineno == 2 and "Assign the value to a name" in str(info.value)


# -- %%trn compile (needs the compiler) ---------------------------------------------------------------
def _compiler_or_skip():
    """The compiler package (always present: a failed import fails the test)."""
    import trn_notebook.compiler as compiler

    return compiler


@pytest.fixture
def compiler(ip):
    comp = _compiler_or_skip()
    from trn_notebook.session import clear_compiled_cells

    clear_compiled_cells()
    with comp.config.override(disable_cache=True):
        yield comp
    clear_compiled_cells()


def compile_cell(ip, options: str, body: str):
    return ip.run_cell(f"%%trn compile {options}\n{body}")


def test_compile_writes_results_back_and_reuses_the_compiled_function(ip, compiler, capsys):
    ip.user_ns.update(cx=torch.randn(4, 8), cw=torch.randn(8, 3))
    body = "h = torch.relu(cx @ cw)\ntotal = h.sum()"
    first = compile_cell(ip, "--name cellA", body)
    assert first.success, first.error_in_exec
    expected = torch.relu(ip.user_ns["cx"] @ ip.user_ns["cw"])
    assert torch.allclose(ip.user_ns["h"].cpu(), expected) and ip.user_ns["total"].shape == ()
    out = capsys.readouterr().out
    assert "%%trn compile: cellA" in out and "inputs" in out and "cx, cw" in out
    n_records = len(compiler.compile_log.snapshot())
    second = compile_cell(ip, "--name cellA", body)
    assert second.success
    assert len(compiler.compile_log.snapshot()) == n_records  # nothing compiled again
    assert "reused" in capsys.readouterr().out


def test_compile_recompiles_on_a_new_shape_and_says_why(ip, compiler, capsys):
    from trn_notebook.session import compile_cell as library_compile

    ns = ip.user_ns  # a long-lived namespace, as in a notebook (dynamo keeps entries in a function's globals)
    ns["rx"] = torch.randn(2, 5, device="neuron")
    library_compile("ry = rx * 2 + 1", ns, name="shapes_cell")
    ns["rx"] = torch.randn(3, 5, device="neuron")
    report = library_compile("ry = rx * 2 + 1", ns, name="shapes_cell")
    assert torch.allclose(ns["ry"], ns["rx"] * 2 + 1)
    assert report.entries and not report.reused
    assert report.recompile_reasons, report.entries
    assert "recompiled because" in report.text()


def test_compile_cell_value_is_the_cell_output(ip, compiler):
    ip.user_ns["vx"] = torch.ones(3)
    result = compile_cell(ip, "", "vy = vx + 1\nvy * 2")
    assert result.success and torch.equal(result.result.cpu(), torch.full((3,), 4.0))


def test_fullgraph_graph_break_names_the_cell_line(ip, compiler):
    ip.user_ns["gx"] = torch.ones(3)
    result = compile_cell(ip, "--fullgraph --name breaker", "gy = gx + 1\nprint('hi')\ngz = gy * 2")
    assert not result.success
    err = result.error_in_exec
    assert isinstance(err, compiler.GraphBreakError)
    assert "line 3" in str(err) and "gz" not in ip.user_ns and "gy" not in ip.user_ns  # the print, under %%trn


def test_graph_breaks_are_listed_with_cell_lines_without_fullgraph(ip, compiler, capsys):
    ip.user_ns["bx"] = torch.ones(3)
    result = compile_cell(ip, "--name breaks", "by = bx + 1\nprint('between')\nbz = by * 2")
    assert result.success and torch.equal(ip.user_ns["bz"], torch.full((3,), 4.0))
    out = capsys.readouterr().out
    assert "graph breaks" in out


def test_bad_bucket_spec_and_bad_option_type_are_usage_errors(ip, compiler):
    ip.user_ns["ux"] = x = torch.ones(2, 8)
    names = set(ip.user_ns)
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("trn", "compile --buckets pow3:1-2", "uy = ux + 1")
    assert "pow2:128-2048" in str(info.value)
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("trn", "compile --option fallback_execution=7", "uy = ux + 1")
    assert "fallback_execution" in str(info.value)
    assert set(ip.user_ns) == names and ip.user_ns["ux"] is x


def test_an_error_in_a_compiled_cell_fails_the_outer_cell_and_writes_nothing(ip, compiler):
    ip.user_ns.update(ea=torch.ones(2, 3, device="neuron"), eb=torch.ones(4, 5, device="neuron"))
    names = set(ip.user_ns)
    result = compile_cell(ip, "--name mismatch", "ec = ea * 2\ned = ec @ eb")
    assert not result.success and isinstance(result.error_in_exec, Exception)
    # Dynamo itself adds __builtins_dict__ entries to a compiled function's globals; nothing else is new.
    assert {n for n in set(ip.user_ns) - names if not n.startswith("_")} == set()
    assert "ec" not in ip.user_ns and "ed" not in ip.user_ns


def test_keyboard_interrupt_during_compile_leaves_state_consistent(ip, compiler):
    from trn_notebook.session import compiled_cells

    ip.user_ns["kx"] = torch.ones(4)

    def interrupt(stage, elapsed, name):
        if stage == "lower":
            raise KeyboardInterrupt

    n_records = len(compiler.compile_log.snapshot())
    compiler.progress.add_listener(interrupt)
    try:
        result = compile_cell(ip, "--name interrupted", "ky = kx * 3")
    finally:
        compiler.progress.remove_listener(interrupt)
    assert not result.success and isinstance(result.error_in_exec, KeyboardInterrupt)
    assert "ky" not in ip.user_ns and "interrupted" not in compiled_cells()
    assert len(compiler.compile_log.snapshot()) == n_records  # no record of a half-done compile
    again = compile_cell(ip, "--name interrupted", "ky = kx * 3")
    assert again.success and torch.equal(ip.user_ns["ky"].cpu(), torch.full((4,), 3.0))
    assert "interrupted" in compiled_cells()


def test_progress_line_names_each_stage(ip, compiler):
    from trn_notebook.session import compile_cell as library_compile

    seen = []
    ip.user_ns["px"] = torch.ones(2, device="neuron")
    library_compile("py = px - 1", ip.user_ns, name="progress_cell", on_progress=lambda s, e, n: seen.append(s))
    assert seen[0] == "capture" and "codegen" in seen and seen[-1] == "done"


def test_explain_shapes_and_cache_views_of_a_compiled_cell(ip, compiler):
    ip.user_ns["ex"] = torch.ones(2, 4, device="neuron")
    assert compile_cell(ip, "--name explained", "ey = ex.exp()").success
    ir = line(ip, "explain explained --stage ir")
    assert "ir" in ir.text() and "exp" in ir.text()
    every = line(ip, "explain")
    assert "fx" in every.text() and "schedule" in every.text()
    shapes = line(ip, "shapes explained")
    assert "f32[2,4]" in shapes.text()
    with pytest.raises(UsageError) as info:
        line(ip, "shapes nosuchcell")
    assert "explained" in str(info.value)
    with pytest.raises(UsageError):
        line(ip, "explain nosuchname")
    assert "compile cache" in line(ip, "cache").text()
    assert "explained" in ip.complete("", "%trn explain ", 13)[1]  # compiled cell names complete


def test_cache_dir_and_clear(ip, compiler, tmp_path):
    import os

    old = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    try:
        out = line(ip, f"cache --dir {tmp_path} --clear")
        assert str(tmp_path) in out.text() and "removed 0 entries" in out.text()
        assert compiler.cache.cache_dir() == tmp_path
    finally:
        if old is None:
            os.environ.pop("TORCH_NEURONX_NEFF_CACHE_DIR", None)
        else:
            os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = old
        compiler.config.reload_config()
    with pytest.raises(UsageError):
        line(ip, f"cache --dir {__file__}")


def test_buckets_pad_the_sequence_dim_and_reuse_one_graph_per_bucket(ip, compiler):
    from trn_notebook.session import compiled_cells

    ip.user_ns["ids"] = torch.ones(2, 100, device="neuron")
    assert compile_cell(ip, "--name bucketed_cell --buckets pow2:64-256", "emb = ids * 2").success
    assert tuple(ip.user_ns["emb"].shape) == (2, 100)
    n_records = len(compiler.compile_log.snapshot())
    ip.user_ns["ids"] = torch.ones(2, 120, device="neuron")  # same bucket (128): no new graph
    assert compile_cell(ip, "--name bucketed_cell --buckets pow2:64-256", "emb = ids * 2").success
    assert tuple(ip.user_ns["emb"].shape) == (2, 120)
    assert len(compiler.compile_log.snapshot()) == n_records
    key = compiled_cells()["bucketed_cell"].fn.name
    snap = compiler.shape_log.snapshot()[key]
    assert snap["policy"] == "pow2:64-256" and snap["padded"] == {128: 2}
    assert "pow2:64-256" in line(ip, "shapes bucketed_cell").text()
    with pytest.raises(UsageError):
        ip.run_cell_magic("trn", "compile --buckets pow2:64-256 --fullgraph", "emb = ids * 2")


def test_explain_accepts_a_compiled_callable_from_the_namespace(ip, compiler):
    ip.run_cell(
        "import trn_notebook\ndef square(a):\n    return a * a\n"
        "csq = trn_notebook.compile(square)\nsq_out = csq(torch.ones(3, device='neuron'))"
    )
    out = line(ip, "explain csq --stage aten")
    assert "aten_forward" in out.text() and "mul" in out.text()
    ip.run_cell("def never_compiled(a):\n    return a")
    with pytest.raises(UsageError) as info:
        line(ip, "explain never_compiled")
    assert "no neuron compilation recorded" in str(info.value)


# -- the library behind the magics, without IPython ---------------------------------------------------
def test_library_functions_work_without_ipython():
    from trn_notebook import session
    from trn_notebook.status import status

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


def test_compile_report_hints_when_inputs_are_on_the_cpu(ip, compiler):
    from trn_notebook.session import compile_cell as library_compile

    ip.user_ns["cpu_in"] = torch.ones(3)
    report = library_compile("cpu_out = cpu_in + 1", ip.user_ns, name="cpu_inputs")
    assert any("CPU tensors" in n for n in report.notes) and "cpu_in" in report.text()


def test_rewrite_scopes_walrus_except_and_conditional_names():
    ns = {"data": [1, 2, 3], "flag": False, "old": 5}
    src = (
        "if flag:\n    old = 0\n"
        "found = [y for v in data if (y := v * 2) > 2]\n"
        "try:\n    1 / 0\nexcept ZeroDivisionError as err:\n    caught = type(err).__name__\n"
        "def inner(a):\n    return a + len(data)\n"
    )
    cell = rewrite_cell(src, ns)
    assert set(cell.params) == {"flag", "data", "old"}  # old may stay unassigned: it comes in
    assert "err" not in cell.results and "v" not in cell.results
    assert {"old", "y", "found", "caught", "inner"} <= set(cell.results)
    out = dict(zip(cell.results, cell.make(ns)(*[ns[p] for p in cell.params])))
    assert out["old"] == 5 and out["found"] == [4, 6] and out["y"] == 6 and out["caught"] == "ZeroDivisionError"
    assert out["inner"](1) == 4
