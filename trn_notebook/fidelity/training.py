"""The training ledger: :func:`trn_notebook.plan` against AWS's published Trn1 training table.

Source: aws-neuron-sdk ``about-neuron/benchmarks/trn1/training_data_{decoder,encoder,vision_transformers}.csv``
("Trn1/Trn1n Training Performance", Neuron 2.24–2.28, NxD Training / PyTorch-XLA), with the settings the CSVs
omit taken from the scripts each row links (shared/reference/trainium-figures.md, "Trainium (Trn1) for the
training ledger"). Each row's configuration runs through ``plan(..., execution="graph")`` on the chip of the
instance the table names (trn1.32xlarge); the same plan on trn1n.32xlarge (twice the NeuronLink and EFA) is
shown beside it, since the table never says which was used.

One constant is fitted, on T1 and T2 only (:func:`fit`): ``training_compute_efficiency`` of
``device.costmodel.CostConstants``, the fraction of the chip's peak the compiled training graphs' matrix
kernels reach. Every other row is a prediction. What the plan does not model is said per row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from ..device import costmodel
from ..display.format import fmt_s, fmt_share
from ..planner.layouts import Workload
from .configs import BERT_LARGE, LLAMA_8B, LLAMA_70B, VIT_BASE, ModelSpec

PARTS = ("compute", "exposed communication", "optimizer", "pipeline bubble")


@dataclass(frozen=True)
class TrainingRow:
    """One published training figure and the configuration that produced it."""

    id: str
    title: str
    model: ModelSpec | None
    layout: str
    workload: Workload
    dtype: torch.dtype
    published: float
    unit: str  # "sequences" or "images" per second, for the whole cluster
    depths: tuple[int, int] | None = None
    fitted: bool = False
    not_modeled: str = ""  # what the script runs that the plan leaves out (or why the row has no figure)


@dataclass
class TrainingResult:
    """A row's modeled figure (``None`` when it cannot be modeled), its ratio and what dominates the step."""

    row: TrainingRow
    modeled: float | None = None
    modeled_trn1n: float | None = None
    step_s: float = math.nan
    parts: dict[str, float] = field(default_factory=dict)  # seconds of one step by PARTS
    fits: bool | None = None

    @property
    def ratio(self) -> float:
        """Modeled ÷ published (``nan`` when there is no modeled figure)."""
        return self.modeled / self.row.published if self.modeled is not None else math.nan

    @property
    def dominant(self) -> str:
        """The part of the modeled step that takes the most time, with its share."""
        if not self.parts:
            return "—"
        name = max(self.parts, key=lambda k: self.parts[k])
        return f"{name} {fmt_share(self.parts[name] / self.step_s)}"


BF16 = torch.bfloat16
ROWS: tuple[TrainingRow, ...] = (
    TrainingRow(
        "T1", "Llama-3.1-8B pre-training, 32 × trn1.32xlarge", LLAMA_8B, "tp32xdp32+zero1",
        Workload(batch=1, seq=8192, global_batch=1024, master_weights=True), BF16, 47.95, "sequences",
        depths=(1, 2), fitted=True,
        not_modeled="selective recompute of core attention (one more attention forward per layer)",
    ),
    TrainingRow(
        "T2", "BERT-Large phase 1, 1 × trn1.32xlarge", BERT_LARGE, "dp32",
        Workload(batch=16, seq=128, global_batch=16384), BF16, 3826.6, "sequences", fitted=True,
        not_modeled="stochastic rounding (no cost modeled); the MLM head on every position (BertForMaskedLM), no NSP head",
    ),
    TrainingRow(
        "T3", "Llama-3.1-70B pre-training, 32 × trn1.32xlarge", LLAMA_70B, "tp32xpp8xdp4+zero1+ac",
        Workload(batch=1, seq=8192, global_batch=1024, master_weights=True), BF16, 7.94, "sequences",
        depths=(1, 2),
        not_modeled="the script's recompute of attention and MLP at 8k as checkpointing of each whole layer (+ac); "
        "Llama-3.3-70B's dimensions (the same as 3.1's)",
    ),
    TrainingRow(
        "T4", "BERT-Large phase 1, 16 × trn1.32xlarge", BERT_LARGE, "dp512",
        Workload(batch=16, seq=128, global_batch=1_048_576), BF16, 57_407.9, "sequences",
        not_modeled="LAMB modeled as AdamW (one more norm per tensor); stochastic rounding",
    ),
    TrainingRow(
        "T5", "BERT-Large phase 1 (FP32), 16 × trn1.32xlarge", BERT_LARGE, "dp512",
        Workload(batch=8, seq=128, global_batch=1_048_576), torch.float32, 32_362.7, "sequences",
        not_modeled="LAMB modeled as AdamW; FP32 matmuls at the FP32 peak (Neuron 2.28 compiles with --auto-cast none)",
    ),
    TrainingRow(
        "T6", "ViT-Base fine-tuning, 1 × trn1.32xlarge", VIT_BASE, "dp32", Workload(batch=64, seq=197, global_batch=2048),
        BF16, 6587.25, "images",
        not_modeled="the host data pipeline (CIFAR-10 decoded and resized to 224 on the host), which the row's "
        "script notes can dominate: the plan models the device only",
    ),
)  # fmt: skip


