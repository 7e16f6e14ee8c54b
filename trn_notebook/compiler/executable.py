"""The executable: planned IR + schedule + the codegen'd program, run as ONE launch per graph.

On the device it takes the host views of the neuron arguments once, runs the program's closures
on them with CPU torch (intermediates stay plain host tensors, no allocator round trips), adopts
the outputs as device memory with ``runtime.wrap``, and charges the clocks and the placement log
once for the whole graph (``graph:<name>``) with the schedule's modeled device time. While it
runs, the planned scratch arena is reserved in the simulated HBM, so memory counters and OOMs see
the graph's working set.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from ..device import costmodel
from ..device.clocks import clocks
from ..device.placement import placement_log
from ..device.runtime import allocator, cached_host_view, wrap
from .codegen import Program
from .compile_log import LiveRecord, compile_log
from .ir import Graph
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

    def __call__(self, args: list[Any]) -> list[Any]:
        t0 = _perf()
        if self.constants:
            args = [*args, *self.constants]
        if not self.on_device:
            outs = self.program(args)
            self._count(_perf() - t0)
            return self._with_constants(outs)
        # cached host views: a training loop passes the same parameters every run (one view per geometry)
        hosts = [cached_host_view(a) if isinstance(a, _Tensor) and not a.is_cpu else a for a in args]
        scratch = allocator.malloc(self.scratch_bytes) if self.scratch_bytes else None
        try:
            outs = self.program(hosts)
        finally:
            if scratch is not None:
                allocator.free(scratch)
        result = [
            args[p] if p >= 0 else wrap(o) if type(o) is _Tensor or isinstance(o, _Tensor) else o
            for o, p in zip(outs, self.passthrough)
        ]
        wall = _perf() - t0
        clocks.launch(self.launch_name, self.device_s, self.host_s, wall, kind="graph", detail=self)
        placement_log.record(self.launch_name, "native", wall, self.device_s)
        self._count(wall)
        return self._with_constants(result)

    def _with_constants(self, outs: list[Any]) -> list[Any]:
        """``outs`` with the graph's Python-number outputs in their places (``None`` there until now)."""
        for i, v in self.constant_outputs.items():
            outs[i] = v
        return outs

    def _count(self, wall: float) -> None:
        compile_log.record_run(self.record, wall)
