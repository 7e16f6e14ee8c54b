"""The executable: planned IR + schedule + the codegen'd program, run as ONE launch per graph.

On the device it takes the host views of the neuron arguments once, runs the program's closures
on them with CPU torch (intermediates stay plain host tensors, no allocator round trips), adopts
the outputs as device memory with ``runtime.wrap``, and charges the clocks and the placement log
once for the whole graph (``graph:<name>``) with the schedule's modeled device time; each host call in the
graph (a CPU fallback of eager, :mod:`.host_call`) is then charged as eager charges that fallback. While it
runs, the planned scratch arena is reserved in the simulated HBM, so memory counters and OOMs see
the graph's working set.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ..device import costmodel
from ..device.clocks import clocks
from ..device.dry import session as dryrun
from ..device.dry.host_shapes import GROUPED_MM_ASSUMED
from ..device.memory.runtime import allocator, cached_host_view, wrap
from ..device.placement import placement_log
from .codegen import Program
from .compile_log import LiveRecord, compile_log
from .fusion import base_of
from .host_call import HostCalls
from .ir import Graph, TensorType, contiguous_strides
from .schedule import Schedule
from .text import constant_outputs

_perf = time.perf_counter
_Tensor = torch.Tensor


class Executable:
    """A compiled graph; call it AOT-boxed style with a list of arguments."""

    def __init__(
        self,
        graph: Graph,
        schedule: Schedule,
        record: LiveRecord,
        on_device: bool,
        constants: list[torch.Tensor] | None = None,
    ) -> None:
        self._boxed_call = True  # an instance attribute: wrappers copy __dict__, not class attributes
        self.graph = graph
        self.schedule = schedule
        self.program = Program(graph)
        self.record = record
        self.on_device = on_device
        self.launch_name = f"graph:{record.graph_name}"
        self.constants = list(constants or ())  # lifted get_attr tensors: the graph's trailing inputs
        self.device_s = schedule.device_s
        self.host_s = costmodel.get_cost_constants().eager_host_dispatch_s
        # graph outputs that are graph inputs are returned as the caller's own tensor objects
        index = {name: i for i, (name, _) in enumerate(graph.inputs)}
        self.passthrough = tuple(-1 if o is None else index.get(o.name, -1) for o in graph.outputs)
        # the planned arena minus what the outputs occupy: scratch HBM reserved while the graph runs
        types = graph.types()
        out_bytes = sum(t.nbytes for o in graph.outputs if o is not None and (t := types.get(o.name)) is not None)
        self.scratch_bytes = max(0, schedule.peak_bytes - out_bytes)
        self.constant_outputs = constant_outputs(graph)  # Python numbers the graph returns, by position
        self.host_calls = HostCalls(graph)  # CPU fallbacks inside the graph, charged as eager charges them
        # MoE experts: grouped matmuls charged from their shapes, routing unknown in a dry run (stated there)
        self.grouped_mms = sum(1 for n in graph.nodes if n.op == "grouped_mm")

    def __call__(self, args: list[Any]) -> list[Any]:
        t0 = _perf()
        if self.constants:
            args = [*args, *self.constants]
        if self.on_device and (session := dryrun.storage_owner()) is not None and _any_dry(args):
            return self._dry_call(args, t0, session)  # any thread: backward graphs run on autograd's device thread
        if not self.on_device:
            outs = self.program(args)
            self._count(_perf() - t0)
            return self._with_constants(outs)
        # cached host views: a training loop passes the same parameters every run (one view per geometry)
        hosts = [cached_host_view(a) if isinstance(a, _Tensor) and not a.is_cpu else a for a in args]
        scratch = allocator.malloc(self.scratch_bytes) if self.scratch_bytes else None
        walls: list[float] = []
        try:
            if self.host_calls:
                outs, walls = self.host_calls.run(self.program, hosts)
            else:
                outs = self.program(hosts)
        finally:
            if scratch is not None:
                allocator.free(scratch)
        result = [
            args[p] if p >= 0 else wrap(o, True) if type(o) is _Tensor or isinstance(o, _Tensor) else o
            for o, p in zip(outs, self.passthrough)
        ]
        wall = _perf() - t0
        host_wall = sum(walls)  # the host calls' own wall goes to their fallback charges
        clocks.launch(self.launch_name, self.device_s, self.host_s, wall - host_wall, kind="graph", detail=self)
        placement_log.record(self.launch_name, "native", wall - host_wall, self.device_s)
        if self.host_calls:
            self.host_calls.charge(walls)
        self._count(wall)
        return self._with_constants(result)

    def _dry_call(self, args: list[Any], t0: float, session: dryrun.DrySession) -> list[Any]:
        """A run inside a dry run: nothing executes; the outputs are shape-only tensors of the graph's declared
        types (blocks of the dry allocator), the scratch arena is reserved there while the graph "runs", and the
        clocks and placement log are charged exactly as a real run charges them (one launch, the schedule's time).
        Raises what the dry allocator raises (a modeled out-of-memory)."""
        types = self.graph.types()
        roots = base_of(self.graph)  # a view's bytes are its root's, as wrap() shares the host storage
        inputs = {name: i for i, (name, _) in enumerate(self.graph.inputs)}
        buffers: dict[str, torch.Tensor] = {}
        # the graph's scratch arena is held while it runs; its outputs are adopted afterwards, as wrap() does
        if self.scratch_bytes:
            session.tracker.hold_scratch(self.scratch_bytes)
        outs: list[Any] = []
        for o, p in zip(self.graph.outputs, self.passthrough):
            t = None if o is None else types.get(o.name)
            if p >= 0:
                outs.append(args[p])
            elif o is None or t is None:
                outs.append(None)
            else:
                root = roots.get(o.name, o.name)
                base = args[inputs[root]] if root in inputs else buffers.get(root)
                if base is None:
                    base = buffers[root] = _shape_only(types.get(root) or t)
                outs.append(base if root == o.name else _view(base, t, session.mode))
        wall = _perf() - t0
        clocks.launch(self.launch_name, self.device_s, self.host_s, wall, kind="graph", detail=self)
        placement_log.record(self.launch_name, "native", wall, self.device_s)
        if self.host_calls:
            self.host_calls.charge()  # the same modeled charges; nothing ran, so no wall
        for _ in range(self.grouped_mms):
            session.mode.assume(GROUPED_MM_ASSUMED)
        self._count(wall)
        return self._with_constants(outs)

    def _with_constants(self, outs: list[Any]) -> list[Any]:
        """``outs`` with the graph's Python-number outputs in their places (``None`` there until now)."""
        for i, v in self.constant_outputs.items():
            outs[i] = v
        return outs

    def _count(self, wall: float) -> None:
        compile_log.record_run(self.record, wall)


def _any_dry(args: list[Any]) -> bool:
    return any(isinstance(a, _Tensor) and dryrun.is_dry(a) for a in args)


def _strides(t: TensorType) -> tuple[int, ...]:
    return t.strides if t.strides is not None else contiguous_strides(t.shape)


def _shape_only(t: TensorType) -> torch.Tensor:
    """A new shape-only neuron tensor of type ``t`` (inside a dry run: a block of its allocator)."""
    return torch.empty_strided(t.shape, _strides(t), dtype=t.torch_dtype, device="neuron")


def _view(base: torch.Tensor, t: TensorType, mode: Any) -> torch.Tensor:
    """A view of type ``t`` on ``base``'s storage (no new block, and, as ``wrap()`` of a host view, no op
    charged: made with the dry mode paused), or a new tensor when no such view exists (a dtype view, or one
    reaching past the base's storage)."""
    if base.dtype is t.torch_dtype:
        try:
            with mode.pause():
                return base.as_strided(t.shape, _strides(t), base.storage_offset())
        except RuntimeError:
            pass
    return _shape_only(t)
