"""Rank functions run by spawned workers in the distributed tests (importable by spawn children).

Each function runs the same calls on CPU tensors (gloo's own path) and on neuron tensors (our c10d
kernels) in the same process group and raises ``AssertionError`` on any difference.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _same(cpu: object, dev: object, what: str) -> None:
    if isinstance(cpu, (list, tuple)):
        assert isinstance(dev, (list, tuple)) and len(cpu) == len(dev), what
        for i, (a, b) in enumerate(zip(cpu, dev)):
            _same(a, b, f"{what}[{i}]")
        return
    assert isinstance(dev, torch.Tensor) and dev.device.type == "neuron", f"{what}: result not on neuron"
    assert torch.equal(cpu, dev.cpu()), f"{what}: cpu {cpu} != neuron {dev.cpu()}"


def collectives(rank: int, world: int) -> None:
    """Every torch.distributed collective on neuron equals the CPU/gloo result on this rank."""
    g = torch.Generator().manual_seed(100 + rank)
    base = torch.randn(6, 4, generator=g)
    results: dict[str, dict[str, object]] = {"cpu": {}, "neuron": {}}
    for device in ("cpu", "neuron"):
        r = results[device]
        x = base.to(device)

        t = x.clone()
        dist.all_reduce(t)
        r["all_reduce_sum"] = t
        for op in (dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT):
            t = x.clone()
            dist.all_reduce(t, op=op)
            r[f"all_reduce_{op}"] = t
        t = x.clone()
        dist.broadcast(t, src=1)
        r["broadcast"] = t
        t = x.clone()
        dist.reduce(t, dst=0)
        r["reduce"] = t if rank == 0 else x  # non-root buffers are scratch in gloo
        outs = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(outs, x)
        r["all_gather"] = outs
        big = torch.empty(world * 6, 4, device=device)
        dist.all_gather_into_tensor(big, x)
        r["all_gather_into_tensor"] = big
        out = torch.empty(3, 4, device=device)
        dist.reduce_scatter_tensor(out, x)
        r["reduce_scatter_tensor"] = out
        out = torch.empty(3, 4, device=device)
        dist.reduce_scatter(out, list(x.chunk(world)))
        r["reduce_scatter"] = out
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x)
        r["all_to_all_single"] = out
        out_split, in_split = ([4, 5], [1, 5]) if rank else ([2, 1], [2, 4])
        out = torch.empty(sum(out_split), 4, device=device)
        dist.all_to_all_single(out, x, output_split_sizes=out_split, input_split_sizes=in_split)
        r["all_to_all_single_uneven"] = out
        outs = [torch.empty(3, 4, device=device) for _ in range(world)]
        dist.all_to_all(outs, list(x.chunk(world)))
        r["all_to_all"] = outs
        gl = [torch.empty_like(x) for _ in range(world)] if rank == 0 else None
        dist.gather(x, gl, dst=0)
        r["gather"] = gl if rank == 0 else x
        out = torch.empty_like(x)
        dist.scatter(out, [x + i for i in range(world)] if rank == 0 else None, src=0)
        r["scatter"] = out
        dist.barrier()
        t = x.clone()
        if rank == 0:
            dist.send(t, dst=1)
            r["send_recv"] = t
        else:
            dist.recv(t, src=0)
            r["send_recv"] = t
        t = x.clone()
        reqs = dist.batch_isend_irecv(
            [dist.P2POp(dist.isend, x, (rank + 1) % world), dist.P2POp(dist.irecv, t, (rank - 1) % world)]
        )
        for q in reqs:
            q.wait()
        r["batch_isend_irecv"] = t
        # coalesced variants
        a, b = x.clone(), (x * 2).clone()
        dist.all_reduce_coalesced([a, b])
        r["all_reduce_coalesced"] = [a, b]
        with dist._coalescing_manager(async_ops=True) as cm:
            c, d = x.clone(), x.clone() + 1
            dist.all_reduce(c)
            dist.all_reduce(d)
        cm.wait()
        r["coalescing_manager"] = [c, d]
        # async Work
        t = x.clone()
        work = dist.all_reduce(t, async_op=True)
        assert isinstance(work, dist.Work)
        work.wait()
        r["async_all_reduce"] = t
        fut_t = x.clone()
        fut = dist.all_reduce(fut_t, async_op=True).get_future()
        fut.wait()
        r["async_future"] = fut_t
        objs: list[object] = [None] * world
        dist.all_gather_object(objs, {"rank": rank, "device": "same"})
        assert objs == [{"rank": i, "device": "same"} for i in range(world)]
    for key, cpu in results["cpu"].items():
        _same(cpu, results["neuron"][key], key)
    from trn_notebook.distributed import comm_log

    kinds = {r["kind"] for r in comm_log.snapshot()}
    expected = {"all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"}
    assert expected | {"send" if rank == 0 else "recv"} <= kinds, kinds  # each charged to the device clock
    assert all(r["modeled_s"] > 0 for r in comm_log.snapshot() if r["kind"] != "barrier")


class MLP(torch.nn.Module):
    """The small model the DDP / TP / FSDP tests train."""

    def __init__(self, d: int = 16, h: int = 32) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(d, h)
        self.fc2 = torch.nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _train(model: torch.nn.Module, device: str, rank: int, steps: int = 3) -> list[torch.Tensor]:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(7 + rank)  # each rank its own data shard
    losses = []
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g).to(device)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    return losses


def _close(cpu: torch.Tensor, dev: torch.Tensor, what: str) -> None:
    dev = dev.full_tensor() if hasattr(dev, "full_tensor") else dev
    cpu = cpu.full_tensor() if hasattr(cpu, "full_tensor") else cpu
    torch.testing.assert_close(dev.cpu(), cpu, rtol=1e-5, atol=1e-6, msg=lambda m: f"{what}: {m}")


def ddp(rank: int, world: int) -> None:
    """DDP on neuron equals DDP on CPU/gloo, rank by rank (losses, gradients, parameters)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    base = MLP()
    cpu_model = DDP(MLP().to("cpu"))
    cpu_model.module.load_state_dict(base.state_dict())
    dev_model = DDP(MLP().to("neuron"))
    dev_model.module.load_state_dict(base.state_dict())
    assert next(dev_model.parameters()).device.type == "neuron"
    cpu_losses = _train(cpu_model, "cpu", rank)
    dev_losses = _train(dev_model, "neuron", rank)
    for i, (a, b) in enumerate(zip(cpu_losses, dev_losses)):
        _close(a, b, f"loss step {i}")
    for (name, p), q in zip(cpu_model.module.named_parameters(), dev_model.module.parameters()):
        _close(p.grad, q.grad, f"grad {name}")
        _close(p.detach(), q.detach(), f"param {name}")
    # the replicas stayed identical across ranks
    flat = torch.cat([p.detach().reshape(-1) for p in dev_model.parameters()])
    other = flat.clone()
    dist.broadcast(other, src=0)
    assert torch.equal(flat.cpu(), other.cpu()), "DDP replicas diverged"