def evaluate(row: TrainingRow, chips: tuple[str, ...] = ("trn1", "trn1n")) -> TrainingResult:
    """Plan ``row``'s configuration on each chip (first: the figure; second: beside it); raises what ``plan`` raises."""
    from ..planner import plan

    result = TrainingResult(row)
    if row.model is None:
        return result
    for chip in chips:
        planned = plan(
            row.model, row.workload, chip=chip, layouts=row.layout, dtype=row.dtype, depths=row.depths,
            execution="graph",
        )  # fmt: skip
        t = planned.table.iloc[0]
        rate = float(t["sequences_per_s"])
        if chip != chips[0]:
            result.modeled_trn1n = rate
            continue
        result.modeled, result.step_s, result.fits = rate, float(t["step_s"]), bool(t["fits"])
        exposed, optimizer, bubble = float(t["exposed_comm_s"]), float(t["optimizer_s"]), float(t["bubble_s"])
        compute = max(result.step_s - exposed - optimizer - bubble, 0.0)
        result.parts = dict(zip(PARTS, (compute, exposed, optimizer, bubble), strict=True))
    return result


def fit(
    rows: Iterable[TrainingRow] | None = None,
    bounds: tuple[float, float] = (0.1, 1.0),
    steps: int = 14,
) -> float:
    """Fit ``training_compute_efficiency`` on ``rows`` (default: the rows marked fitted, T1 and T2): the value
    in ``bounds`` minimising the mean squared log ratio, by golden-section search in log space. Sets it with
    ``set_cost_constants`` and returns it."""
    chosen = tuple(rows) if rows is not None else tuple(r for r in ROWS if r.fitted)

    def loss(log_e: float) -> float:
        costmodel.set_cost_constants(training_compute_efficiency=math.exp(log_e))
        return sum(math.log(evaluate(r, ("trn1",)).ratio) ** 2 for r in chosen) / len(chosen)

    lo, hi = math.log(bounds[0]), math.log(bounds[1])
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = loss(a), loss(b)
    for _ in range(steps):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = loss(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = loss(b)
    best = math.exp((lo + hi) / 2)
    costmodel.set_cost_constants(training_compute_efficiency=best)
    return best


def markdown(results: Iterable[TrainingResult]) -> str:
    """The ledger as a markdown table (docs/fidelity.md, "Training")."""
    lines = [
        "| id | row | layout | published | modeled, trn1 (modeled) | ratio | trn1n (modeled) | step (modeled) | "
        "dominates | fits | fitted on | not modeled |",
        "|---|---|---|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for r in results:
        row = r.row
        unit = f"{row.unit}/s"
        modeled = "missing" if r.modeled is None else f"{r.modeled:,.1f}"
        trn1n = "missing" if r.modeled_trn1n is None else f"{r.modeled_trn1n:,.1f}"
        ratio = "—" if r.modeled is None else f"{r.ratio:.2f}"
        step = "—" if r.modeled is None else fmt_s(r.step_s)
        fits = "—" if r.fits is None else ("yes" if r.fits else "NO")
        lines.append(
            f"| {row.id} | {row.title} | {row.layout} | {row.published:,.2f} {unit} | {modeled} | {ratio} | {trn1n} "
            f"| {step} | {r.dominant} | {fits} | {'yes' if row.fitted else 'no (prediction)'} | {row.not_modeled} |"
        )
    return "\n".join(lines)


def row(row_id: str) -> TrainingRow:
    """The published row ``row_id`` (``"T1"`` … ``"T6"``); raises ``KeyError`` naming the rows."""
    found = {r.id: r for r in ROWS}
    if row_id not in found:
        raise KeyError(f"no training row {row_id!r}; rows: {', '.join(found)}")
    return found[row_id]
