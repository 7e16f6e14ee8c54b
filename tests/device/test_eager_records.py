"""Eager records folded at read time (device/eager/records.py) change no figure (issue 33's rule).

The same fixed workload (a training step with views, native ops, foreach AdamW, a CPU fallback, a
transfer and a sync) runs twice from a fresh device: once charging every op as it runs (the immediate
path, forced by a clock observer, as a profiler sets one) and once appending records that are folded
when read. Every modeled figure (the placement log without its wall seconds, the clocks without wall,
the event timeline) must be identical, and the wall seconds must add up: a dropped or double-counted
record fails one of the three.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from trn_notebook import state
from trn_notebook.device.clocks import clocks
from trn_notebook.device.eager import records as eager_records
from trn_notebook.device.placement import placement_log

N = "neuron"


def _workload() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4)).to(N)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(8, 16).to(N)  # a transfer
    for _ in range(3):
        out = model(x.view(2, 4, 16).transpose(0, 1).reshape(8, 16))  # host-only views
        loss = out.sum()
        loss.backward()  # the backward's ops are appended from autograd's device thread
        opt.step()
        opt.zero_grad(set_to_none=True)
    q, _ = torch.linalg.qr(torch.eye(4).to(N))  # a CPU fallback (charged immediately)
    assert math.isfinite(loss.item())  # a sync point
    del q


def _figures(observer: Any) -> tuple[dict[str, tuple[Any, ...]], Any, list[tuple[Any, ...]], float, float]:
    state.reset(compiled=False)
    clocks.observer = observer
    try:
        _workload()
    finally:
        clocks.observer = None
    snap = placement_log.snapshot()
    place = {k: (e.category, e.calls, e.device_s, e.h2d, e.d2h, e.source) for k, e in snap.items()}
    clk = clocks.snapshot()
    modeled = (clk.sim_host_s, clk.sim_device_s, clk.device_free_at_s, clk.sync_points, clk.launches)
    events = [(e.kind, e.name, e.start_s, e.duration_s, e.host_s, e.nbytes) for e in clocks.state.events.snapshot()]
    charged_wall = sum(e.host_s for e in snap.values() if e.category != "host_only")
    return place, modeled, events, clk.wall_s, charged_wall


def test_folded_records_give_exactly_the_immediate_figures(fresh_device):
    launches: list[str] = []
    immediate = _figures(lambda kind, name, *_: launches.append(name) if kind == "op" else None)
    folded = _figures(None)
    assert not eager_records.pending
    assert folded[0] == immediate[0]  # every op's calls, modeled seconds, bytes and source line
    assert folded[1] == immediate[1]  # modeled host and device clocks, syncs, launches
    assert folded[2] == immediate[2]  # the timeline, event by event
    assert folded[1][4] == len(launches) > 0  # as many launches as the immediate path reported
    for wall, charged in (immediate[3:], folded[3:]):  # clocks' wall == the charged ops' wall in the log
        assert math.isclose(wall, charged, rel_tol=1e-9)


def test_a_read_sees_every_op_before_it(fresh_device):
    a = torch.ones(4, 4, device=N)
    a + a  # first call: charged immediately (its source line is captured)
    before = (placement_log.snapshot()["add"].calls, clocks.snapshot().launches)
    for _ in range(5):
        a + a
        a.view(16)
    assert eager_records.pending  # appended, not yet folded
    assert placement_log.snapshot()["add"].calls == before[0] + 5
    assert clocks.snapshot().launches == before[1] + 5
    assert placement_log.snapshot()["view"].calls == 5
    assert not eager_records.pending


def test_the_buffer_is_bounded(fresh_device):
    a = torch.ones(2, device=N)
    for _ in range(eager_records.CAPACITY + 10):
        a.view(2)
    assert len(eager_records.pending) < eager_records.CAPACITY
    assert placement_log.snapshot()["view"].calls == eager_records.CAPACITY + 10
