"""Collect the evidence for a migration report from the session's single sources of truth.

Nothing here invents a figure: a row with no measurement says so ("not measured in this session"). Facts are
read through the live backend (:func:`trn_notebook.facts.current`): the simulator, or TorchNeuron on a Trn2,
where what it does not report shows as "n/a".
"""

from __future__ import annotations

import copy
import platform
import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from .. import facts
from ..device.memory.runtime import get_chip
from ..device.ops.policy import policy
from ..display.format import plural
from ..facts.base import NA
from ..numerics_compare.capture import to_device

if TYPE_CHECKING:
    from ..compiler.compile_log import CompileRecord

NOT_MEASURED = "not measured in this session"

# Tolerances for the numerical check (stated in the report): float32 device vs float32 CPU.
FP32_ATOL = 1e-4
FP32_RTOL = 1e-4


@dataclass
class Evidence:
    """Every row of the report, as measured values or ``None`` when not measured."""

    versions: dict[str, str] = field(default_factory=dict)
    completed: str | None = None
    numerics: dict[str, Any] | None = None
    three_way: dict[str, Any] | None = None  # the session's compare_numerics result, as facts (three_way_facts)
    placement: dict[str, Any] = field(default_factory=dict)
    latency: dict[str, Any] | None = None
    startup: dict[str, Any] | None = None
    maintain: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # stage -> why it could not run (e.g. device memory)


def _versions() -> dict[str, str]:
    from .._version import __version__

    backend = facts.current()
    versions = {"python": platform.python_version(), "torch": torch.__version__, "trn-notebook": __version__}
    if backend.is_simulator:
        chip = get_chip()
        versions["chip model"] = f"{chip.long_name} ({chip.name}), {chip.logical_cores} logical cores"
        versions["execution"] = "trn_notebook simulator (no Trainium hardware; device times are modeled)"
    else:
        versions["device"] = str(backend.device_properties().get("name", NA))
        versions["execution"] = f"{backend.name} on Trainium hardware (per-op device times not measured)"
    return versions


def _placement() -> dict[str, Any]:
    rows = facts.current().placement()
    present = rows.ops_by_category  # the categories that ran (the report lists only those)
    calls = {k: v for k, v in rows.calls_by_category.items() if present.get(k)}
    fallbacks = sorted(
        (
            (
                name.removeprefix("aten::"),
                NA if r.calls is None else r.calls,
                NA if r.bytes_moved is None else r.bytes_moved,
                r.source or NA,
            )
            for name, r in rows.fallbacks
        ),
        key=lambda r: -r[1] if isinstance(r[1], int) else 0,
    )
    return {"calls": calls, "fallbacks": fallbacks[:10], "ops_seen": len(rows)}


def _first_tensor(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, tuple | list):
        for o in out:
            if isinstance(o, torch.Tensor):
                return o
    raise TypeError("the model's output holds no tensor to compare")


def _cpu_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A CPU copy of ``model`` that never copies its device tensors on the device (each goes straight to the host)."""
    memo: dict[int, Any] = {}
    for t in [*model.parameters(), *model.buffers()]:
        if t.device.type != "cpu":
            host = t.detach().cpu()
            memo[id(t)] = torch.nn.Parameter(host, t.requires_grad) if isinstance(t, torch.nn.Parameter) else host
    return copy.deepcopy(model, memo)


def _on_device(model: torch.nn.Module) -> bool:
    tensors = [*model.parameters(), *model.buffers()]
    return bool(tensors) and all(t.device.type == "neuron" for t in tensors)


def device_model(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` itself when it already lives on the device, else one device copy of it."""
    return model if _on_device(model) else _cpu_copy(model).to("neuron")


def _numerics(model: torch.nn.Module, dev_model: torch.nn.Module, inputs: tuple[Any, ...]) -> dict[str, Any]:
    """Three-way check: device vs CPU float32, and CPU bfloat16 vs CPU float32 (the precision noise floor)."""
    ref_model = _cpu_copy(model).float().eval()
    bf16_model = _cpu_copy(model).to(torch.bfloat16).eval()
    with torch.no_grad():
        ref = _first_tensor(ref_model(*to_device(inputs, "cpu"))).float()
        dev = _first_tensor(dev_model(*to_device(inputs, "neuron"))).cpu().float()
        bf16 = _first_tensor(bf16_model(*to_device(inputs, "cpu", torch.bfloat16))).float()
    dev_err = (dev - ref).abs().max().item() if ref.numel() else 0.0
    bf16_err = (bf16 - ref).abs().max().item() if ref.numel() else 0.0
    ok = bool(torch.allclose(dev, ref, atol=FP32_ATOL, rtol=FP32_RTOL))
    return {
        "device_vs_cpu_fp32_max_abs": dev_err,
        "cpu_bf16_vs_cpu_fp32_max_abs": bf16_err,
        "tolerance": f"atol={FP32_ATOL:g}, rtol={FP32_RTOL:g} (float32 device vs float32 CPU)",
        "passed": ok,
    }


