"""``%%trn profile`` through a real IPython shell, and the timeline widget's data."""

from __future__ import annotations

import json

import pytest
import torch
from IPython.core.error import UsageError
from IPython.testing import globalipapp

from trn_notebook.magics import render
from trn_notebook.widgets.timeline import TimelineWidget

pytestmark = pytest.mark.usefixtures("fresh_device")


@pytest.fixture(scope="module")
def ip():
    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "trn_notebook")
    yield shell
    shell.run_line_magic("unload_ext", "trn_notebook")


@pytest.fixture(autouse=True)
def clean(ip):
    render.prefer_widgets = False
    torch.set_default_device("cpu")
    ip.run_cell("import torch\nx = torch.randn(32, 32).to('neuron')")
    yield
    render.prefer_widgets = True
    torch.set_default_device("cpu")


CELL = "y = torch.tanh(x @ x)\nv = y.sum().item()\n"


def test_cell_magic_profiles_steps_with_cell_lines(ip, tmp_path):
    path = tmp_path / "cell.json"
    result = ip.run_cell(f"%%trn profile --steps 3 --warmup 1 --save {path}\n{CELL}")
    assert result.success, result.error_in_exec
    prof = ip.user_ns["_trn_profile"]
    s = prof.summary()
    row = s.syncs[s.syncs.reason == ".item()"].iloc[0]
    assert row["count"] == 3  # the warmup run is not profiled
    assert row["source"].startswith("cell [") and row["source"].endswith("line 3")  # line 1 is %%trn
    assert row["code"] == "v = y.sum().item()"
    top = s.top_lines.iloc[0]
    assert top.source.endswith("line 2") and top.code == "y = torch.tanh(x @ x)"
    saved = json.loads(path.read_text())
    steps = [e for e in saved["traceEvents"] if e.get("name", "").startswith("%%trn profile step")]
    assert len(steps) == 3


def test_raising_cell_keeps_partial_trace_and_fails(ip):
    result = ip.run_cell(f"%%trn profile --steps 2\n{CELL}raise ValueError('boom')\n")
    assert not result.success and isinstance(result.error_in_exec, ValueError)
    prof = ip.user_ns["_trn_profile"]
    assert prof.partial and prof.summary().findings[0].startswith("PARTIAL")


def test_cpu_only_cell_says_to_select_the_device(ip, capsys):
    result = ip.run_cell("%%trn profile\nz = torch.ones(3).sum()\n")
    assert result.success
    assert ip.user_ns["_trn_profile"].records == 0


def test_bad_options_are_usage_errors(ip):
    with pytest.raises(UsageError, match="positive integer"):
        ip.run_cell_magic("trn", "profile --steps 0", CELL)
    with pytest.raises(UsageError, match=r"\.json"):
        ip.run_cell_magic("trn", "profile --save out.txt", CELL)
    with pytest.raises(UsageError, match="cell mode"):
        ip.run_line_magic("trn", "profile")


def _many_events(n_steps: int):
    import trn_notebook

    x = torch.randn(8, 8).to("neuron")
    with trn_notebook.profile() as result:
        for _ in range(n_steps):
            x = torch.tanh(x)
        x.sum().item()
    return result


def test_widget_downsamples_and_answers_clicks(monkeypatch):
    from trn_notebook.widgets import timeline

    monkeypatch.setattr(timeline, "MAX_EVENTS", 300)  # the rule, at a size a test runs quickly
    result = _many_events(800)
    w = TimelineWidget(result.trace)
    assert w.total_events > 300 and len(w.events) == 300
    device = w.lanes.index("device: eager ops")
    assert sum(b[3] for b in w.bins[device]) >= 800  # every event is in a bin
    assert len(json.dumps([w.events, w.bins, w.memory])) < 2_000_000
    span = w.span[1]
    w.window = [0.0, span / 100]  # zoom in: fewer events, all individual
    assert 0 < len(w.events) < 300
    sent = []
    w.send = sent.append  # type: ignore[method-assign]
    eid = next(e[0] for e in w.events if e[1] == device)
    w._dispatch(w, {"type": "select", "id": eid}, None)
    detail = sent[-1]["detail"]
    assert detail["op"] == "aten::tanh" and detail["modeled_us"] > 0 and detail["shapes"] == [[8, 8]]
    assert "torch.tanh(x)" in detail["code"]
    w._dispatch(w, {"type": "select", "id": -5}, None)
    assert sent[-1]["type"] == "error"
    html = w.fallback_html()
    assert "wait: .item()" in html and "torch.tanh" in html.replace("&#x27;", "'")
