"""The zoo's ``dry`` stage: full-size model cards from published dimensions on ``neuron``, shapes only.

Each card is a :class:`~trn_notebook.fidelity.configs.ModelSpec` (the fidelity ledger's configs: one place
per fact): a ``transformers`` config built from the published dimensions, never a download. Each stage
builds the model on ``meta`` inside :func:`trn_notebook.dryrun`, gives it shape-only storage on ``neuron``
with ``to_empty`` (as :func:`trn_notebook.plan` does: a real run loads weights, a dry run needs none), in
bf16, on one trn2 logical core (LNC=2), and runs one workload, eager or ``torch.compile(backend="neuron")``:

* ``forward``: ``no_grad`` forward of ``batch × tokens`` (no KV cache);
* ``train``: forward with labels, backward, ``AdamW(foreach=True)`` step;
* ``decode``: a prefill of ``context`` tokens building the KV cache, then one decode step of one token
  (the figures of time are the decode step's; the memory peak is the whole run's, prefill included).

MoE cards run ``transformers``' ``grouped_mm`` experts (as the fidelity ledger walks them): its shapes do not
depend on the routing, where the default per-expert loop reads the routing on the host (``nonzero``), which
a dry run can only stand in for with every expert taking every token.

Every figure is **modeled** (cost model and shape-only allocator); ``wall_s`` and ``rss_mb`` are **measured**
on this machine for the dry run itself (the peak RSS of the stage's process).
"""

from __future__ import annotations

import math
import resource
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ..fidelity.configs import DEEPSEEK_V3, LLAMA_8B, LLAMA_70B, MIXTRAL_8X7B, QWEN3_32B, ModelSpec

CARDS: tuple[ModelSpec, ...] = (LLAMA_8B, LLAMA_70B, MIXTRAL_8X7B, QWEN3_32B, DEEPSEEK_V3)
DRY_STAGES = ("forward", "forward_compiled", "train", "train_compiled", "decode", "decode_compiled")
DRY_TITLES = {
    "forward": "forward (eager)",
    "forward_compiled": "forward (compiled)",
    "train": "training step (eager)",
    "train_compiled": "training step (compiled)",
    "decode": "decode step (eager)",
    "decode_compiled": "decode step (compiled)",
}
CHIP = "trn2"
LNC = 2


@dataclass(frozen=True)
class DryWorkload:
    """The sizes of the dry stage: ``batch × tokens`` for forward and training, ``context`` for decode."""

    batch: int = 1
    tokens: int = 2048
    context: int = 2048


@dataclass
class DryStage:
    """The figures of one stage of one card (modeled unless named ``wall_s`` / ``rss_mb``, measured)."""

    status: str  # pass or fail
    detail: str = ""
    step_s: float = 0.0  # modeled: host time of the step after its closing sync (what a user waits)
    device_s: float = 0.0  # modeled device busy time of the step
    launches: int = 0
    ops: int = 0  # op calls charged (the whole run: build, prefill and step)
    fallbacks: int = 0  # distinct ops that fell back to the host
    value_reads: int = 0  # data-dependent host reads (findings)
    graphs: int = 0  # compiled graphs the run launched
    compile_modeled_s: float = 0.0  # modeled Neuron compile time of those graphs
    peak_allocated: int = 0
    peak_reserved: int = 0
    peak_phase: str = ""
    by_category: dict[str, int] = field(default_factory=dict)  # at the allocated peak
    capacity: int = 0  # HBM of one logical core of the chip at the LNC
    wall_s: float = 0.0  # measured: the dry run's own time here
    rss_mb: float = 0.0  # measured: peak RSS of the process that ran the stage

    @property
    def fits(self) -> bool:
        """True when the modeled peak allocated fits one logical core's HBM."""
        return self.status == "pass" and self.peak_allocated <= self.capacity


