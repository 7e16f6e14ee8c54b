"""Ranks, dry: ``trn_notebook.dryrun(world_size=N)`` runs DDP, FSDP2 and TP for N ranks in one process.

As torchtitan's estimator does (``scripts/estimate/estimation.py``), the run builds torch's *fake*
process group (``torch.testing._internal.distributed.fake_pg.FakeStore``, backend ``"fake"``: every
collective returns at once with the right shapes and no data) and a ``DeviceMesh("neuron", …)``
outside the fake mode, then runs rank 0's program shape-only. Each collective is charged on the dry
run's modeled clocks with the same α–β model and the same payload rule as a real collective on the
simulator (:func:`~..distributed.commmodel.collective_seconds`; the bytes by the real backend's rule,
:func:`payload_bytes`: the gathered result of an all-gather, the input of a reduce-scatter, the
buffer of an all-reduce), on the fabric the group's ranks span. DDP runs as it is
(:mod:`.ddp`: its Reducer's buckets, each bucket's all-reduce). The
compute queue waits for the collectives at ``wait_tensor`` and at an optimizer step, as on the
simulator (:mod:`..distributed.backend`). Ranks are symmetric, so rank 0's figures are every rank's.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from ..device.clocks import clocks
from ..device.dry.alloc import StorageTracker
from ..device.dry.dispatch import DryMode
from ..distributed import backend as _backend
from ..distributed.commmodel import collective_seconds, fabric_for
from ..distributed.ledger import CommRecord, exposed_comm
from .ddp import DdpPatches, completed_work

_KIND = {
    "broadcast": "broadcast", "allreduce": "all_reduce", "all_reduce": "all_reduce", "reduce": "reduce",
    "send": "send", "recv": "recv", "isend": "send", "irecv": "recv", "allgather": "all_gather",
    "_allgather_base": "all_gather", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter", "gather": "gather", "scatter": "scatter",
    "alltoall": "all_to_all", "all_to_all": "all_to_all", "shard_dim_alltoall": "all_to_all",
    "barrier": "barrier", "monitored_barrier": "barrier", "batch_p2p_ops": "send",
}  # fmt: skip


def _kind(func: Any) -> str:
    """The cost model's collective kind of a c10d / functional-collective op (by its name)."""
    name = func._schema.name.split("::")[-1].rstrip("_")
    for prefix in sorted(_KIND, key=len, reverse=True):
        if name.startswith(prefix):
            return _KIND[prefix]
    raise ValueError(f"no collective kind for {func}")


