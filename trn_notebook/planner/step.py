"""One training step of a laid-out model, dry: a microstep, then the data-parallel optimizer step.

The dry run executes one microbatch (forward, backward, the pipeline's activation and gradient hand-offs)
and one optimizer step with PyTorch's own ops and collectives on the fake process group; the step is then
composed from the two, as the schedule runs them:

* **gradient accumulation**: ``m`` microbatches per data-parallel rank (``Workload.microbatches``), each
  the same work, so the microstep is run once and counted ``m`` times (modeled: identical microsteps);
* **pipeline (1F1B)**: with ``pp`` stages a stage is busy ``m`` microbatch slots of ``m + pp - 1``; the
  other ``pp - 1`` are the bubble. The stage run is the decoder layers of one stage plus the embedding and
  the head (the first and the last stage's extras together: the slowest stage, an upper bound), and the
  first stage holds ``min(pp, m)`` microbatches of activations at once;
* **data parallel with FP32 master weights or ZeRO-1** (NxD Training's optimizer): each microstep adds the
  gradients into one flat FP32 buffer (``_foreach_add_``); the optimizer step reduce-scatters it over the
  DP replicas (ZeRO-1; all-reduces it without), runs AdamW on the rank's FP32 master shard, and all-gathers
  the updated parameters (ZeRO-1). FSDP layouts keep FSDP2's own collectives and a per-parameter AdamW.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..device.clocks import clocks
from ..distributed.ledger import exposed_comm
from ..dry.run import DryRun
from .layouts import Layout, Workload


@dataclass(frozen=True)
class StepFigures:
    """The modeled parts of one optimizer step on one rank (seconds) and the memory the schedule adds."""

    microbatches: int
    micro_s: float  # one microbatch: forward, backward, accumulation, pipeline hand-offs
    optimizer_s: float  # gradient reduction, AdamW, parameter gather
    bubble_s: float  # 1F1B: (pp - 1) idle microbatch slots
    comm_s: float
    exposed_s: float
    pp: int = 1
    activation_bytes: int = 0  # what one microbatch's forward leaves allocated for its backward

    @property
    def in_flight_bytes(self) -> int:
        """Activations of the extra microbatches the first pipeline stage holds (1F1B: min(pp, m) in flight)."""
        return (min(self.pp, self.microbatches) - 1) * self.activation_bytes

    @property
    def step_s(self) -> float:
        """Modeled seconds of one optimizer step."""
        return self.microbatches * self.micro_s + self.bubble_s + self.optimizer_s


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def _local_grad(p: torch.Tensor) -> torch.Tensor:
    """This rank's shard of ``p.grad``, laid out as ``p`` is (DTensor may leave a gradient replicated)."""
    g = p.grad
    assert g is not None
    placements = getattr(p, "placements", None)
    if placements is not None and getattr(g, "placements", placements) != placements:
        g = g.redistribute(p.device_mesh, placements)  # type: ignore[attr-defined]
    return _local(g)