@dataclass
class DryCard:
    """One card's stages (``DRY_STAGES`` order) and what it is."""

    name: str
    source: str
    params: int = 0
    workload: dict[str, int] = field(default_factory=dict)
    stages: dict[str, DryStage] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DryCard:
        """Inverse of :meth:`to_json`."""
        stages = {k: DryStage(**v) for k, v in data.get("stages", {}).items()}
        return cls(data["name"], data["source"], data.get("params", 0), data.get("workload", {}), stages)


def card(name: str) -> ModelSpec:
    """The full-size card called ``name``; ``KeyError`` naming the known ones."""
    for c in CARDS:
        if c.name == name:
            return c
    raise KeyError(f"no full-size card {name!r}; known: {', '.join(c.name for c in CARDS)}")


def _config(spec: ModelSpec) -> Any:
    cfg = spec.config()
    cfg._attn_implementation = "sdpa"
    if spec.is_moe:
        cfg._experts_implementation = "grouped_mm"
    return cfg


def _cache_kw(out: Any) -> dict[str, Any]:
    # transformers >= 5.2x names the KV cache ``cache`` (``past_key_values`` warns); older 5.x the old name
    name = "cache" if "cache" in out else "past_key_values"
    return {name: out[name]}


def run_stage(spec: ModelSpec, stage: str, work: DryWorkload = DryWorkload()) -> tuple[DryStage, int]:
    """One stage of ``spec`` under its own dry run; the figures and the model's parameter count.

    Raises ``ValueError`` for an unknown stage; any error of the model itself is the stage's ``fail``.
    """
    if stage not in DRY_STAGES:
        raise ValueError(f"unknown dry stage {stage!r}; known: {', '.join(DRY_STAGES)}")
    from transformers import AutoModelForCausalLM

    from ..compiler.compile_time import record_compile_s
    from ..device.chips import get_chip_spec, with_cores
    from ..device.clocks import clocks
    from ..dry.run import dryrun
    from ..planner.run import NO_OOM, _chip, _default_dtype
    from .stages import first_line

    chip = get_chip_spec(CHIP)
    chip = with_cores(chip, chip.physical_cores // LNC)
    kind, compiled = stage.removesuffix("_compiled"), stage.endswith("_compiled")
    torch._dynamo.reset()
    run = dryrun(f"{spec.name} {stage}", capacity=NO_OOM, categories=True)
    params = 0
    step = (0.0, 0.0, 0)
    t0 = time.perf_counter()
    try:
        with _chip(chip), run, _default_dtype(torch.bfloat16):
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(_config(spec))
            params = sum(p.numel() for p in model.parameters())
            with run.phase("init"):
                model.to_empty(device="neuron")
            model.train(kind == "train")
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True) if kind == "train" else None
            run.track(model, *([opt] if opt is not None else []))
            fn = torch.compile(model, backend="neuron") if compiled else model
            step = _workload(run, fn, kind, work, opt, clocks)
    except Exception as exc:
        return DryStage("fail", first_line(exc), wall_s=time.perf_counter() - t0, rss_mb=_rss_mb()), params
    wall = time.perf_counter() - t0
    p, m = run.placement, run.memory
    records = run.compiled
    modeled = [s for r in records if (s := record_compile_s(r)) is not None]
    by_cat = dict(run.by_category or {})
    return (
        DryStage(
            "pass",
            step_s=step[0],
            device_s=step[1],
            launches=step[2],
            ops=int(p.total_calls),
            fallbacks=len(p.fallbacks),
            value_reads=len(run.findings),
            graphs=len(records),
            compile_modeled_s=float(sum(modeled)),
            peak_allocated=m.counters.peak_allocated,
            peak_reserved=m.counters.peak_reserved,
            peak_phase=run._session.tracker.peak_phase,
            by_category={k: v for k, v in by_cat.items() if v},
            capacity=chip.device_hbm_bytes,
            wall_s=wall,
            rss_mb=_rss_mb(),
        ),
        params,
    )


