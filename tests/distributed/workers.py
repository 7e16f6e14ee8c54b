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
