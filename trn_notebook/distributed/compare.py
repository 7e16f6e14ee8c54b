"""``compare_ranks``: one table for 1 device vs DDP vs FSDP2 vs TP on the same global batch.

The seed article's rule: a familiar API does not decide the layout — replicating trades throughput,
sharding trades memory for communication — so a comparison keeps per-device useful throughput,
step time, communication and memory per rank side by side. Each strategy trains the same model
(same seed, same global batch) for a few steps on the warm ranks of :mod:`.pool`; step times are
modeled milliseconds from ``torch.neuron.Event(enable_timing=True)``.
"""

from __future__ import annotations

import inspect
import json
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from . import pool as rank_pool
from .rendezvous import check_world_size

STRATEGIES = ("single", "ddp", "fsdp", "tp")

_LOOP = """
import json as _json, statistics as _st
import torch.nn as _nn
from torch.distributed.device_mesh import init_device_mesh as _mesh
from trn_notebook.distributed import comm_log as _log, exposed_comm as _exposed
_strategy, _gb, _steps, _lr = {strategy!r}, {global_batch}, {steps}, {lr}
_active = _strategy != "single" or rank == 0
_out = None
if _active:
    torch.manual_seed(0)
    _model = make_model().to("neuron")
    _ranks = 1 if _strategy == "single" else world_size
    _b = _gb if _strategy in ("single", "tp") else _gb // world_size
    if _strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as _DDP
        _model = _DDP(_model)
    elif _strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard as _fs
        _m = _mesh("neuron", (world_size,))
        for _child in _model.children():
            if any(True for _ in _child.parameters()):
                _fs(_child, mesh=_m)
        _fs(_model, mesh=_m)
    elif _strategy == "tp":
        from torch.distributed.tensor.parallel import ColwiseParallel as _C, RowwiseParallel as _R
        from torch.distributed.tensor.parallel import parallelize_module as _pm
        _names = [n for n, mod in _model.named_modules() if isinstance(mod, _nn.Linear)]
        _plan = {{n: (_C() if i % 2 == 0 else _R()) for i, n in enumerate(_names)}}
        _model = _pm(_model, _mesh("neuron", (world_size,)), _plan)
    _opt = torch.optim.AdamW(_model.parameters(), lr=_lr)
    _params = sum(
        (p.to_local() if hasattr(p, "to_local") else p).numel() * p.element_size() for p in _model.parameters()
    )
    _times, _comm, _exp, _loss = [], 0.0, 0.0, 0.0
    torch.neuron.reset_peak_memory_stats()
    for _step in range(_steps + 1):  # step 0 warms up
        _x, _y = make_batch(_gb, 1000 * _step)  # the same global batch everywhere; data parallel takes a shard
        _lo = 0 if _strategy in ("single", "tp") else rank * _b
        _x, _y = _x[_lo : _lo + _b].to("neuron"), _y[_lo : _lo + _b].to("neuron")
        _e0, _e1 = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
        _e0.record()
        _t0 = _e0.time_s
        _l = loss_fn(_model(_x), _y)
        _l.backward()
        _opt.step()
        _opt.zero_grad()
        _loss = _l.item()
        _e1.record()
        if _step:
            _times.append(_e0.elapsed_time(_e1))
            _c, _x_s = _exposed(_t0)
            _comm, _exp = _comm + _c, _exp + _x_s
    _out = dict(
        rank=rank, ranks=_ranks, batch_per_rank=_b, step_ms=_st.median(_times),
        step_ms_spread=max(_times) - min(_times), comm_ms=1e3 * _comm / _steps, exposed_comm_ms=1e3 * _exp / _steps,
        peak_memory_bytes=torch.neuron.max_memory_allocated(), param_bytes=_params, loss=_loss,
    )
    del _model, _opt
print("RESULT " + _json.dumps(_out))
"""


def _source_of(fn: Callable[..., Any], name: str) -> str:
    try:
        src = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise TypeError(
            f"{name} must be a function defined in a file or a notebook cell (its source is sent to the ranks)"
        ) from exc
    return f"{src}\n{name} = {fn.__name__}\n"