def three_way_facts(comparison: Any, origin: str) -> dict[str, Any]:
    """The report's facts of one :class:`~trn_notebook.numerics_compare.NumericsComparison` (``origin``: who ran it)."""
    policy = comparison.policy
    hw = comparison.hardware
    return {
        "model": comparison.model,
        "origin": origin,
        "mode": comparison.mode,
        "policy": f"Trainium hardware ({hw}): the device's own numerics" if hw else policy.label(),
        "sourced": [] if hw else [item for item, _ in policy.sourced()],
        "assumed": [] if hw else list(policy.assumed()),
        "threshold": comparison.threshold,
        "passed": comparison.passed,
        "acceptable": comparison.acceptable,
        "verdict": comparison.verdict(),
        "modules": len(comparison.rows),
    }


def _three_way(model: torch.nn.Module, inputs: tuple[Any, ...]) -> dict[str, Any]:
    """A three-way comparison of ``model`` under the numerics policy in force (its own copies of the model)."""
    from ..numerics_compare import compare_numerics

    comparison = compare_numerics(model, inputs)
    return three_way_facts(comparison, "this report's run (trn_notebook.compare_numerics, policy in force)")


def _session_three_way() -> dict[str, Any] | None:
    from ..numerics_compare import last_comparison

    comparison = last_comparison()
    return None if comparison is None else three_way_facts(comparison, "the session's last compare_numerics")


def _latency(dev_model: torch.nn.Module, inputs: tuple[Any, ...], runs: int, batch: int | None) -> dict[str, Any]:
    """Synchronised eager latency on the device: wall and modeled device time per run, each labelled."""
    dev_inputs = to_device(inputs, "neuron")
    backend = facts.current()
    walls: list[float] = []
    modeled: list[float] = []
    with torch.no_grad():
        dev_model(*dev_inputs)  # warm-up (first call), excluded
        torch.neuron.synchronize()
        for _ in range(runs):
            before = backend.device_time_s()
            t0 = time.perf_counter()
            dev_model(*dev_inputs)
            torch.neuron.synchronize()
            walls.append(time.perf_counter() - t0)
            after = backend.device_time_s()
            if before is not None and after is not None:
                modeled.append(after - before)
    wall_p50 = statistics.median(walls)
    dev_p50 = statistics.median(modeled) if modeled else None
    return {
        "runs": runs,
        "batch": batch,
        "boundary": "synchronised (torch.neuron.synchronize() after each run); first call excluded",
        "wall_p50_s": wall_p50,
        "modeled_device_p50_s": dev_p50,
        "wall_label": "simulator on this host" if backend.is_simulator else "Trainium hardware",
        "throughput_per_s_modeled": (batch / dev_p50) if batch and dev_p50 else None,
        "throughput_per_s_wall": (batch / wall_p50) if batch and wall_p50 > 0 else None,
    }


def _compile_records() -> list[CompileRecord]:
    return facts.current().compile_records()


def _startup(records: list[CompileRecord]) -> dict[str, Any] | None:
    if not records:
        return None
    s = facts.current().compile_summary()  # TorchNeuron's metrics do not say hit or miss: None
    warm = [r.warm_s for r in records if r.warm_s]
    return {
        "graphs": len(records),
        # None when every graph came from a cache: a cold compile did not happen here, so it is not 0 s
        "cold_compile_s": (s.miss_compile_s if s.misses else None)
        if s is not None
        else sum(float(r.compile_s or 0.0) for r in records),
        "disk_hit_compile_s": s.disk_hit_compile_s if s is not None else 0.0,
        # the Neuron compiler's modeled time for the same cold compiles (compiler/compile_time.py)
        "modeled_neuron_compile_s": s.modeled_neuron_s if s is not None and s.misses else None,
        "cache": f"{s.misses} miss, {s.disk_hits} disk hit, {s.memory_hits} memory hit"
        if s is not None
        else f"cache hits {NA} (the backend's metrics do not say)",
        "warm_call_s": statistics.median(warm) if warm else None,
        "wall_label": "simulator on this host" if facts.current().is_simulator else "Trainium hardware",
        "recompile_reasons": [reason for r in records for reason in r.recompile_reasons][:5],
    }


