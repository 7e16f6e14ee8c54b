"""Under the stand-in torch_neuronx every magic, widget, the status payload and the report render in a real
IPython shell, with TorchNeuron's (canned) answers and "not measured" / "n/a" / "simulator-only" elsewhere.

One subprocess renders everything (the stand-in has a ``neuron`` device computing with the simulator's kernels,
``FAKE_NEURONX_DEVICE=1``, while its facts are canned): a view that showed the simulator's own figures — the
ops it really ran, the memory it really holds — would fail these checks.
"""

from __future__ import annotations

import json

import pytest

from .fakehw import run

PROBE = r"""
import json, pathlib
import torch, torch_neuronx
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

sh = InteractiveShell.instance(colors="nocolor")
sh.run_cell("%load_ext trn_notebook")
sh.run_cell("import torch, torch_neuronx")
out = {}


def render(obj):
    # What a kernel sends: every MIME type of the object (a widget: its view plus the static fallbacks).
    data, _ = sh.display_formatter.format(obj)
    assert "text/plain" in data, data.keys()
    return data.get("text/html", "") + "\n" + data["text/plain"]


def line(name, text):
    out[name] = render(sh.run_line_magic("trn", text))


def cell(name, text, body):
    with capture_output() as cap:
        value = sh.run_cell_magic("trn", text, body)
    shown = [render(value)] if value is not None else []
    shown += [o.data.get("text/plain", "") + o.data.get("text/html", "") for o in cap.outputs]
    out[name] = "\n".join(shown)


def refused(name, text):
    try:
        sh.run_line_magic("trn", text)
    except UsageError as exc:
        out[name] = str(exc)
    else:
        out[name] = "NOT REFUSED"


neff = pathlib.Path.cwd() / "neff" / "MODULE_1"
neff.mkdir(parents=True)
(neff / "graph.neff").write_bytes(b"0123456789")

line("device", "device neuron")
refused("device_chip", "device neuron --chip trn3")
sh.run_cell("x = torch.ones(4, 4)\nkeep = x * 3")  # real tensors on neuron: the simulator's log sees ops, the views must not
out["x_device"] = str(sh.user_ns["x"].device)
line("status", "status")
line("ops", "ops")
line("memory", "memory")
line("memory_snapshot", "memory --snapshot")
line("cache", "cache")
refused("cache_clear", "cache --clear")
line("cache_export", "cache --export b.json")
line("shapes", "shapes")
line("explain", "explain")
line("timeit", "timeit -n 2 -r 2 x + 1")
line("help", "help")
line("port_check", "port-check")
cell("eager", "eager", "y = x + 1\ntorch_neuronx._executed['aten::add.Tensor'] += 5  # what the runtime would count\n")
cell("compile", "compile", "z = x.sin()\n")
out["compiled_by_torchneuronx"] = len(torch_neuronx.compiled_graphs)
from trn_notebook import compiler
out["simulator_compile_log"] = len(compiler.compile_log.snapshot())
cell("profile", "profile", "w = x.cos()\n")
cell("ranks", "ranks 2", "v = 1\n")
line("report", "report")
line("dashboard", "dashboard")

from trn_notebook.magics import render as magic_render
magic_render.prefer_widgets = False
for name, text in (("ops_table", "ops"), ("memory_table", "memory"), ("cache_table", "cache"),
                   ("dashboard_table", "dashboard"), ("memory_reset_peak", "memory --reset-peak --empty-cache")):
    line(name, text)
magic_render.prefer_widgets = True

from trn_notebook import widgets
from trn_notebook.facts.status import status_payload
from trn_notebook.facts.status import StatusPayload

placement = widgets.PlacementView()
out["placement_rows"] = sorted(r["op"] for r in placement.rows)
out["placement_measured"] = placement.measured
out["placement_totals"] = placement.totals
cache = widgets.CacheView()
out["cache_graphs"] = [g["graph_name"] for g in cache.graphs]
out["cache_entries"] = cache.disk_entries
out["cache_simulated"] = cache.simulated
memory = widgets.MemoryView(live=True)
out["memory_counters"] = memory.counters
out["memory_timeline"] = len(memory.timeline)
out["memory_poll"] = memory.poll()
out["w_memory"] = render(memory)
memory.close()
snapshot = widgets.MemorySnapshotWidget()
out["snapshot_note"] = snapshot.note
dashboard = widgets.Dashboard()
for name, w in (("w_placement", placement), ("w_cache", cache), ("w_snapshot", snapshot),
                ("w_tuner", widgets.ShapeTuner()), ("w_dashboard", dashboard)):
    out[name] = render(w)
dashboard.close()
payload = status_payload()
out["payload"] = payload
out["payload_keys_ok"] = set(payload) == set(StatusPayload.__annotations__)
out["status_json"] = json.dumps(payload)  # the comm sends it as JSON

line("ops_reset", "ops --reset")
line("reset", "reset")
out["after_reset"] = torch_neuronx.get_executed_ops()
print("RESULT" + json.dumps(out, default=str))
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    stdout = run(PROBE, tmp_path_factory.mktemp("fakehw_views"), fake=True, device=True)
    return json.loads(stdout.split("RESULT", 1)[1])


LIVE = "TorchNeuron (torch_neuronx 2.14.0+fake)"


@pytest.mark.slow
def test_device_card_says_which_backend_is_live_and_refuses_simulator_options(rendered):
    assert LIVE in rendered["device"] and "Trainium2 (fake)" in rendered["device"] and "24.00 GiB" in rendered["device"]
    assert rendered["x_device"] == "neuron:0"
    assert "simulator-only" in rendered["device_chip"] and "--chip" in rendered["device_chip"]


@pytest.mark.slow
def test_status_memory_and_payload_show_torchneuron_figures(rendered):
    status = rendered["status"]
    assert "3.00 MiB of 24.00 GiB" in status and LIVE in status and "n/a hits, n/a misses" in status
    p = rendered["payload"]
    assert rendered["payload_keys_ok"] and p["label"] == "neuron:0 Trainium2 (fake) (TorchNeuron)"
    assert p["memory_allocated"] == 3 << 20 and p["memory_capacity"] == 24 << 30  # canned, not the simulator's
    assert p["fallback_ops"] == 1 and p["cache_hits"] == "n/a" and "cache n/a" in p["text"]
    memory = rendered["memory"]
    assert "3.00 MiB" in memory and "5.00 MiB" in memory and "simulator-only" in memory
    assert "peaks reset" in rendered["memory_reset_peak"] and "not reported" in rendered["memory_reset_peak"]
    assert "simulator-only" in rendered["memory_table"]
    # the canned memory_stats() has no segment.* keys: "not measured", never a made-up "0 segments"
    table = rendered["memory_table"]
    assert "not measured segments" in table and "0 segments" not in table and "0 OOMs" in table
    assert rendered["memory_counters"]["allocated"] == 3 << 20 and rendered["memory_timeline"] == 0
    assert rendered["memory_poll"] == []


@pytest.mark.slow
def test_placement_views_show_executed_ops_with_costs_not_measured(rendered):
    for key in ("ops", "ops_table", "w_placement"):
        text = rendered[key]
        assert "_linalg_svd" in text and "not measured" in text, key
        assert "mul" not in text and "fill_" not in text, key  # the simulator's own log stays out of it
    assert rendered["placement_rows"] == ["_linalg_svd", "add.Tensor", "mm"]
    assert rendered["placement_measured"] is False
    assert rendered["placement_totals"]["modeled_ms"] == "not measured"
    assert rendered["placement_totals"]["calls"] == 12  # 7 canned + the 5 the eager cell added
    assert "cleared" in rendered["ops_reset"]


@pytest.mark.slow
def test_cache_views_list_the_neff_directory_and_never_clear_it(rendered):
    assert "NEFF cache:" in rendered["cache_table"] and "MODULE_1" in rendered["cache_table"]
    assert "10 B" in rendered["cache_table"]
    assert "n/a" in rendered["cache"] and rendered["cache_entries"] == 1 and rendered["cache_simulated"] is False
    assert rendered["cache_graphs"] == ["forward"]  # TorchNeuron's dynamo metric of the %%trn compile cell
    assert "belongs to TorchNeuron" in rendered["cache_clear"]
    assert "simulator-only" in rendered["cache_export"]


@pytest.mark.slow
def test_cells_run_on_torchneuron_and_say_what_is_not_measured(rendered):
    eager = rendered["eager"]
    assert "1 distinct, 5 calls" in eager and "native 5" in eager and "not measured" in eager
    assert LIVE in eager
    compiled = rendered["compile"]
    assert "1 forward" in compiled and "not measured" in compiled and "1.000 s" in compiled
    assert rendered["compiled_by_torchneuronx"] == 1 and rendered["simulator_compile_log"] == 0
    assert "measured" in rendered["timeit"] and "n/a" in rendered["timeit"]


@pytest.mark.slow
def test_simulator_only_views_say_so(rendered):
    for key in ("shapes", "explain", "profile", "ranks", "memory_snapshot"):
        assert "simulator-only" in rendered[key] and LIVE in rendered[key], key
    assert "n/a on hardware" in rendered["snapshot_note"] and "n/a on hardware" in rendered["w_snapshot"]
    assert "port-check" in rendered["port_check"] or "ready" in rendered["port_check"]
    assert "%trn" in rendered["help"]


@pytest.mark.slow
def test_report_dashboard_and_reset_under_torchneuron(rendered):
    assert "Trainium hardware" in rendered["report"] and "Trainium2 (fake)" in rendered["report"]
    for key in ("dashboard", "w_dashboard", "dashboard_table"):
        assert "not measured" in rendered[key] and "3.00 MiB" in rendered[key], key
    assert "simulator-only" in rendered["w_memory"] and "Shape" in rendered["w_tuner"]
    assert "torch_neuronx op tracking" in rendered["reset"] and rendered["after_reset"] == {}
