"""The compile rows of the ledger: published Neuron compile times beside the modeled ones.

Each row's graphs are the NxD Inference bucket set of its configuration — a context-encoding
(prefill) graph and a token-generation (decode) graph per bucket, buckets the powers of two from 128
to the sequence length (NxD Inference's default; **assumed** where the source does not list them) —
walked shapes-only at full size like the latency rows; the modeled compile time is
:func:`trn_notebook.compiler.compile_time.modeled_compile_s` of their instructions. The one constant
is derived from the ``derived`` row; every other row is held out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..compiler.compile_time import graph_instructions, modeled_compile_s
from .configs import DEEPSEEK_V3, QWEN35, TRINITY_MINI, ModelSpec
from .ledger import Scenario, walk_scenario
from .model import Layout

NXDI = "neuronx-distributed-inference"


@dataclass(frozen=True)
class CompileRow:
    """One published compile time and the graphs it compiled."""

    label: str
    spec: ModelSpec
    tp: int
    buckets: tuple[int, ...]
    batch: int
    published_s: float
    source: str
    role: str  # "derived" (the constant comes from it) or "held out"
    moe_prefill_all_experts: bool = False

    @property
    def graphs(self) -> int:
        """Prefill + decode graph per bucket."""
        return 2 * len(self.buckets)


def _pow2(top: int) -> tuple[int, ...]:
    return tuple(b for b in (128, 256, 512, 1024, 2048, 4096, 8192) if b <= top)


_TRINITY = f"{NXDI} contrib/models/Trinity/README.md"
COMPILE_ROWS: tuple[CompileRow, ...] = (
    CompileRow("Trinity-Mini TP4 batch 1", TRINITY_MINI, 4, _pow2(2048), 1, 3.9 * 60, _TRINITY, "derived"),
    CompileRow("Trinity-Mini TP4 batch 2", TRINITY_MINI, 4, _pow2(2048), 2, 6.8 * 60, _TRINITY, "held out"),
    CompileRow("Trinity-Mini TP4 batch 4", TRINITY_MINI, 4, _pow2(2048), 4, 9.1 * 60, _TRINITY, "held out"),
    CompileRow(
        "Qwen3.5-2B TP8",
        QWEN35["2B"],
        8,
        _pow2(512),
        1,
        90.0,
        f"{NXDI} contrib/models/Qwen3.5-2B/README.md",
        "held out",
    ),
    CompileRow(
        "Qwen3.5-35B-A3B text TP8",
        QWEN35["35B-A3B"],
        8,
        _pow2(512),
        1,
        15 * 60.0,
        f"{NXDI} contrib/models/Qwen3.5-35B-A3B/README.md",
        "held out",
        moe_prefill_all_experts=True,
    ),
    CompileRow(
        "DeepSeek-V3 TP64",
        DEEPSEEK_V3,
        64,
        _pow2(512),
        1,
        11.8 * 60,
        f"{NXDI} contrib/models/DeepSeek-V3/README.md",
        "held out",
    ),
)
NOT_COMPARED = (
    "ViT-L ~20 s (neuronx-distributed-inference PR #116): transformers' ViT initialises its weights with a "
    "value read that fake tensors cannot answer, so it is not walked",
    "vLLM Neuron structured-output NEFF recompilation ~8.4 s: the graph recompiled is not stated",
)


def instructions(row: CompileRow) -> float:
    """Instructions of the row's graphs (prefill and decode per bucket), per rank."""
    total = 0.0
    for b in row.buckets:
        s = Scenario(
            row.spec, Layout("trn2", row.tp), b, b, 2, batch=row.batch, decode_context=b,
            moe_prefill_all_experts=row.moe_prefill_all_experts,
        )  # fmt: skip
        walked = walk_scenario(s)
        for phase in ("prefill", "decode"):
            ops = [(o.flops, o.bytes, o.dtype.itemsize) for o in walked[phase] if o.kind != "other"]
            total += graph_instructions(ops, row.tp)
    return total


def evaluate(row: CompileRow) -> tuple[float, float]:
    """``(instructions, modeled compile seconds)`` of one row."""
    n = instructions(row)
    return n, modeled_compile_s(n)
