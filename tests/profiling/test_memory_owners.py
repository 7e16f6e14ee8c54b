"""Memory snapshot owners by tensor identity (parameters, gradients, optimizer state), else guessed or unrecorded."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from trn_notebook.device.memory.allocator import round_size
from trn_notebook.device.memory.runtime import block_address
from trn_notebook.profiling.memory_owners import IDENTIFIED, UNRECORDED

pytestmark = pytest.mark.usefixtures("fresh_device")


def _block_bytes(tensors):
    return sum(round_size(t.untyped_storage().nbytes()) for t in tensors)


def _live(snap):
    return {b["address"]: b for s in snap["segments"] for b in s["blocks"] if b["state"] != "inactive"}


def test_weights_grads_and_optimizer_state_are_identified_whatever_allocated_them():
    mem = torch.neuron.memory
    mem._record_memory_history(enabled=None)
    # built on the device directly (no Module.to), its first step before recording: the old phase guess
    # called all of these "activations"
    model = nn.Sequential(nn.Linear(96, 384), nn.GELU(), nn.Linear(384, 96)).to("neuron")
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randn(8, 96, device="neuron")).sum().backward()
    opt.step()
    before = torch.randn(300, 7, device="neuron")  # no parameter, allocated before recording: unrecorded
    mem._record_memory_history(max_entries=10_000, clear_history=True)
    try:
        act = model[0](torch.randn(16, 96, device="neuron"))  # an activation allocated while recording: guessed
        snap = mem._snapshot()
        params = list(model.parameters())
        state = [v for s in opt.state.values() for v in s.values() if v.device.type == "neuron"]
        assert len(state) == 2 * len(params)  # exp_avg and exp_avg_sq (the step counters live on the CPU)
        blocks = _live(snap)
        # only this test's blocks: modules other tests left alive are (rightly) parameters too
        ours = {block_address(t) for t in [*params, *(p.grad for p in params), *state]}
        totals = mem.owner_totals({"segments": [{"blocks": [blocks[a] for a in ours]}]})
        assert totals["parameters"]["bytes"] == totals["parameters"][IDENTIFIED] == _block_bytes(params)
        assert totals["gradients"]["bytes"] == totals["gradients"][IDENTIFIED] == _block_bytes(p.grad for p in params)
        assert totals["optimizer state"]["bytes"] == totals["optimizer state"][IDENTIFIED] == _block_bytes(state)
        assert blocks[block_address(before)]["owner_source"] == UNRECORDED
        b = blocks[block_address(act)]
        assert (b["owner"], b["owner_source"]) == ("activations", "guessed") and b["frames"]
        # the widget shows the snapshot's figures by the same rule, and says which were identified
        from trn_notebook.widgets.memory_snapshot import MemorySnapshotWidget

        w = MemorySnapshotWidget(snap)
        everything = mem.owner_totals(snap)
        for owner, nbytes, n, identified, guessed, unrecorded in w.by_owner:
            row = everything[owner]
            assert [nbytes, n, identified, guessed, unrecorded] == [
                row["bytes"], row["blocks"], row["identified"], row["guessed"], row["unrecorded"]
            ]  # fmt: skip
        assert {r[0] for r in w.by_owner} >= {"parameters", "gradients", "optimizer state", "activations"}
        assert "identified" in w.fallback_html()
        del before, act
    finally:
        mem._record_memory_history(enabled=None)


def test_block_address_is_the_storage_block_and_none_off_device():
    x = torch.ones(64, 64, device="neuron")
    addr = block_address(x)
    assert addr is not None and block_address(x[3:].t()) == addr  # views share their base's block
    assert block_address(torch.ones(4)) is None and block_address(torch.empty(4, device="meta")) is None
    assert block_address(torch.empty(0, device="neuron")) is None
    assert addr != block_address(torch.ones(64, 64, device="neuron"))


def test_a_gradient_made_on_the_autograd_thread_is_sited_at_its_backward_call():
    mem = torch.neuron.memory
    mem._record_memory_history(max_entries=10_000, clear_history=True)
    try:
        lin = nn.Linear(64, 64, device="neuron")
        lin(torch.randn(4, 64, device="neuron")).sum().backward()  # BACKWARD_LINE
        blocks = _live(mem._snapshot())
        frames = blocks[block_address(lin.weight.grad)]["frames"]
        assert blocks[block_address(lin.weight.grad)]["owner"] == "gradients"
        assert (
            frames and frames[0]["name"] == "test_a_gradient_made_on_the_autograd_thread_is_sited_at_its_backward_call"
        )
        line = next(i for i, s in enumerate(Path(__file__).read_text().splitlines(), 1) if "# BACKWARD_LINE" in s)
        assert frames[0]["line"] == line
    finally:
        mem._record_memory_history(enabled=None)


def test_a_module_or_optimizer_whose_init_never_ran_does_not_break_the_snapshot():
    class NoInit(nn.Module):
        def __init__(self) -> None:  # forgets super().__init__(): no _parameters
            pass

    class NoState(torch.optim.Optimizer):
        def __init__(self) -> None:  # no state dict either
            pass

    broken = (NoInit(), NoState())
    kept = nn.Linear(8, 8, device="neuron")
    mem = torch.neuron.memory
    mem._record_memory_history(max_entries=1_000, clear_history=True)
    try:
        blocks = _live(mem._snapshot())
        for p in kept.parameters():
            assert (blocks[block_address(p)]["owner"], blocks[block_address(p)]["owner_source"]) == (
                "parameters",
                IDENTIFIED,
            )
    finally:
        mem._record_memory_history(enabled=None)
    del broken
