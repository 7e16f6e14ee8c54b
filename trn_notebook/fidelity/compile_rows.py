"""The compile rows of the ledger: published Neuron compile times beside the modeled ones.

Each row's graphs are the bucket set its source compiled — one context-encoding (prefill) graph per
context bucket and one token-generation (decode) graph per generation bucket, as each row's
``graph_source`` says (bucketing off: one of each at the sequence length) — walked shapes-only at
full size like the latency rows, MoE layers as NxD Inference runs them (:mod:`.moe`: the blockwise
context-encoding matmul computes every worst-case block); the modeled compile time is
:func:`trn_notebook.compiler.compile_time.modeled_compile_s` of their instructions. The one constant
is fitted on the ``fit`` row (one row: the constant is its published time / its instructions);
every other row is held out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..compiler.compile_time import modeled_compile_s
from .configs import DEEPSEEK_V3, QWEN35, TRINITY_MINI, ModelSpec
from .ledger import Scenario, walk_scenario
from .model import Layout, graph_instructions

NXDI = "neuronx-distributed-inference"


@dataclass(frozen=True)
class CompileRow:
    """One published compile time and the graphs it compiled (one context-encoding graph per
    ``ctx_buckets`` entry, one token-generation graph per ``tkg_buckets`` entry)."""

    label: str
    spec: ModelSpec
    tp: int
    ctx_buckets: tuple[int, ...]
    tkg_buckets: tuple[int, ...]
    batch: int
    published_s: float
    source: str
    role: str  # "fit" (the constant is fitted on it) or "held out"
    graph_source: str = ""  # where the bucket set comes from

    @property
    def graphs(self) -> int:
        """Context-encoding + token-generation graphs."""
        return len(self.ctx_buckets) + len(self.tkg_buckets)


_TRINITY = f"{NXDI} contrib/models/Trinity/README.md"
# Trinity: seq_len 2048 with bucketing, and its README: context-encoding buckets "Must be >= sliding_window
# (2048)" -> the one bucket 2048 for both graphs.
_TRINITY_GRAPHS = "seq_len 2048; buckets must be >= the 2048 sliding window (README) -> one CTE + one TKG graph"
COMPILE_ROWS: tuple[CompileRow, ...] = (
    *(
        CompileRow(
            f"Trinity-Mini TP4 batch {b}",
            TRINITY_MINI,
            4,
            (2048,),
            (2048,),
            b,
            minutes * 60,
            _TRINITY,
            "fit" if b == 1 else "held out",
            _TRINITY_GRAPHS,
        )
        for b, minutes in ((1, 3.9), (2, 6.8), (4, 9.1))
    ),
    CompileRow(
        "Qwen3.5-2B TP8",
        QWEN35["2B"],
        8,
        (512,),
        (512,),
        1,
        90.0,
        f"{NXDI} contrib/models/Qwen3.5-2B/README.md",
        "held out",
        "run_text_smoke.py: seq_len 512, enable_bucketing=False -> one CTE + one TKG graph",
    ),
    CompileRow(
        "Qwen3.5-35B-A3B text TP8",
        QWEN35["35B-A3B"],
        8,
        (512, 1024, 2048, 4096, 8192),
        (512, 1024, 2048, 4096, 8192),
        1,
        15 * 60.0,
        f"{NXDI} contrib/models/Qwen3.5-35B-A3B/README.md",
        "held out",
        "run_vl_benchmark.py --buckets 512 1024 2048 4096 8192 (CTE); the same list for TKG assumed",
    ),
    CompileRow(
        "DeepSeek-V3 TP64",
        DEEPSEEK_V3,
        64,
        (512,),
        (512,),
        1,
        11.8 * 60,
        f"{NXDI} contrib/models/DeepSeek-V3/README.md",
        "held out",
        "seq_len 512, enable_bucketing=False (README) -> one CTE + one TKG graph",
    ),
)
NOT_COMPARED = (
    "ViT-L ~20 s (neuronx-distributed-inference PR #116): transformers' ViT initialises its weights with a "
    "value read that fake tensors cannot answer, so it is not walked",
    "vLLM Neuron structured-output NEFF recompilation ~8.4 s: the graph recompiled is not stated",
)


def instructions(row: CompileRow) -> float:
    """Instructions of the row's graphs (a context-encoding graph per CTE bucket, a token-generation
    graph per TKG bucket), per rank."""
    total = 0.0
    for phase, buckets in (("prefill", row.ctx_buckets), ("decode", row.tkg_buckets)):
        for b in buckets:
            s = Scenario(row.spec, Layout("trn2", row.tp), b, b, 2, batch=row.batch, decode_context=b)
            total += graph_instructions(walk_scenario(s)[phase], row.tp, row.spec.hidden)
    return total


def evaluate(row: CompileRow) -> tuple[float, float]:
    """``(instructions, modeled compile seconds)`` of one row."""
    n = instructions(row)
    return n, modeled_compile_s(n)
