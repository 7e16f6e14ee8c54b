"""The truth harness: one workload run for real on the simulator, then dry; the figures to compare."""

from __future__ import annotations

import copy
import gc
import re
from collections.abc import Callable
from typing import Any

import torch

import trn_notebook
from trn_notebook import state
from trn_notebook.device.clocks import clocks
from trn_notebook.device.memory.runtime import allocator
from trn_notebook.device.placement import placement_log

_GRAPH_N = re.compile(r"^(graph:.*)_\d+$")
Workload = Callable[[torch.nn.Module, dict[str, torch.Tensor]], Any]


def figures(placement: Any, clock: Any, memory: Any) -> dict[str, Any]:
    """The comparable figures: placement per op (category, calls, modeled s, bytes), modeled clocks, allocator."""
    # a compiled graph's launch is named after the graph, whose counter differs between the two compiles
    ops = {
        _GRAPH_N.sub(r"\1", n): (e.category, e.calls, round(e.device_s, 12), e.h2d, e.d2h) for n, e in placement.items()
    }
    # reshape picks _reshape_alias for plain tensors and view for tensor subclasses (FakeTensor); both are
    # host-only metadata ops with no modeled cost, counted here as one
    alias = ops.pop("_reshape_alias", None)
    if alias is not None:
        cat, calls, *_ = ops.get("view", ("host_only", 0, 0.0, 0, 0))
        ops["view"] = (cat, calls + alias[1], 0.0, 0, 0)
    c = clock
    clk = (round(c.sim_host_s, 12), round(c.sim_device_s, 12), round(c.device_free_at_s, 12), c.sync_points, c.launches)
    m = memory.counters
    mem = (m.allocated, m.active, m.reserved, m.peak_allocated, m.peak_active, m.peak_reserved, m.num_allocs,
           m.num_frees, m.num_segments, m.num_ooms)  # fmt: skip
    return {"ops": ops, "clocks": clk, "memory": mem, "phases": memory.phase_peaks}


def real_and_dry(model: torch.nn.Module, inputs: dict[str, torch.Tensor], work: Workload) -> tuple[dict, dict]:
    """Run ``work`` on a neuron copy of ``model`` for real, then in a dry run; both sets of figures.

    No attention mask is passed: ``transformers`` skips its data-dependent mask check (``mask.all()``,
    a host sync) when it sees a FakeTensor, so with a mask the model itself runs different code dry.
    """
    inputs = {k: v for k, v in inputs.items() if k != "attention_mask"}
    trn_notebook.reset()
    allocator.reset()
    real_model = copy.deepcopy(model)
    with torch.random.fork_rng():
        dev = real_model.to("neuron")
        work(dev, {k: v.to("neuron") for k, v in inputs.items()})
    del dev, real_model
    # compiled graphs hold the tensors they lifted as constants (the model's parameters) and dynamo's caches the
    # model; the dry run hands every shape-only tensor back at its exit, so both are dropped before counting
    torch._dynamo.reset()
    regs = state.registrations()
    if "compiled_graphs" in regs:
        regs["compiled_graphs"].owner.reset()
    gc.collect()
    real = figures(placement_log.snapshot(), clocks.snapshot(), allocator.snapshot())
    dry_model = copy.deepcopy(model)
    with trn_notebook.dryrun() as run:
        dev = dry_model.to("neuron")
        work(dev, {k: v.to("neuron") for k, v in inputs.items()})
        del dev
        gc.collect()  # as before the real figures: results caught in reference cycles are freed
    f = run.figures
    return real, figures(f.placement, f.clocks, f.memory)
