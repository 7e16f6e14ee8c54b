"""The three clocks, sync points, launch blocking and adaptive eager fusion."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.device import clocks, override
from trn_notebook.device.costmodel import get_cost_constants, set_cost_constants

N = "neuron"


def _run_chain(n: int = 10) -> torch.Tensor:
    x = torch.ones(32, 32, device=N)
    for _ in range(n):
        x = x * 1.0001 + 0.5
    return x


def test_device_queue_runs_ahead_until_a_sync_point(fresh_device):
    x = _run_chain()
    before = clocks.snapshot()
    assert before.device_free_at_s > before.sim_host_s  # the host ran ahead of the device
    x.sum().item()
    after = clocks.snapshot()
    assert after.sim_host_s >= after.device_free_at_s - 1e-12
    assert after.sync_points == before.sync_points + 1


def test_launch_blocking_makes_every_op_a_sync_point(fresh_device):
    with override(launch_blocking=True):
        _run_chain(5)
    assert clocks.snapshot().sync_points >= 10


def test_adaptive_fusion_groups_launches_and_lowers_modeled_time(fresh_device):
    _run_chain(20)
    torch.neuron.synchronize()
    plain = clocks.snapshot().sim_device_s
    clocks.reset()
    with override(eager_fusion=True):
        _run_chain(20)
        torch.neuron.synchronize()
    fused = clocks.snapshot()
    assert fused.fused_groups >= 1
    assert fused.sim_device_s < plain / 5  # 40 launches collapse into a few
    assert fused.launches == fused.fused_groups < 40  # ops joining a group add no launch


def test_deterministic_algorithms_turn_fusion_off(fresh_device):
    torch.use_deterministic_algorithms(True)
    try:
        with override(eager_fusion=True):
            _run_chain(5)
    finally:
        torch.use_deterministic_algorithms(False)
    assert clocks.snapshot().fused_groups == 0


def test_a_print_ends_a_fusion_group(fresh_device, capsys):
    with override(eager_fusion=True):
        x = _run_chain(3)
        print(x[0, 0])
        _run_chain(3)
    assert clocks.snapshot().fused_groups == 2


def test_cost_constants_are_overridable(fresh_device):
    original = get_cost_constants()
    try:
        set_cost_constants(eager_launch_s=1.0)
        torch.ones(4, device=N).exp()
        assert clocks.snapshot().sim_device_s >= 1.0
    finally:
        set_cost_constants(**{k: getattr(original, k) for k in original.__dataclass_fields__})


def test_chrome_trace_has_device_ops_and_syncs(fresh_device):
    torch.ones(4, device=N).exp().sum().item()
    trace = clocks.chrome_trace()["traceEvents"]
    names = {e["name"] for e in trace}
    assert "exp" in names and any(n.startswith("sync:") for n in names)


def test_save_trace_writes_perfetto_json(fresh_device, tmp_path):
    import json

    import trn_notebook

    torch.ones(8, device=N).exp().sum().item()
    path = trn_notebook.save_trace(tmp_path / "trace.json")
    events = json.loads(path.read_text())["traceEvents"]
    assert any(e["name"] == "exp" and e["ph"] == "X" and e["dur"] > 0 for e in events)


def test_fallback_modeled_cost_is_modeled_not_measured(fresh_device):
    """A fallback's modeled cost is copies + modeled host compute: identical on every call, first included."""
    from trn_notebook.device import costmodel
    from trn_notebook.device.placement import placement_log

    x = torch.randn(128, 128, device="neuron")
    per_call = []
    for _ in range(3):
        seen = placement_log.snapshot().get("sort")
        before = seen.device_s if seen is not None else 0.0
        x.sort(dim=-1)
        per_call.append(placement_log.snapshot()["sort"].device_s - before)
    assert per_call[0] == pytest.approx(per_call[1]) == pytest.approx(per_call[2])
    host = x.cpu()
    vals, idx = host.sort(dim=-1)
    assert per_call[0] >= costmodel.fallback_seconds("sort", [host], [vals, idx])  # (+ out= buffers it read)
    assert per_call[0] > costmodel.transfer_seconds(host.nbytes) + costmodel.transfer_seconds(vals.nbytes + idx.nbytes)


def test_hot_loop_fallback_costs_more_than_a_setup_fallback(fresh_device):
    """The lesson of notebook 02, from the cost model: 20 sorts in a loop outweigh one QR at setup."""
    from trn_notebook.device.placement import placement_log

    x = torch.randn(256, 256, device="neuron")
    w, _ = torch.linalg.qr(torch.randn(256, 256, device="neuron"))
    for _ in range(20):
        x, _ = torch.tanh(x @ w).sort(dim=-1)
    snap = placement_log.snapshot()
    assert snap["sort"].device_s > 3 * snap["linalg_qr"].device_s > 0
