"""%trn reset, %trn port-check and %trn cache --export/--import: each a thin call of the public function."""

from __future__ import annotations

import json

import pytest
import torch
from IPython.core.error import UsageError
from IPython.testing import globalipapp

import trn_notebook


@pytest.fixture(scope="module")
def ip():
    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "trn_notebook")
    yield shell
    shell.run_line_magic("unload_ext", "trn_notebook")


def line(ip, text: str):
    return ip.run_line_magic("trn", text)


def test_reset_clears_what_an_exercise_needs(ip, fresh_device):
    x = torch.ones(8, device="neuron")
    (x * 2).sum()
    assert trn_notebook.placement_summary()["calls"]["native"] > 0
    out = line(ip, "reset")
    assert "placement log" in out.text()
    assert trn_notebook.placement_summary()["calls"].get("native", 0) == 0
    assert x.device.type == "neuron" and float(x.sum()) == 8.0  # live tensors keep their memory


def test_port_check_lists_simulator_only_lines_of_a_file(ip, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import trn_notebook\ntrn_notebook.set_chip('trn3')\nx = 1\n")
    report = line(ip, f"port-check {script}")
    assert not report.ok and "set_chip" in str(report)
    with pytest.raises(UsageError, match="correct form: %trn port-check"):
        line(ip, f"port-check {tmp_path / 'missing.ipynb'}")


def test_cache_export_and_import_need_explicit_trust(ip, fresh_compiler, tmp_path):
    f = torch.compile(lambda a: a * 3 + 1, backend="neuron_sim")
    f(torch.arange(4.0, device="neuron"))
    bundle = tmp_path / "bundle.json"
    assert "exported" in line(ip, f"cache --export {bundle}").text()
    assert json.loads(bundle.read_text())["entries"]
    with pytest.raises(UsageError, match="trust"):
        line(ip, f"cache --import {bundle}")
    with pytest.raises(UsageError, match="--trust only goes with --import"):
        line(ip, "cache --trust")
    assert "imported" in line(ip, f"cache --import {bundle} --trust").text()


def test_path_arguments_that_cannot_work_are_usage_errors_before_any_work(ip, tmp_path, fresh_device):
    # Issue 31 (low): a few %trn arguments reached FileNotFoundError / "[Errno 21] Is a directory: 5".
    missing = tmp_path / "no" / "such"
    with pytest.raises(UsageError, match=r"cannot read the bundle .*nope\.trncache: No such file"):
        line(ip, f"cache --import {tmp_path / 'nope.trncache'} --trust")
    with pytest.raises(
        UsageError, match=r"is not a regular file \(a FIFO, device or directory\); pass the cache bundle"
    ):
        line(ip, f"cache --import {tmp_path} --trust")
    with pytest.raises(UsageError, match=r"cannot write the cache bundle .* does not exist; create it first"):
        line(ip, f"cache --export {missing / 'class.trncache'}")
    ip.user_ns.pop("ran_profiled", None)
    with pytest.raises(UsageError, match=r"--save: cannot write the trace .* does not exist"):
        ip.run_cell_magic("trn", f"profile --save {missing / 't.json'}", "ran_profiled = True")
    assert "ran_profiled" not in ip.user_ns  # refused before the cell ran
    assert line(ip, "status") is not None  # the session goes on