class FlatOptimizer:
    """ZeRO-1 / mixed-precision optimizer of NxD Training: flat FP32 gradient buffer, master shard, AdamW."""

    def __init__(self, run: DryRun, model: nn.Module, layout: Layout, workload: Workload, dtype: torch.dtype):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.dp = run.mesh["dp"].get_group() if layout.data_parallel > 1 else None
        self.zero1, self.replicas = layout.zero1, layout.data_parallel
        numel = sum(_local(p).numel() for p in self.params)
        self.padded = -(-numel // self.replicas) * self.replicas  # a shard per replica, equal sizes
        grad_dtype = torch.float32 if workload.master_weights else dtype
        self.grads = torch.zeros(self.padded, dtype=grad_dtype, device="neuron")
        run.label(self.grads, "gradients")
        shard = self.padded // self.replicas if self.zero1 else self.padded
        self.master = nn.Parameter(torch.zeros(shard, dtype=grad_dtype, device="neuron"))
        run.label(self.master, "optimizer state")
        self.views, at = [], 0
        for p in self.params:
            n = _local(p).numel()
            self.views.append(self.grads[at : at + n].view(_local(p).shape))
            at += n
        self.opt = torch.optim.AdamW([self.master], lr=1e-4, foreach=True)
        self.dtype = dtype

    def accumulate(self) -> None:
        """Add this microbatch's gradients into the flat buffer and free them (as NxD's main-grad hooks do)."""
        grads = [_local_grad(p).to(v.dtype) for p, v in zip(self.params, self.views, strict=True) if p.grad is not None]
        torch._foreach_add_([v for p, v in zip(self.params, self.views, strict=True) if p.grad is not None], grads)
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Reduce the gradients over the replicas, step AdamW on the master shard, gather the parameters."""
        if self.zero1:
            shard = torch.empty_like(self.master)
            dist.reduce_scatter_tensor(shard, self.grads, group=self.dp)
            self.master.grad = shard
        else:
            if self.dp is not None:
                dist.all_reduce(self.grads, group=self.dp)
            self.master.grad = self.grads
        self.opt.step()
        self.master.grad = None
        updated = self.master.detach().to(self.dtype)
        if self.zero1:
            gathered = torch.empty(self.padded, dtype=self.dtype, device="neuron")
            dist.all_gather_into_tensor(gathered, updated, group=self.dp)
            updated = gathered
        flat = [_local(p).detach().view(-1) for p in self.params]
        torch._foreach_copy_(flat, list(updated[: sum(f.numel() for f in flat)].split([f.numel() for f in flat])))
        self.grads.zero_()


def _handoffs(run: DryRun, layout: Layout, workload: Workload, hidden: int, dtype: torch.dtype) -> list[Any]:
    """A middle stage's 1F1B hand-offs of one microbatch: activations in and out, their gradients back."""
    if layout.pp == 1:
        return []
    group = run.mesh["pp"].get_group()
    peer = dist.get_global_rank(group, 1)
    shape = (workload.batch, workload.seq, hidden)
    works = []
    for _ in range(2):  # forward: receive from the previous stage, send to the next; backward: the reverse
        works.append(dist.irecv(torch.empty(shape, dtype=dtype, device="neuron"), src=peer, group=group))
        works.append(dist.isend(torch.empty(shape, dtype=dtype, device="neuron"), dst=peer, group=group))
    return works


def training_step(
    run: DryRun,
    model: nn.Module,
    layout: Layout,
    workload: Workload,
    dtype: torch.dtype,
    loss_of: Any,
    hidden: int,
    loss_context: Callable[[], AbstractContextManager[Any]] = nullcontext,
    pricing: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> StepFigures:
    """Run one microstep and one optimizer step of ``model`` in ``run`` and compose the step (module docstring).

    ``loss_of(model, ids)`` returns the loss of one microbatch; ``hidden`` is the width of the activations a
    pipeline stage hands on; ``loss_context()`` is entered around the forward and the backward (``loss_parallel``
    for vocabulary-sharded logits).
    """
    micro = workload.microbatches(layout)
    flat = layout.fsdp == 1 and (layout.dp > 1 or workload.master_weights)
    # TP alone leaves some parameters plain tensors and others DTensors; torch's foreach kernels refuse the
    # mix ("got mixed torch.Tensor and DTensor"), so that layout steps parameter by parameter, as it must.
    foreach = not (layout.tp > 1 and layout.fsdp == 1)
    with run.phase("init"):
        flat_opt = FlatOptimizer(run, model, layout, workload, dtype) if flat else None
        opt = flat_opt.opt if flat_opt else torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=foreach)
    run.track(model, opt)
    if not flat and not foreach:
        run.note("TP without FSDP: AdamW(foreach=False) (torch's foreach ops refuse plain tensors mixed with DTensors)")
    ids = torch.zeros(workload.batch, workload.seq, dtype=torch.long, device="neuron")
    with pricing():  # eager prices, or those of one compiled graph
        clocks.sync("start of the training step")
        t0 = clocks.snapshot().sim_host_s
        works = _handoffs(run, layout, workload, hidden, dtype)
        with loss_context():
            before = run.allocated_now
            with run.phase("forward"):
                loss = loss_of(model, ids)
            activations = run.allocated_now - before
            with run.phase("backward"):
                loss.backward()
            if flat_opt is not None:
                flat_opt.accumulate()
        for w in works:
            w.wait()
        del loss
        clocks.sync("end of the microstep")
        t1 = clocks.snapshot().sim_host_s
        comm_micro, exposed_micro = exposed_comm(t0)
        with run.phase("optimizer"):
            if flat_opt is not None:
                flat_opt.step()
            else:
                opt.step()
                opt.zero_grad(set_to_none=True)
        clocks.sync("end of the training step")
        t2 = clocks.snapshot().sim_host_s
        comm_all, exposed_all = exposed_comm(t0)
    slots = micro + layout.pp - 1
    return StepFigures(
        microbatches=micro,
        micro_s=t1 - t0,
        optimizer_s=t2 - t1,
        bubble_s=(layout.pp - 1) * (t1 - t0),
        comm_s=slots * comm_micro + (comm_all - comm_micro),
        exposed_s=slots * exposed_micro + (exposed_all - exposed_micro),
        pp=layout.pp,
        activation_bytes=max(activations, 0),
    )