def compare_ranks(
    make_model: Callable[[], Any],
    make_batch: Callable[[int, int], tuple[Any, Any]],
    *,
    loss_fn: Callable[[Any, Any], Any] | None = None,
    global_batch: int = 16,
    world_size: int = 2,
    strategies: Sequence[str] = STRATEGIES,
    steps: int = 3,
    lr: float = 1e-3,
    quiet: bool = True,
) -> Any:
    """Train the same model under each strategy on the same global batch; returns a DataFrame by strategy.

    ``make_model()`` builds the model on the CPU; ``make_batch(batch_size, seed)`` returns ``(x, y)``
    CPU tensors; ``loss_fn(output, y)`` defaults to MSE. Functions must be defined in a file or a
    notebook cell (their source is sent to the ranks) and import what they use inside their body.
    Columns: ranks, batch per rank, modeled step ms (median, spread), samples/s per device (useful
    throughput), communication and exposed communication ms per step, communication share of the
    step, peak memory and parameter bytes per rank (the max over ranks), and the global batch's loss
    after the last step (equal across strategies up to rounding: the same math, laid out differently).
    Raises ``ValueError`` for an unknown strategy, a ``world_size`` outside 1..16 or a global batch not
    divisible by ``world_size``;
    :class:`~trn_notebook.distributed.launch.RankError` if a rank fails; ``SimulatorOnlyError`` on hardware
    (the ranks are the simulator's, as for ``%%trn ranks``).
    """
    import pandas as pd

    from ..facts import current

    current().require_simulator(
        "trn_notebook.compare_ranks (simulated ranks with modeled collectives)",
        "torchrun --nproc-per-node N script.py with dist.init_process_group('neuron'), one NeuronCore per process",
    )
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; choose from {STRATEGIES}")
    check_world_size(world_size)
    if global_batch % world_size:
        raise ValueError(f"global_batch {global_batch} is not divisible by world_size {world_size}")
    setup = _source_of(make_model, "make_model") + _source_of(make_batch, "make_batch")
    setup += _source_of(loss_fn, "loss_fn") if loss_fn else "loss_fn = torch.nn.functional.mse_loss\n"
    pool, _ = rank_pool.get_pool(world_size)
    lines: list[str] = []
    pool.run(setup, print_line=lines.append)
    rows = []
    for strategy in strategies:
        lines.clear()
        code = _LOOP.format(strategy=strategy, global_batch=global_batch, steps=steps, lr=lr)
        pool.run(code, print_line=lines.append)
        per_rank = []
        for line in lines:
            _, _, text = line.partition("] ")
            if text.startswith("RESULT "):
                result = json.loads(text[len("RESULT ") :])
                if result is not None:
                    per_rank.append(result)
            elif not quiet:
                print(line)
        rows.append(_row(strategy, per_rank, global_batch))
    return pd.DataFrame(rows).set_index("strategy")


def _row(strategy: str, per_rank: list[dict[str, Any]], global_batch: int) -> dict[str, Any]:
    per_rank = sorted(per_rank, key=lambda r: r["rank"])
    ranks = per_rank[0]["ranks"]
    step_ms = max(r["step_ms"] for r in per_rank)  # the slowest rank sets the step
    comm = max(r["comm_ms"] for r in per_rank)
    exposed = max(r["exposed_comm_ms"] for r in per_rank)
    return {
        "strategy": strategy,
        "ranks": ranks,
        "batch_per_rank": per_rank[0]["batch_per_rank"],
        "step_ms": step_ms,
        "step_ms_spread": max(r["step_ms_spread"] for r in per_rank),
        "samples_per_s_per_device": global_batch / (step_ms / 1e3) / ranks,
        "comm_ms": comm,
        "exposed_comm_ms": exposed,
        "comm_share": exposed / step_ms if step_ms else 0.0,
        "peak_memory_per_rank": max(r["peak_memory_bytes"] for r in per_rank),
        "param_bytes_per_rank": max(r["param_bytes"] for r in per_rank),
        # equal shards: the mean of the ranks' losses is the loss of the global batch (comparable across rows)
        "loss": sum(r["loss"] for r in per_rank) / len(per_rank),
    }