def _workload(run: Any, fn: Any, kind: str, work: DryWorkload, opt: Any, clocks: Any) -> tuple[float, float, int]:
    """Run one stage's work; (modeled step seconds, modeled device busy seconds, launches) of the step."""
    dev = "neuron"
    if kind == "decode":
        with torch.no_grad(), run.phase("prefill"):
            ctx = torch.zeros(work.batch, work.context, dtype=torch.long, device=dev)
            out = fn(input_ids=ctx, use_cache=True, logits_to_keep=1)
        clocks.sync("end of the prefill")
    start = clocks.snapshot()
    ids = torch.zeros(work.batch, 1 if kind == "decode" else work.tokens, dtype=torch.long, device=dev)
    if kind == "forward":
        with torch.no_grad(), run.phase("forward"):
            fn(input_ids=ids, use_cache=False)
    elif kind == "decode":
        with torch.no_grad(), run.phase("decode"):
            fn(input_ids=ids, logits_to_keep=1, **_cache_kw(out))
    else:
        with run.phase("forward"):
            loss = fn(input_ids=ids, labels=ids, use_cache=False).loss
        with run.phase("backward"):
            loss.backward()
        with run.phase("optimizer"):
            opt.step()  # no zero_grad: the gradients stay attached, so the peak's categories name them
        del loss
    clocks.sync(f"end of the {kind} step")
    end = clocks.snapshot()
    return end.sim_host_s - start.sim_host_s, end.sim_device_s - start.sim_device_s, end.launches - start.launches


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def chips_needed(peak: int, capacity: int, lnc: int = LNC) -> int:
    """Lower bound on trn2 chips for ``peak`` bytes if it could be split perfectly (``capacity`` per logical core)."""
    from ..device.chips import get_chip_spec

    cores = get_chip_spec(CHIP).physical_cores // lnc
    return max(1, math.ceil(peak / (capacity * cores))) if capacity else 0


def run_card(spec: ModelSpec, stages: tuple[str, ...] = DRY_STAGES, work: DryWorkload = DryWorkload()) -> DryCard:
    """Every stage of ``spec`` in this process (each its own dry run); a failing stage never stops the others."""
    result = DryCard(spec.name, spec.source, workload=asdict(work))
    for stage in stages:
        result.stages[stage], params = run_stage(spec, stage, work)
        result.params = result.params or params
    torch._dynamo.reset()
    return result


def select_cards(patterns: str | None = None) -> list[ModelSpec]:
    """Cards whose names match any comma-separated glob (case-insensitive; all if none); ``ValueError`` if one matches none."""
    import fnmatch

    if not patterns:
        return list(CARDS)
    globs = [g.strip().lower() for g in patterns.split(",") if g.strip()]
    unmatched = [g for g in globs if not any(fnmatch.fnmatchcase(c.name.lower(), g) for c in CARDS)]
    if unmatched:
        raise ValueError(f"no full-size card matches {unmatched}; known: {', '.join(c.name for c in CARDS)}")
    return [c for c in CARDS if any(fnmatch.fnmatchcase(c.name.lower(), g) for g in globs)]


def run_dry(
    patterns: str | None = None,
    stages: tuple[str, ...] = DRY_STAGES,
    work: DryWorkload = DryWorkload(),
    timeout_s: float = 3600.0,
    progress: Any = None,
) -> list[DryCard]:
    """The dry stage over the selected cards, each (card, stage) in its own ``trn_notebook.zoo.dry_worker``
    process (so ``rss_mb`` is that stage's own peak, and a crash or a timeout is that stage's ``fail``)."""
    import sys

    from ..compat.isolate import run_worker

    cmd = [sys.executable, "-m", "trn_notebook.zoo.dry_worker", str(work.batch), str(work.tokens), str(work.context)]
    out = []
    for spec in select_cards(patterns):
        result = DryCard(spec.name, spec.source, workload=asdict(work))
        for stage in stages:
            found, died = run_worker(cmd, [f"{spec.name}\t{stage}"], timeout_s)
            if found:
                result.stages[stage] = DryStage(**found[0]["stage"])
                result.params = result.params or int(found[0]["params"])
            else:
                result.stages[stage] = DryStage("fail", f"worker died: {died}"[:300])
            if progress:
                progress(result, stage)
        out.append(result)
    return out


