"""``%%trn compile`` through a real IPython shell, and the cell rewrite behind it."""

from __future__ import annotations

import pytest
import torch
from IPython.core.error import UsageError

from trn_notebook.session import CellRewriteError, rewrite_cell

from .helpers import compile_cell, line

pytestmark = pytest.mark.usefixtures("clean")


# -- the cell rewrite ------------------------------------------------------------------------------
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
    second = compile_cell(ip, "--name cellA --as cellA_card", body)
    assert second.success
    assert len(compiler.compile_log.snapshot()) == n_records  # nothing compiled again
    assert "reused" in capsys.readouterr().out
    card = ip.user_ns["cellA_card"]  # --as: the card the cell showed, for a check cell
    assert card.name == "cellA" and card.reused and card.params == ("cx", "cw")


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


def test_explain_after_reset_says_nothing_is_compiled_and_works_again(ip, compiler):
    ip.user_ns["rx"] = torch.ones(2, 4, device="neuron")
    assert compile_cell(ip, "--name before_reset", "ry = rx.exp()").success
    line(ip, "reset")  # drops compiled graphs, their bundles and the compiled cells together
    with pytest.raises(UsageError, match="nothing compiled yet"):
        line(ip, "explain")  # used to pick the forgotten cell and fail "no neuron compilation recorded"
    assert compile_cell(ip, "--name after_reset", "ry = rx.exp()").success
    assert "exp" in line(ip, "explain --stage ir").text()
    line(ip, "reset --keep-compiled")  # compiled graphs kept: the cell still explains
    assert "exp" in line(ip, "explain after_reset --stage ir").text()


def test_cache_dir_and_clear(ip, compiler, tmp_path):
    import os

    old = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    try:
        out = line(ip, f"cache --dir {tmp_path} --clear")
        assert str(tmp_path) in out.text() and "removed 0 entries" in out.text()
        assert compiler.disk_cache.cache_dir() == tmp_path
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
    assert snap.policy == "pow2:64-256" and snap.padded == {128: 2}
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
