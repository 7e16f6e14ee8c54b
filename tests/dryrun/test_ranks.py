"""Ranks, dry: fake process group + DeviceMesh('neuron'), FSDP2 / TP / DDP charged per rank, memory by category."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

import trn_notebook
from trn_notebook.distributed.commmodel import collective_seconds
from trn_notebook.planner import Layout, Workload, parse_layouts


def _mlp(width: int = 1024, depth: int = 4) -> torch.nn.Sequential:
    return torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)])


def _fsdp_step(run, reshard: bool = True) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    with torch.device("neuron"):
        m = _mlp()
    for layer in m:
        fully_shard(layer, mesh=run.mesh, reshard_after_forward=reshard)
    fully_shard(m, mesh=run.mesh, reshard_after_forward=reshard)
    opt = torch.optim.AdamW(m.parameters(), foreach=True)
    run.track(m, opt)
    x = torch.randn(512, 1024, device="neuron")
    with run.phase("forward"):
        loss = m(x).sum()
    with run.phase("backward"):
        loss.backward()
    with run.phase("optimizer"):
        opt.step()
    return m, opt


@pytest.mark.slow
def test_fsdp2_over_8_fake_ranks_shards_and_charges_collectives(fresh_device) -> None:
    excepthook = sys.excepthook
    with trn_notebook.dryrun(world_size=8) as run:
        m, _opt = _fsdp_step(run)
        local = m[0].weight._local_tensor
        assert local.shape == (128, 1024) and local.device.type == "neuron"  # one rank's shard, shape-only
    assert not dist.is_initialized()  # the fake group is gone after the run
    assert sys.excepthook is excepthook  # and torch's "[rank0]:" excepthook with it
    kinds = run.ranks.by_kind()
    assert kinds["all_gather"][0] == 8 and kinds["reduce_scatter"][0] == 4  # 4 layers: fwd + bwd gathers
    rec = run.ranks.records[0]
    assert rec.modeled_s == collective_seconds(rec.kind, rec.nbytes, 8, fabric=rec.fabric)[0]  # one model
    assert rec.fabric == "neuronlink"  # 8 ranks: two Trn2 chips
    cats = run.by_category
    assert sum(cats.values()) == run.memory.counters.peak_allocated  # categories partition the peak
    assert cats["collective buffers"] > 0 and cats["parameters"] > 0
    # optimizer state: AdamW's two moments of the local shards (4 x (1024*1024 + 1024) / 8 floats each)
    shard_bytes = 4 * (1024 * 1024 + 1024) // 8 * 4
    final = {k: v for k, v in run.by_category.items()}
    assert final["optimizer state"] in (0, pytest.approx(2 * shard_bytes, rel=0.01))
    text = run.summary()
    assert "ranks: 8" in text and "fake process group" in text and "modeled" in text


def test_reshard_after_forward_off_keeps_unsharded_parameters(fresh_device) -> None:
    peaks = {}
    for reshard in (True, False):
        with trn_notebook.dryrun(world_size=8) as run:
            _fsdp_step(run, reshard)
        peaks[reshard] = run.memory.phase_peaks["forward"]["allocated"]
    assert peaks[False] > peaks[True]  # the unsharded layers stay between forward and backward


@pytest.mark.slow
def test_tp_colwise_rowwise_and_kv_replication_is_stated(fresh_device) -> None:
    from trn_notebook.fidelity.configs import LLAMA_8B

    cfg = LLAMA_8B.config()
    cfg.num_hidden_layers, cfg.vocab_size, cfg.hidden_size, cfg.intermediate_size = 1, 512, 512, 1024
    cfg.num_attention_heads, cfg.num_key_value_heads = 16, 2
    result = trn_notebook.plan(cfg, Workload(batch=1, seq=32), layouts="tp4,tp2xfsdp2+ac")
    table = result.table
    assert list(table.index) == ["tp4", "tp2×fsdp2+ac"]
    assert "K/V heads replicated 2 → 4" in table.loc["tp4", "note"] and "GQA.CONVERT_TO_MHA" in result.text()
    assert (table["step_s"] > 0).all() and table["fits"].all()
    assert result.best == "tp4" or result.best == "tp2×fsdp2+ac"
    assert "modeled" in result.text() and "◀ cheapest that fits" in result.text()
    view = result.widget()  # the plan as bars: one row per layout, from the table
    assert [r["layout"] for r in view.rows] == list(table.index) and view.capacity == result.capacity
    assert sum(view.rows[0]["bytes"].values()) == table.iloc[0]["peak_allocated"]
    assert "modeled" in view.title and "plan:" in view.fallback_text()
    run = result.runs["tp4"].run
    assert run.ranks.by_kind()["all_reduce"][0] > 0  # Rowwise's partial sums


def test_a_process_group_already_present_is_a_clear_error(fresh_device) -> None:
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        with pytest.raises(RuntimeError, match="destroy_process_group"), trn_notebook.dryrun(world_size=2):
            pass
    finally:
        dist.destroy_process_group()
    with trn_notebook.dryrun(world_size=2) as run:  # the session is usable afterwards
        torch.randn(4, device="neuron")
    assert run.ranks.world_size == 2


def test_layouts_parse_and_bad_ones_say_the_form() -> None:
    assert parse_layouts("tp4, fsdp16+ac, tp2xfsdp8+noreshard") == [
        Layout(tp=4),
        Layout(fsdp=16, ac=True),
        Layout(tp=2, fsdp=8, reshard=False),
    ]
    with pytest.raises(ValueError, match="tpNxfsdpM"):
        parse_layouts("pp4")
    with pytest.raises(ValueError, match="training step"):
        Workload(kind="serve")
    with pytest.raises(TypeError, match="factory"):
        trn_notebook.plan(torch.nn.Linear(2, 2))