def _custom_kernels() -> str:
    """The custom (NKI) kernels that ran on the device this session: eagerly, from the placement log, and
    inside compiled graphs, from the compile records (each graph's ``custom_kernels``, with its runs)."""
    from ..nki.bridge import CATEGORY

    backend = facts.current()
    eager = {name: int(r.calls or 0) for name, r in backend.placement().only(CATEGORY).items()}
    graphs: dict[str, list[int]] = {}  # kernel -> runs of each compiled graph that calls it
    for record in backend.compile_records():
        for name in record.extra.get("custom_kernels") or ():
            graphs.setdefault(str(name), []).append(int(record.runs))
    if not eager and not graphs:
        return "none ran on neuron in this session, eagerly or in a compiled graph"
    parts = []
    for name in sorted(eager.keys() | graphs.keys()):
        where = [plural(eager[name], "eager call")] if name in eager else []
        if name in graphs:
            where.append(f"in {plural(len(graphs[name]), 'compiled graph')}, {plural(sum(graphs[name]), 'run')}")
        parts.append(f"{name} ({'; '.join(where)})")
    return ", ".join(parts)


def _maintain(records: list[CompileRecord]) -> dict[str, Any]:
    options: dict[str, str] = {}
    for r in records:
        options.update({k: str(v) for k, v in r.effective_options.items()})
    buckets: list[str] = []
    try:
        from ..compiler import shape_log

        buckets = sorted({str(v.policy) for v in shape_log.snapshot().values() if v.policy})
    except ImportError:
        pass
    simulator = facts.current().is_simulator
    overrides: Any = {name: rule.category for name, rule in policy._overrides.items()} if simulator else NA
    from ..device.registration import SUPPORTED_TORCH

    return {
        "custom kernels": _custom_kernels() if simulator else f"{NA} (not inspected)",
        "bucket policies": buckets,
        "compile options in effect": options,
        "op policy overrides": overrides,
        "version constraints": f"torch=={torch.__version__.split('+')[0]} in this session "
        f"(trn-notebook supports torch{SUPPORTED_TORCH})",
    }


def collect_evidence(
    model: torch.nn.Module | None = None,
    inputs: tuple[Any, ...] | Any = None,
    *,
    runs: int = 5,
    batch: int | None = None,
) -> Evidence:
    """Gather every row; with ``model`` and ``inputs`` also run the numerical check and the latency runs.

    The model goes to the device at most once (not at all when it is there already) for the FP32 check and
    the latency runs; the three-way comparison (``trn_notebook.compare_numerics`` under the numerics policy in
    force) makes its own CPU FP32, CPU BF16 and device copies. Without a model, the session's last three-way
    comparison is used when there is one. A stage that
    runs out of device memory is reported as not run, with the reason, in ``skipped``. Raises
    ``ValueError`` for ``runs`` below 1, and whatever else the model raises on the device (the
    report must not hide a failed run).
    """
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise ValueError(f"runs must be a positive integer (timed runs after one warm-up), got {runs!r}")
    ev = Evidence(versions=_versions())
    if model is not None:
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        was_training = model.training
        try:
            dev_model = device_model(model).eval()
        except torch.OutOfMemoryError as exc:
            why = f"out of device memory moving the model there: {str(exc)[:160]}"
            ev.skipped.update(numerics=why, latency=why, three_way=why)
        else:
            for stage, run in (
                ("numerics", lambda: _numerics(model, dev_model, inputs)),
                ("latency", lambda: _latency(dev_model, inputs, runs, batch)),
                ("three_way", lambda: _three_way(model, inputs)),
            ):
                try:
                    setattr(ev, stage, run())
                except torch.OutOfMemoryError as exc:
                    ev.skipped[stage] = f"out of device memory: {str(exc)[:160]}"
            del dev_model
        finally:
            model.train(was_training)
        if ev.latency is not None:
            ev.completed = f"{type(model).__name__}: forward completed on neuron ({runs + 1} runs)"
    if ev.three_way is None and "three_way" not in ev.skipped:
        ev.three_way = _session_three_way()
    ev.placement = _placement()
    total = sum(v for v in ev.placement["calls"].values() if isinstance(v, int))
    if model is None and total:
        ev.completed = f"{total} device op calls completed in this session (no model given)"
    elif model is None and ev.placement["ops_seen"]:
        ev.completed = f"{ev.placement['ops_seen']} distinct device ops executed in this session (no model given)"
    records = _compile_records()
    ev.startup = _startup(records)
    ev.maintain = _maintain(records)
    return ev