# Where a zoo model at tiny size gives different dry and real figures (eager forward and training step, the
# survey of every zoo model; the compiled stages were compared for gpt2 and llama only), and why. The test
# (tests/dryrun/test_truth.py) asserts each listed one still differs or fails, so a fixed one must leave the list;
# docs/models.md shows it. "inherent": the model reads device values on the host, which a dry run does not have
# (it stands in values, and the stand-in picks other shapes or another branch).
_INDEX_BACKWARD = (
    "inherent to shape-only tensors: torch's backward of indexing (index_backward) scatters the gradient out of "
    "place (index_put: a clone, then in place) when a tensor is a subclass, which a FakeTensor is, and in place "
    "into the zeros otherwise; here the MoE layer's gather of tokens by expert: +1 clone and allocation each "
    "(the experts' aten::_grouped_mm itself is charged the same dry and real, from its shapes)"
)
_MASK_READ = (
    "inherent: a value read on the host picks the attention-mask branch; the real run reads once, the dry run's "
    "stand-in takes the other branch, which reads again and builds the mask (+1 sync, +19 launches)"
)
_CTC = (
    "inherent: aten::_ctc_loss's output shape depends on the labels' values (a host sync on the device); the dry "
    "run stops there with a DryRunError naming transformers/loss/loss_ctc.py"
)
_SUBCLASS_SDPA = (
    "inherent to shape-only tensors: torch's C++ code branches on at::isTensorSubclassLike, and a FakeTensor is one "
    "(it has the Python dispatch key); the math kernel of scaled_dot_product_attention with a mask "
    "(transformers/integrations/sdpa_attention.py:183) adds the mask in place (add_) for a plain tensor and out of "
    "place (add) for a subclass, so the training step's saved tensors and clones differ too"
)
_SUBCLASS_ENGINE = (
    "inherent to shape-only tensors, likely the same cause (torch's C++ branches for tensor subclasses, which a "
    "FakeTensor is): the extra op runs in the autograd engine's C++ (no Python frame), where gradient "
    "accumulation (InputBuffer's can_accumulate_inplace) and the gradient copies take the subclass path"
)
DRY_DIFFERENCES: dict[tuple[str, str], str] = {
    **{(m, "train"): _INDEX_BACKWARD for m in ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "granitemoe")},
    **{(m, "train"): _INDEX_BACKWARD for m in ("deepseek_v3", "deepseek_v2")},
    **{(m, "*"): _MASK_READ for m in ("bart", "mbart", "pegasus", "marian")},
    **{(m, "*"): _CTC for m in ("wav2vec2", "hubert", "wavlm")},
    ("beit", "train"): _SUBCLASS_SDPA + " (here +2 add, -2 add_, +2 clones)",
    ("swin", "train"): _SUBCLASS_SDPA + " (here +2 add, -2 add_, +5 clones, +7 allocations)",
    ("t5", "train"): _SUBCLASS_SDPA + " (here +4 add, -4 add_, +4 allocations, same peaks)",
    ("whisper", "train"): _SUBCLASS_ENGINE + " (here one more clone, +1 allocation)",
    ("convnext", "train"): _SUBCLASS_ENGINE + " (here one copy_ real is a clone dry, same time to 1e-8 s)",
    ("convnextv2", "train"): _SUBCLASS_ENGINE + " (here one copy_ real is a clone dry, same time to 1e-8 s)",
    ("deberta_v2", "*"): "not yet explained: one more allocation dry (same bytes, peaks, time and ops)",
}
