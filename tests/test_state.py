"""One snapshot and one reset over every state owner (trn_notebook.state)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import trn_notebook
from trn_notebook import state
from trn_notebook.facts import bundle as facts
from trn_notebook.facts.simulator import placement_of

N = "neuron"


def test_every_owner_has_snapshot_and_reset(fresh_compiler):
    owners = state.owners()
    assert {"placement_log", "clocks", "allocator", "policy", "compile_log", "shape_log", "compiled_graphs"} <= set(
        owners
    )
    for name, owner in owners.items():
        assert callable(owner.snapshot) and callable(owner.reset), name


def test_snapshots_are_frozen_and_typed(fresh_compiler):
    x = torch.ones(8, 8, device=N)
    y = (x @ x).exp()
    trn_notebook.compile(lambda t: t * 2)(y)
    snap = facts.snapshot()
    entry = snap.placement["mm"]
    assert entry.category == "native" and entry.calls == 1 and entry.device_s > 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.calls = 5  # type: ignore[misc]
    assert snap.clocks.launches >= 2 and not hasattr(snap.clocks, "__getitem__")
    assert snap.memory.counters.allocated >= x.nbytes + y.nbytes
    record = snap.compiles[-1]
    assert record.cache_result == "miss" and record.graph_name == record.graph_name
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.runs = 9  # type: ignore[misc]
    assert snap.compiled_graphs >= 1


def test_aggregations_are_computed_on_the_snapshot(fresh_device):
    a = torch.eye(3).to(N)
    (a + a).sum()
    torch.linalg.inv(a)  # a documented CPU fallback
    snap = facts.snapshot().placement
    p = placement_of(snap)  # the one aggregating type, as every view reads it
    calls = p.calls_by_category
    assert calls["native"] == sum(e.calls for e in snap.values() if e.category == "native")
    assert calls["cpu_fallback"] == snap["linalg_inv_ex"].calls == 1
    assert 0 < p.fallback_share < 1
    assert p.fallback_share == pytest.approx(p.fallback_ms / p.device_ms)
    assert p.device_ms == pytest.approx(1e3 * sum(e.device_s for e in snap.values()))
    assert p.bytes_moved == sum(e.h2d + e.d2h for e in snap.values()) > 0
    assert [op for op, _ in p.fallbacks] == ["aten::linalg_inv_ex"]
    summary = trn_notebook.placement_summary()
    assert summary["calls"] == calls and summary["fallback_share"] == pytest.approx(p.fallback_share)
    assert not hasattr(snap, "calls_by_category")  # aggregations live in one place


def test_reset_clears_what_an_exercise_needs_and_keeps_live_tensors(fresh_compiler):
    trn_notebook.set_op_category("exp", "cpu_fallback", "exercise override")
    x = torch.ones(1024, device=N)
    with pytest.warns(UserWarning):
        x.exp()
    compiled = trn_notebook.compile(lambda t: t + 1)
    compiled(x)
    before = facts.snapshot()
    assert before.placement and before.compiles and before.clocks.launches > 0
    trn_notebook.reset(op_overrides=True)
    after = facts.snapshot()
    assert len(after.placement) == 0 and after.compiles == [] and after.shapes == {}
    assert after.clocks.launches == 0 and after.clocks.sim_device_s == 0
    assert after.memory.counters.allocated >= x.nbytes  # x is alive: its block stays
    assert after.memory.counters.peak_allocated == after.memory.counters.allocated
    stats = torch.neuron.memory_stats()
    assert after.memory.counters.num_frees == 0 and stats["allocation.all.current"] >= 1  # x's block
    assert after.memory.timeline[-1][1] == after.memory.counters.allocated
    del x
    assert torch.neuron.memory_stats()["allocation.all.current"] >= 0
    assert after.op_overrides == {} and after.compiled_graphs == 0
    with pytest.warns(UserWarning, match="fell back"):  # warnings show again after a reset
        torch.linalg.inv(torch.eye(2).to(N))
    y = torch.ones(1024, device=N)
    assert compiled(y).cpu().tolist() == (y + 1).cpu().tolist()  # compiled callables still work


class _Counter:
    def __init__(self) -> None:
        self.n = 1

    def snapshot(self) -> int:
        return self.n

    def reset(self) -> None:
        self.n = 0


def test_register_says_what_each_reset_clears():
    names = {"t_always": True, "t_never": False, "t_compiled": "compiled", "t_overrides": "op_overrides"}
    made = {name: state.register(name, _Counter(), reset=when) for name, when in names.items()}
    try:
        state.reset(compiled=False)
        assert {n: c.n for n, c in made.items()} == {"t_always": 0, "t_never": 1, "t_compiled": 1, "t_overrides": 1}
        state.reset(op_overrides=True)
        assert {n: c.n for n, c in made.items()} == {"t_always": 0, "t_never": 1, "t_compiled": 0, "t_overrides": 0}
        assert facts.snapshot().others["t_never"] == 1
        with pytest.raises(TypeError, match="snapshot"):
            state.register("t_bad", object())
        with pytest.raises(ValueError, match="reset="):
            state.register("t_bad", _Counter(), reset="sometimes")  # type: ignore[arg-type]
    finally:
        for name in names:
            state._registry.pop(name, None)


def test_reset_restarts_graph_names_and_forgets_compiled_cells(fresh_compiler):
    from trn_notebook.session import compile_cell, compiled_cells

    ns = {"x": torch.ones(3, device=N)}
    compile_cell("y = x + 1", ns, name="reset_cell")
    first = facts.snapshot().compiles[-1].graph_name
    assert "reset_cell" in compiled_cells()
    trn_notebook.reset()
    assert compiled_cells() == {} and facts.snapshot().others["graph_names"]["_name_counts"] == {}
    compile_cell("y = x + 1", ns, name="reset_cell")
    assert facts.snapshot().compiles[-1].graph_name == first  # the same name again, not ..._1