def tensor_parallel(rank: int, world: int) -> None:
    """ColwiseParallel/RowwiseParallel on a neuron DeviceMesh equals the same plan on a CPU mesh."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    base = MLP()
    plan = {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    models = {}
    for device in ("cpu", "neuron"):
        mesh = init_device_mesh(device, (world,))
        m = MLP().to(device)
        m.load_state_dict(base.state_dict())
        models[device] = parallelize_module(m, mesh, plan)
    assert models["neuron"].fc1.weight.to_local().device.type == "neuron"
    assert models["neuron"].fc1.weight.to_local().shape == (32 // world, 16)
    torch.manual_seed(1)  # TP: every rank sees the same batch
    losses = {d: _train(models[d], d, 0) for d in models}
    for i, (a, b) in enumerate(zip(losses["cpu"], losses["neuron"])):
        _close(a, b, f"loss step {i}")
    for (name, p), q in zip(models["cpu"].named_parameters(), models["neuron"].parameters()):
        _close(p.grad, q.grad, f"grad {name}")
        _close(p.detach(), q.detach(), f"param {name}")


def fsdp(rank: int, world: int) -> None:
    """FSDP2 ``fully_shard`` (reshard after forward) on neuron equals the same on CPU/gloo, rank by rank."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    base = MLP()
    models = {}
    for device in ("cpu", "neuron"):
        mesh = init_device_mesh(device, (world,))
        m = MLP().to(device)
        m.load_state_dict(base.state_dict())
        fully_shard(m.fc1, mesh=mesh, reshard_after_forward=True)
        fully_shard(m.fc2, mesh=mesh, reshard_after_forward=True)
        models[device] = fully_shard(m, mesh=mesh)
    local = models["neuron"].fc1.weight.to_local()
    assert local.device.type == "neuron" and local.shape == (32 // world, 16), local.shape
    losses = {d: _train(models[d], d, rank) for d in models}
    for i, (a, b) in enumerate(zip(losses["cpu"], losses["neuron"])):
        _close(a, b, f"loss step {i}")
    for (name, p), q in zip(models["cpu"].named_parameters(), models["neuron"].parameters()):
        _close(p.grad, q.grad, f"grad {name}")
        _close(p.detach(), q.detach(), f"param {name}")
    # after forward the unsharded parameters were freed (storage resized to 0 through the allocator)
    from torch.distributed.fsdp._fully_shard._fsdp_state import _get_module_fsdp_state

    state = _get_module_fsdp_state(models["neuron"].fc1)
    for fp in state._fsdp_param_group.fsdp_params:
        assert fp._unsharded_param.untyped_storage().nbytes() == 0


def memory(rank: int, world: int) -> None:
    """FSDP2 keeps about 1/N of parameters, gradients and Adam state per rank (the allocator sees it)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    def resident(wrap: str) -> int:
        import gc

        gc.collect()
        before = torch.neuron.memory_allocated()
        torch.manual_seed(0)
        m = MLP(256, 1024).to("neuron")
        if wrap == "ddp":
            m = DDP(m, bucket_cap_mb=1)
        else:
            mesh = init_device_mesh("neuron", (world,))
            fully_shard(m.fc1, mesh=mesh)
            fully_shard(m.fc2, mesh=mesh)
            fully_shard(m, mesh=mesh)
        opt = torch.optim.Adam(m.parameters())
        x = torch.randn(4, 256).to("neuron")
        m(x).sum().backward()
        opt.step()
        used = torch.neuron.memory_allocated() - before
        del m, opt, x
        return used

    ddp_bytes = resident("ddp")
    fsdp_bytes = resident("fsdp")
    params = (256 * 1024 + 1024 + 1024 * 256 + 256) * 4
    # DDP: params + grads + 2 Adam moments (+ its gradient buckets); FSDP: a 1/N share of each
    assert ddp_bytes >= 4 * params, (ddp_bytes, params)
    assert fsdp_bytes <= 0.6 * ddp_bytes, (fsdp_bytes, ddp_bytes)


def everything(rank: int, world: int) -> None:
    """One spawn for CI (imports dominate on 2 cores): collectives, DDP, TP, FSDP2, memory."""
    for fn in (collectives, integer_all_reduce, ddp, tensor_parallel, fsdp, memory):
        fn(rank, world)


def hangs_on_rank_1(rank: int, world: int) -> None:
    """Rank 0 enters a collective rank 1 never joins."""
    import time

    if rank == 1:
        time.sleep(600)  # STUCK-LINE
    dist.all_reduce(torch.ones(2, device="neuron"))  # HANG-LINE


def full_tensor_many(rank: int, world: int, iters: int) -> None:
    """FSDP2's ``full_tensor()`` sequence ``iters`` times on neuron, each gather equal to the unsharded tensor.

    Before issue 34's fix this hung within a few hundred to a few thousand gathers under load (gloo's
    worker waiting for the GIL that PyTorch's C++ ``wait_tensor`` held); see
    ``benchmarks/bench_full_tensor_hang.py``.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("neuron", (world,))
    torch.manual_seed(0)
    base = MLP()
    model = MLP().to("neuron")
    model.load_state_dict(base.state_dict())
    fully_shard(model, mesh=mesh)
    for (name, want), got in zip(base.named_parameters(), model.parameters()):
        assert torch.equal(got.full_tensor().cpu(), want.detach()), name
    whole = torch.arange(64.0).reshape(16, 4)
    dt = distribute_tensor(whole.to("neuron"), mesh, [Shard(0)])
    for i in range(iters):
        full = dt.full_tensor()
        if i % 500 == 0 or i == iters - 1:
            assert torch.equal(full.cpu(), whole), f"gather {i}"


def integer_all_reduce(rank: int, world: int) -> None:
    """Issue 27: under ``trainium`` an integer all-reduce / reduce-scatter on neuron sums in FP32 (EVRF061,
    EVRF063): equal to gloo's exact CPU result below 2^24, equal to the FP32 sum cast back above it."""
    import trn_notebook

    big = 2**24
    mine = torch.tensor([big if rank == 0 else 1, 3 + rank, 5 * big + rank, -7], dtype=torch.int32)
    every = [torch.tensor([big if r == 0 else 1, 3 + r, 5 * big + r, -7], dtype=torch.int32) for r in range(world)]
    exact = torch.stack(every).sum(0, dtype=torch.int32)
    fp32 = torch.zeros(4)
    for t in every:  # rank order; with 2 ranks any order gives the same FP32 sum
        fp32 = fp32 + t.float()
    reference = fp32.to(torch.int32)
    cpu = mine.clone()
    dev = mine.to("neuron")
    with trn_notebook.numerics("trainium"):
        dist.all_reduce(cpu)  # CPU tensors are not the device's: gloo's exact sum
        dist.all_reduce(dev)
        shard = torch.zeros(2, dtype=torch.int32, device="neuron")
        dist.reduce_scatter_tensor(shard, mine.to("neuron"))
    assert torch.equal(cpu, exact), (cpu, exact)
    assert torch.equal(dev.cpu(), reference), (rank, dev.cpu(), reference)
    assert torch.equal(shard.cpu(), reference[2 * rank : 2 * rank + 2]), (rank, shard.cpu())
    assert reference[1] == exact[1] and reference[3] == exact[3]  # below 2^24: exact
    assert reference[0] != exact[0]  # 2^24 + 1 is no FP32 value
    dist.all_reduce(dev)  # exact mode again: gloo's integer sum of what each rank holds
    assert torch.equal(dev.cpu(), reference * world)


def crashes_on_rank_1(rank: int, world: int) -> None:
    """Rank 1 dies of a segmentation fault (a crash in C code), rank 0 waits in a collective."""
    import ctypes

    if rank == 1:
        ctypes.string_at(0)  # reads address 0: SIGSEGV  CRASH-LINE
    dist.barrier()
