"""Ranks, dry: fake process group + DeviceMesh('neuron'), FSDP2 / TP / DDP charged per rank, memory by category."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

import trn_notebook
from trn_notebook.device.memory.allocator import round_size
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
    assert [x.name for x in parse_layouts("tp32xdp32+zero1, tp32xpp8xdp4+zero1")] == [
        "tp32×dp32+zero1",
        "tp32×pp8×dp4+zero1",
    ]
    assert parse_layouts("tp32xpp8xdp4")[0].world_size == 1024
    with pytest.raises(ValueError, match="tpN, ppN, fsdpN or dpN"):
        parse_layouts("ep4")
    with pytest.raises(ValueError, match="add dpN"):
        parse_layouts("tp4+zero1")
    with pytest.raises(ValueError, match="use dpN\\+zero1"):
        parse_layouts("pp2xfsdp4")
    with pytest.raises(ValueError, match="not a multiple of batch 1 × 32 data-parallel"):
        Workload(global_batch=1000).microbatches(Layout(dp=32))
    with pytest.raises(ValueError, match="training step"):
        Workload(kind="serve")
    with pytest.raises(TypeError, match="factory"):
        trn_notebook.plan(torch.nn.Linear(2, 2))


def _grad_bytes(m: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in m.parameters())


def test_ddp_all_reduces_the_gradient_buckets_ddp_forms(fresh_device) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    with trn_notebook.dryrun(world_size=4) as run:
        with torch.device("neuron"):
            m = _mlp()
        ddp = DDP(m, bucket_cap_mb=5)  # DDP itself: its parameter-shape check, broadcast and C++ Reducer
        init = [(r.kind, r.nbytes) for r in run.ranks.records]
        opt = torch.optim.AdamW(m.parameters(), foreach=True)
        run.track(m, opt)
        x = torch.randn(512, 1024, device="neuron")
        steps = []
        for i in range(2):
            if i:
                opt.zero_grad()
            n = len(run.ranks.records)
            ddp(x).sum().backward()
            opt.step()
            steps.append([r for r in run.ranks.records[n:] if r.kind == "all_reduce"])
    grads = _grad_bytes(m)
    assert init == [("broadcast", grads)]  # rank 0's parameters to every rank
    # first step: one bucket of every gradient; then DDP rebuilds its buckets in the order gradients got ready
    assert [r.nbytes for r in steps[0]] == [grads]
    params = list(reversed(list(m.parameters())))
    buckets, _ = dist._compute_bucket_assignment_by_size(params, [5 * 2**20])
    expected = [sum(params[i].numel() * 4 for i in b) for b in buckets]
    assert len(expected) == 2 and [r.nbytes for r in steps[1]] == expected and sum(expected) == grads
    for r in steps[0] + steps[1]:  # the α–β model, on one chip's cores
        assert r.world_size == 4 and r.fabric == "intra_chip"
        assert r.modeled_s == collective_seconds("all_reduce", r.nbytes, 4, fabric="intra_chip")[0]
    end = run.by_category_at_end
    # the Reducer's bucket buffers, in allocator blocks
    assert end is not None and end["collective buffers"] == sum(round_size(b) for b in expected)
    assert end["gradients"] == grads and end["parameters"] == grads
    assert "all_reduce ×3" in run.summary()


def test_sequence_parallel_gathers_and_scatters_the_sequence_shard(fresh_device) -> None:
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    class Block(torch.nn.Module):
        def __init__(self, h: int = 256) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(h)
            self.up = torch.nn.Linear(h, 4 * h)
            self.down = torch.nn.Linear(4 * h, h)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.down(torch.relu(self.up(self.norm(x))))

    batch, seq, hidden, tp = 2, 128, 256, 4
    with trn_notebook.dryrun(world_size=tp) as run:
        with torch.device("neuron"):
            block = Block(hidden)
        plan = {
            "norm": SequenceParallel(),
            "up": ColwiseParallel(input_layouts=Shard(1)),
            "down": RowwiseParallel(output_layouts=Shard(1)),
        }
        parallelize_module(block, run.mesh, plan)
        setup = len(run.ranks.records)
        x = torch.randn(batch, seq // tp, hidden, device="neuron", requires_grad=True)  # this rank's sequence shard
        with run.phase("forward"):
            y = block(x)
        forward = len(run.ranks.records)
        y.sum().backward()
    assert y.shape == (batch, seq // tp, hidden)
    # distribute_tensor scatters row shards (views of one storage): the bytes are the weight's, not world x it
    scatters = [r.nbytes for r in run.ranks.records[:setup] if r.kind == "scatter"]
    assert scatters[0] == 4 * hidden * hidden * 4
    full = batch * seq * hidden * 4  # the whole sequence's activation
    kinds = [(r.kind, r.nbytes) for r in run.ranks.records[setup:forward]]
    assert kinds == [("all_gather", full), ("reduce_scatter", full)]  # before `up`, after `down`
    back = sorted((r.kind, r.nbytes) for r in run.ranks.records[forward:])
    assert back == [("all_gather", full), ("reduce_scatter", full)]  # their gradients
    assert all(r.world_size == tp for r in run.ranks.records[setup:])
    assert run.by_category is not None and run.by_category["collective buffers"] >= full // tp


def test_a_dry_run_of_ranks_writes_nothing_to_stderr():
    """Destroying the fake group warned from C++ (``No backend of type 0 found``) in every notebook cell."""
    import subprocess
    import sys

    code = "import torch, trn_notebook\nwith trn_notebook.dryrun(world_size=4):\n    torch.ones(4, device='neuron')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert "No backend of type" not in done.stderr, done.stderr


def _embedding_mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Embedding(64, 256), torch.nn.Linear(256, 256), torch.nn.Linear(256, 64))


def test_plan_on_trn1_uses_its_cores_memory_and_network(fresh_device) -> None:
    from trn_notebook.device.chips import GiB

    w = Workload(batch=2, seq=16)
    trn1 = trn_notebook.plan(_embedding_mlp, w, chip="trn1", layouts="fsdp2")
    trn2 = trn_notebook.plan(_embedding_mlp, w, chip="trn2", layouts="fsdp2")
    assert (trn1.lnc, trn1.capacity) == (1, 16 * GiB)  # NeuronCore-v2: 32 GiB over 2 cores, no grouping
    assert trn1.table.loc["fsdp2", "chips"] == 1 and trn2.table.loc["fsdp2", "chips"] == 0.5
    # the same collectives cross one chip's DMA: 272 GB/s a core on Trn1, 368 on Trn2
    assert trn1.table.loc["fsdp2", "comm_s"] > trn2.table.loc["fsdp2", "comm_s"] > 0
    with pytest.raises(ValueError, match="no logical-core grouping"):
        trn_notebook.plan(_embedding_mlp, w, chip="trn1", lnc=2, layouts="fsdp2")


def _tiny_llama(layers: int = 2):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip


def test_zero1_shards_the_optimizer_and_composes_the_accumulated_step(fresh_device) -> None:
    w = Workload(batch=2, seq=16, global_batch=64, master_weights=True)
    result = trn_notebook.plan(_tiny_llama(), w, layouts="dp4, dp4+zero1")
    plain, zero1 = result.table.loc["dp4"], result.table.loc["dp4+zero1"]
    assert plain["microbatches"] == zero1["microbatches"] == 8  # 64 sequences / (2 per microbatch × 4 replicas)
    for row in (plain, zero1):
        assert row["step_s"] == pytest.approx(8 * row["micro_s"] + row["optimizer_s"]) and row["bubble_s"] == 0
        assert row["sequences_per_s"] == pytest.approx(64 / row["step_s"])
    # FP32 master weights and AdamW's two moments, a quarter of them on each replica with ZeRO-1
    assert zero1["optimizer state"] < 0.3 * plain["optimizer state"]
    kinds = result.runs["dp4+zero1"].run.ranks.by_kind()
    assert {"reduce_scatter", "all_gather"} <= set(kinds) and "all_reduce" not in kinds
    assert "all_reduce" in result.runs["dp4"].run.ranks.by_kind()
    assert "sequences/s (modeled)" in result.text() and "global batch 64" in result.text()


def test_pipeline_stages_charge_the_bubble_hand_offs_and_activations_in_flight(fresh_device) -> None:
    w = Workload(batch=1, seq=16, global_batch=8)
    result = trn_notebook.plan(_tiny_llama(4), w, layouts="pp2xdp2, dp2")
    pp, flat = result.table.loc["pp2×dp2"], result.table.loc["dp2"]
    assert pp["microbatches"] == 4 and pp["bubble_s"] == pytest.approx(pp["micro_s"])  # 1F1B: pp - 1 slots
    assert pp["step_s"] == pytest.approx(5 * pp["micro_s"] + pp["optimizer_s"])
    assert {"send", "recv"} <= set(result.runs["pp2×dp2"].run.ranks.by_kind())
    step = result.runs["pp2×dp2"].step  # the first stage holds a second microbatch's activations (1F1B)
    assert step.activation_bytes > 0 and step.in_flight_bytes == step.activation_bytes
    assert pp["peak_allocated"] == result.runs["pp2×dp2"].run.memory.counters.peak_allocated + step.in_flight_bytes
    assert pp["micro_s"] < flat["micro_s"]  # a stage runs half the layers
    assert "1F1B" in result.text()
    # depths are a stage's layers: at (1, 2) the second run is the full stage, so the line lands on it exactly
    ext = trn_notebook.plan(_tiny_llama(4), w, layouts="pp2xdp2", depths=(1, 2)).table.loc["pp2×dp2"]
    assert ext["step_s"] == pytest.approx(pp["step_s"]) and ext["host_bytes"] == pytest.approx(pp["host_bytes"])
    with pytest.raises(ValueError, match="do not split into 3 equal stages"):
        trn_notebook.plan(_tiny_llama(4), w, layouts="pp3")
    with pytest.raises(ValueError, match="need a transformers config"):
        trn_notebook.plan(_embedding_mlp, w, layouts="pp2")