class _ClearOnDeviceThread(torch.autograd.Function):
    """Identity whose backward clears the DTensor dispatch cache of the thread that runs it (a device's backward
    runs on the autograd engine's thread for that device, and the C++ cache is per thread)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        torch._C._clear_DTensor_sharding_propagator_cache()
        return grad


def _forget_sharding_results() -> None:
    """Drop DTensor's cached sharding results on this thread: they hold the run's meshes, and a later run's mesh of
    the same ranks compares equal (a mesh's equality leaves out its process groups), so a hit would name destroyed
    groups (:class:`_ClearOnDeviceThread` does the same on the autograd engine's neuron thread)."""
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor._redistribute import clear_redistribute_planner_cache

    DTensor._op_dispatcher.sharding_propagator.propagate_op_sharding.cache_clear()
    clear_redistribute_planner_cache()
    torch._C._clear_DTensor_sharding_propagator_cache()  # the C++ dispatch fast path's own copy


def _tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    return []


def payload_bytes(kind: str, args: tuple[Any, ...], out: Any) -> int:
    """The bytes a collective is charged for: the real backend's rule (:func:`..distributed.backend._payload_bytes`, the
    larger of the tensors this rank gives and receives, by element count), over the op's first two
    arguments and its result, so a functional collective (whose output is its result) is measured the same.

    Not torch's ``CollectiveOp.get_comm_tensor_size``: it counts each tensor's whole *storage*, so a shard
    that is a view of a larger tensor (``distribute_tensor``'s row shards) is counted as the whole tensor.
    """
    if kind == "barrier":
        return 0
    return max(_backend._payload_bytes(kind, args), _backend._payload_bytes(kind, (_tensors(out),)))


class DryRanks:
    """The fake process group, the mesh and the collective charges of one dry run of ranks."""

    def __init__(self, world_size: int, mesh_shape: Sequence[int] | None = None, mesh_dim_names: Any = None):
        if not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive integer, got {world_size!r}")
        shape = tuple(mesh_shape) if mesh_shape is not None else (world_size,)
        if int(torch.tensor(shape).prod()) != world_size:
            raise ValueError(f"mesh_shape {shape} does not multiply to world_size {world_size}")
        self.world_size = world_size
        self.mesh_shape = shape
        self.mesh_dim_names = tuple(mesh_dim_names) if mesh_dim_names is not None else None
        self.mesh: Any = None
        self.records: list[CommRecord] = []
        self.comm_s = 0.0
        self.exposed_s = 0.0
        self._tracker: StorageTracker | None = None
        self._spans: dict[str, int] = {}
        self._saved_lock: Any = None
        self._mesh_init: Any = None
        self._excepthook: Any = None
        self._ddp = DdpPatches()
        self._mode: DryMode | None = None

    def start(self, mode: DryMode, tracker: StorageTracker) -> None:
        """Build the fake process group and the mesh (outside the fake mode), install the charges on ``mode``."""
        if dist.is_initialized():
            raise RuntimeError(
                "dryrun(world_size=N) builds its own fake process group, but one is already initialized in this "
                "process; call torch.distributed.destroy_process_group() first (or run the dry run in a fresh kernel)"
            )
        from torch.distributed._tools.fake_collectives import collective_ops, sync_ops
        from torch.distributed.device_mesh import init_device_mesh
        from torch.testing._internal.distributed.fake_pg import FakeStore

        # init_process_group wraps sys.excepthook with a "[rank0]:" prefix each time; a dry run gives it back
        self._excepthook = sys.excepthook
        dist.init_process_group("cpu:fake,neuron:fake", store=FakeStore(), rank=0, world_size=self.world_size)
        # With several backend plugins registered ("neuron" first), init_process_group sets no default
        # backend type for a "cpu:fake,neuron:fake" group, and destroying it warns from C++ ("No backend of
        # type 0 found ... Assuming no hooks are registered"): the group's backends are the fake plugin's.
        dist.distributed_c10d._get_default_group()._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)
        try:
            self.mesh = init_device_mesh("neuron", self.mesh_shape, mesh_dim_names=self.mesh_dim_names)
        except BaseException:
            dist.destroy_process_group()
            sys.excepthook = self._excepthook
            raise
        self._tracker = tracker
        self._mode = mode
        from torch.distributed.tensor._sharding_prop import ShardingPropagator

        # DTensor's sharding propagation runs each op on global-shape fake tensors to learn the output's
        # metadata, under this class-level context manager; on the device it runs nothing, so it is not charged.
        self._saved_lock = ShardingPropagator.__dict__.get("_fake_mode_lock")
        ShardingPropagator._fake_mode_lock = mode.pause()  # type: ignore[assignment]
        self._wrap_mesh_init()
        self._ddp.install(mode)
        for op in collective_ops:
            mode.hooks[op] = self._wait if op in sync_ops else self._charge
        _backend._hook_optimizer_steps()  # an optimizer step waits for the collectives in flight, as on the device

    def stop(self) -> None:
        """The exposed communication (read from the dry clocks while they are in force); the group destroyed."""
        try:
            self.comm_s, self.exposed_s = exposed_comm()
        finally:
            if self._tracker is not None:
                from torch.distributed.tensor._sharding_prop import ShardingPropagator

                ShardingPropagator._fake_mode_lock = self._saved_lock  # type: ignore[assignment]
                self._unwrap_mesh_init()
                self._ddp.remove()
            if self._mode is not None:
                with self._mode.pause():  # on the autograd engine's neuron thread, which has a cache of its own
                    _ClearOnDeviceThread.apply(torch.zeros((), device="neuron", requires_grad=True)).backward()
            if dist.is_initialized():
                dist.destroy_process_group()
            _forget_sharding_results()
            if self._excepthook is not None:
                sys.excepthook = self._excepthook
                self._excepthook = None

    def _wrap_mesh_init(self) -> None:
        """Meshes made during the run (FSDP2 + TP concatenates its dp and tp meshes) compute their rank
        coordinates from real CPU tensors, outside the fake mode, as the mesh built before the run did."""
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        from torch.distributed.device_mesh import DeviceMesh

        original = self._mesh_init = DeviceMesh.__init__

        def __init__(mesh: Any, *args: Any, **kwargs: Any) -> None:
            with unset_fake_temporarily():
                original(mesh, *args, **kwargs)

        DeviceMesh.__init__ = __init__  # type: ignore[method-assign]

    def _unwrap_mesh_init(self) -> None:
        from torch.distributed.device_mesh import DeviceMesh

        if self._mesh_init is not None:
            DeviceMesh.__init__ = self._mesh_init  # type: ignore[method-assign]
            self._mesh_init = None

    # -- the charges ---------------------------------------------------------------------------
    def _span(self, pg: Any) -> int:
        """How many consecutive ranks a group's members span (a TP group of 4: one chip; DP over it: more)."""
        name = pg.group_name
        span = self._spans.get(name)
        if span is None:
            ranks = dist.get_process_group_ranks(pg)
            span = self._spans[name] = max(ranks) - min(ranks) + 1
        return span

    def _charge(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], fake: Any) -> Any:
        from torch.distributed._tools.fake_collectives import CollectiveOp

        t0 = time.perf_counter()
        out = completed_work(fake(func, args, kwargs))
        wall = time.perf_counter() - t0
        kind = _kind(func)
        pg = CollectiveOp.get_process_group(func, args)
        world = int(pg.size())
        nbytes = payload_bytes(kind, args, out)
        seconds, algorithm, fabric = collective_seconds(kind, nbytes, world, fabric=fabric_for(self._span(pg)))
        spec = _backend._OPS.get(func._schema.name.split("::")[-1])
        index = spec[1] if spec is not None else None
        blocking = index is not None and index < len(args) and not bool(args[index])  # functional ones are async
        start = clocks.collective(kind, seconds, wall, blocking=blocking)
        self.records.append(CommRecord(kind, nbytes, world, algorithm, fabric, start, seconds, wall, blocking))
        tracker = self._tracker
        if tracker is not None:
            for t in _tensors(args) + _tensors(out):
                if t.device.type == "neuron":
                    tracker.label(t, "collective buffers")
        return out

    def _wait(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], fake: Any) -> Any:
        clocks.wait_until(clocks.state.comm_free_at_s)  # wait_tensor / barrier: compute waits for the collectives
        return fake(func, args, kwargs)

    # -- figures ---------------------------------------------------------------------------------
    def by_kind(self) -> dict[str, tuple[int, int, float]]:
        """Per collective kind: (count, bytes, modeled seconds)."""
        out: dict[str, tuple[int, int, float]] = {}
        for r in self.records:
            n, b, s = out.get(r.kind, (0, 0, 0.0))
            out[r.kind] = (n + 1, b + r.nbytes, s + r.modeled_s)
        return out
