"""HolisticTraceAnalysis reads our merged trace: its breakdowns agree with ``profile_table``.

A real neuron program (eager forward/backward, a compiled graph, a ``.item()`` and a ``.cpu()``) is
profiled with ``torch.profiler``; the exported trace is fed, unchanged, to HTA's ``TraceAnalysis``.
HTA's ns rounding is turned off so that its sums can be compared with ours to float precision.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from hta.common.trace_file import create_rank_to_trace_dict
from hta.trace_analysis import TraceAnalysis
from torch.profiler import ProfilerActivity, profile

from trn_notebook.profiling import kineto, load_trace, profile_table, validate_chrome_trace
from trn_notebook.profiling.merge import PID

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def _program(x, w, f):
    y = (x @ w).relu().sum()
    y.backward()
    z = f(x, w).sum().item()
    return y.detach().cpu(), z


def _profiled(tmp_path, monkeypatch):
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    torch.manual_seed(0)
    xc, wc = torch.randn(16, 16), torch.randn(16, 16)
    x, w = xc.to("neuron"), wc.to("neuron").requires_grad_()
    f = torch.compile(lambda a, b: (a @ b).relu() * 2, backend="neuron", fullgraph=True)
    f(x, w)  # compiled before the window: the window holds launches only
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(2):
            y, z = _program(x, w, f)
    wcc = wc.clone().requires_grad_()
    assert torch.allclose(y, (xc @ wcc).relu().sum(), rtol=1e-5)
    assert z == pytest.approx(((xc @ wc).relu() * 2).sum().item(), rel=1e-5)
    d = tmp_path / "traces"
    d.mkdir()
    path = d / "rank0.json"
    prof.export_chrome_trace(str(path))
    return prof, path


@pytest.mark.slow  # a cold compile plus HTA's parsing: ~4 s
def test_hta_breakdowns_match_profile_table(tmp_path, monkeypatch):
    prof, path = _profiled(tmp_path, monkeypatch)
    trace = json.loads(path.read_text())
    assert validate_chrome_trace(trace) == [] and load_trace(trace)  # still a valid Perfetto / reader trace
    assert trace["deviceProperties"][0]["name"].startswith("neuron:0 (modeled")
    assert trace["deviceProperties"][0]["totalGlobalMem"] > 0

    table = profile_table(prof).set_index("op")
    ta = TraceAnalysis(trace_dir=str(path.parent))

    _, kernels = ta.get_gpu_kernel_breakdown(visualize=False, duration_ratio=1.0, num_kernels=10_000)
    kernels = kernels.set_index("name")
    eager = [n for n in kernels.index if n.startswith("aten::")]
    assert {"aten::mm", "aten::relu", "aten::sum", "aten::threshold_backward"} <= set(eager)
    for name in eager:  # each eager kernel: same launches and modeled time as the op's row
        row, k = table.loc[name], kernels.loc[name]
        assert round(k["sum (us)"] / k["mean (us)"]) == row.device_launches, name
        assert k["sum (us)"] == pytest.approx(row.self_device_ms * 1e3, rel=1e-6, abs=1e-3), name
    memcpy = [n for n in kernels.index if n.startswith("Memcpy")]
    assert set(kernels.loc[memcpy, "kernel_type"]) == {"MEMORY"} and "Memcpy DtoH (neuron -> host)" in memcpy

    # the compiled graph: HTA's device-side range == the CompiledFunction row; its kernels fit inside
    graphs = ta.get_gpu_user_annotation_breakdown(visualize=False).set_index("name")
    (graph,) = [n for n in graphs.index if n.startswith("graph:")]
    compiled = table.loc["CompiledFunction"]
    assert graphs.loc[graph, "sum (us)"] == pytest.approx(compiled.self_device_ms * 1e3, rel=1e-6)
    assert round(graphs.loc[graph, "sum (us)"] / graphs.loc[graph, "mean (us)"]) == compiled.device_launches == 2
    in_graph = kernels.loc[[n for n in kernels.index if n.startswith("kernel ")], "sum (us)"].sum()
    assert 0 < in_graph <= graphs.loc[graph, "sum (us)"]

    # temporal: the compute queue never overlaps itself, so compute time is the plain sum of kernels
    (t,) = ta.get_temporal_breakdown(visualize=False).to_dict("records")
    compute = kernels[kernels.kernel_type == "COMPUTATION"]["sum (us)"].sum()
    assert t["compute_time(us)"] == pytest.approx(compute, rel=1e-6)
    eager_ms = table.loc[eager, "self_device_ms"].sum()
    assert t["compute_time(us)"] == pytest.approx(eager_ms * 1e3 + in_graph, rel=1e-6)
    assert t["compute_time(us)"] <= table.self_device_ms.sum() * 1e3 + 1e-3
    parts = t["idle_time(us)"] + t["compute_time(us)"] + t["non_compute_time(us)"]
    assert parts == pytest.approx(t["kernel_time(us)"], rel=1e-6) and t["idle_time(us)"] > 0

    # idle time: per stream, categorised from the modeled launch (same clock as the device)
    idle, _ = ta.get_idle_time_breakdown(visualize=False)
    assert set(idle.stream) == {kineto.STREAM_COMPUTE, kineto.STREAM_DMA}
    assert set(idle.idle_category) <= {"host_wait", "kernel_wait", "other"}
    assert idle[idle.stream == kineto.STREAM_COMPUTE].idle_time.sum() > 0
    assert "host_wait" in set(idle[idle.stream == kineto.STREAM_COMPUTE].idle_category)  # after each .item()

    # HTA's default whole-µs rounding (ts up, end down) moves each kernel by < 2 µs, nothing more
    monkeypatch.delenv("HTA_DISABLE_NS_ROUNDING")
    _, rounded = TraceAnalysis(trace_dir=str(path.parent)).get_gpu_kernel_breakdown(
        visualize=False, duration_ratio=1.0, num_kernels=10_000
    )
    rounded = rounded.set_index("name")
    for name in eager:
        n = table.loc[name].device_launches
        assert abs(rounded.loc[name, "sum (us)"] - kernels.loc[name, "sum (us)"]) <= 2 * n, name


def test_device_events_follow_kineto_schema(tmp_path, monkeypatch):
    _, path = _profiled(tmp_path, monkeypatch)
    events = json.loads(path.read_text())["traceEvents"]
    device = [e for e in events if e.get("pid") == PID and "stream" in (e.get("args") or {})]
    assert Counter(e["cat"] for e in device).keys() == {"kernel", "gpu_memcpy"}
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == kineto.CAT_RUNTIME}
    cpu_ext = {e["args"]["External id"] for e in events if e.get("cat") == "cpu_op" and "External id" in e["args"]}
    for e in device:  # every device event: one modeled launch, same correlation and External id, not after it
        launch = launches[e["args"]["correlation"]]
        assert launch["args"].get("External id") == e["args"].get("External id")
        assert e["args"]["External id"] in cpu_ext and e["ts"] >= launch["ts"] - 1e-3
    flows = [e for e in events if e.get("cat") == "ac2g"]
    assert {e["id"] for e in flows if e["ph"] == "s"} == {e["id"] for e in flows if e["ph"] == "f"} == set(launches)
    # graphs are device-side ranges, not kernels (HTA counts kernels by their stream)
    assert all("stream" not in e["args"] for e in events if e.get("cat") == kineto.CAT_GRAPH)
    # Perfetto nests X events of one thread: the launches sit inside the host lane's dispatch runs
    assert _partial_overlaps([e for e in events if e.get("pid") == PID and e["ph"] == "X"]) == []


def _partial_overlaps(events):
    lanes = {}
    for e in events:
        lanes.setdefault(e["tid"], []).append((e["ts"], -(e["ts"] + e["dur"]), e["name"]))
    bad = []
    eps = 2e-3  # µs: timestamps are written to the ns, and ts and dur are rounded separately (1 ns slips)
    for items in lanes.values():
        stack = []
        for ts, neg_end, name in sorted(items):
            while stack and stack[-1][0] <= ts + eps:
                stack.pop()
            if stack and -neg_end > stack[-1][0] + eps:
                bad.append((name, stack[-1][1]))
            stack.append((-neg_end, name))
    return bad


def test_rank_of_a_distributed_trace_is_found_by_hta(tmp_path):
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=3, world_size=4)
    try:
        x = torch.ones(4, 4, device="neuron")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            (x * 2).sum().item()
        path = tmp_path / "r3.json"
        prof.export_chrome_trace(str(path))
    finally:
        dist.destroy_process_group()
    trace = json.loads(path.read_text())
    assert trace["distributedInfo"]["rank"] == 3 and trace["distributedInfo"]["world_size"] == 4
    ok, ranks = create_rank_to_trace_dict([str(path)])
    assert ok and ranks == {3: str(path)}
