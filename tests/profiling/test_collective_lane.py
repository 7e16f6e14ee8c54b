"""Collectives reach the profile: a lane of their own, on the communication stream, with modeled times."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import trn_notebook
from trn_notebook.device import clocks
from trn_notebook.device.trace.lanes import BY_KEY
from trn_notebook.profiling import kineto
from trn_notebook.profiling.merge import PID

pytestmark = pytest.mark.usefixtures("fresh_device")


@pytest.fixture
def one_rank_group(tmp_path):
    dist.init_process_group("neuron", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_an_all_reduce_and_a_charged_collective_are_events_on_the_comm_stream(one_rank_group):
    t = torch.ones(256, device="neuron")
    with trn_notebook.profile() as result:
        dist.all_reduce(t)
        clocks.collective("all_gather", 2e-3, 0.0, blocking=False)  # a visible one: 1 rank costs 0 on the wire
        (t * 2).sum().item()
    comm = [e for e in result.trace["traceEvents"] if e.get("pid") == PID and e.get("tid") == BY_KEY["comm"].tid]
    names = [e["name"] for e in comm if e.get("ph") == "X"]
    assert names == ["collective all_reduce", "collective all_gather"]
    gather = next(e for e in comm if e.get("name") == "collective all_gather")
    assert gather["args"]["stream"] == kineto.STREAM_COMM and gather["args"]["modeled_us"] == pytest.approx(2000.0)
    assert gather["args"]["blocking"] is False and gather["cat"] == kineto.CAT_KERNEL
    lanes = {e["args"]["name"] for e in result.trace["traceEvents"] if e.get("ph") == "M" and e.get("pid") == PID
             and e.get("name") == "thread_name"}  # fmt: skip
    assert BY_KEY["comm"].label in lanes
