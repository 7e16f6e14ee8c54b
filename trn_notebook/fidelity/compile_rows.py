"""The compile rows of the ledger: published Neuron compile times beside the modeled ones.

Each row's graphs are the bucket set its source compiled — one context-encoding (prefill) graph per
context bucket and one token-generation (decode) graph per generation bucket, as each row's
``graph_source`` says (bucketing off: one of each at the sequence length) — walked shapes-only at
full size like the latency rows, MoE layers as NxD Inference runs them (:mod:`.moe`: the blockwise
context-encoding matmul computes every worst-case block); the modeled compile time is
:func:`trn_notebook.compiler.compile_time.modeled_compile_s` of their graphs and instructions. An image
model's row (ViT-L) walks one forward of its encoder at its published image size. The two constants
(fixed seconds per graph, seconds per instruction) are fitted on the two ``fit`` rows, one small graph
and one large (``compile_time.fit_two_rows``); every other row is held out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

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
    spec: ModelSpec | None  # None for a row that walks its own model (``walk``)
    tp: int
    ctx_buckets: tuple[int, ...]
    tkg_buckets: tuple[int, ...]
    batch: int
    published_s: float
    source: str
    role: str  # "fit" (the constants are fitted on it) or "held out"
    graph_source: str = ""  # where the bucket set comes from
    walk: Callable[[], float] | None = None  # instructions of a row that is not a decoder (an image model)
    single_graphs: int = 0  # graphs of such a row

    @property
    def graphs(self) -> int:
        """Context-encoding + token-generation graphs (or the row's own graphs)."""
        return len(self.ctx_buckets) + len(self.tkg_buckets) + self.single_graphs


VIT_L = {  # google/vit-large-patch16-224's config.json (Hugging Face model card): ViT-L/16 at 224 x 224
    "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096,
    "image_size": 224, "patch_size": 16, "num_labels": 1000,
}  # fmt: skip


def vit_instructions(config: dict[str, int] = VIT_L, batch: int = 1) -> float:
    """Instructions of one forward of a ViT image classifier (BF16, one rank), walked on fake tensors with
    its weights left uninitialised (initialising them reads values fake tensors do not have)."""
    from transformers import ViTConfig, ViTForImageClassification
    from transformers.initialization import no_init_weights

    from .walk import walk

    cfg = ViTConfig(**config)  # type: ignore[arg-type]
    cfg._attn_implementation = "sdpa"

    def build() -> torch.nn.Module:  # built in BF16 (a .to() of fake conv weights cannot swap them)
        before = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            with no_init_weights():
                return ViTForImageClassification(cfg)
        finally:
            torch.set_default_dtype(before)

    def run(model: torch.nn.Module, count: Any) -> None:
        size = cfg.image_size
        with count("prefill"):
            model(pixel_values=torch.zeros(batch, cfg.num_channels, size, size, dtype=torch.bfloat16))

    return graph_instructions(walk(build, run)["prefill"], 1, cfg.hidden_size)


_TRINITY = f"{NXDI} contrib/models/Trinity/README.md"
# Trinity: seq_len 2048 with bucketing, and its README: context-encoding buckets "Must be >= sliding_window
# (2048)" -> the one bucket 2048 for both graphs.
_TRINITY_GRAPHS = "seq_len 2048; buckets must be >= the 2048 sliding window (README) -> one CTE + one TKG graph"
COMPILE_ROWS: tuple[CompileRow, ...] = (
    CompileRow(
        "ViT-L TorchNeuron native",
        None,
        1,
        (),
        (),
        1,
        20.0,
        f"{NXDI} PR #116 (~20 s native, against ~210 s through the older trace path)",
        "fit",
        "one graph: torch.compile of the image classifier's forward, batch 1 at 224 x 224 (assumed)",
        walk=vit_instructions,
        single_graphs=1,
    ),
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
    "vLLM Neuron structured-output NEFF recompilation ~8.4 s (aws-neuron-sdk vllm-neuron/docs/design/vllm/"
    "structured-outputs-and-tool-calling.md L193): the graph recompiled is not stated, so only the fixed part "
    "compares: one graph costs at least NEURON_COMPILE_FIXED_S; with ViT-L's ~20 s it bounds the published "
    "range of a small graph's compile (compile_time.SMALL_GRAPH_RANGE_S)",
)


def instructions(row: CompileRow) -> float:
    """Instructions of the row's graphs (a context-encoding graph per CTE bucket, a token-generation
    graph per TKG bucket, or the row's own walk), per rank."""
    if row.walk is not None:
        return row.walk()
    if row.spec is None:
        raise ValueError(f"compile row {row.label!r} has neither a decoder spec nor a walk")
    spec = row.spec
    total = 0.0
    for phase, buckets in (("prefill", row.ctx_buckets), ("decode", row.tkg_buckets)):
        for b in buckets:
            s = Scenario(spec, Layout("trn2", row.tp), b, b, 2, batch=row.batch, decode_context=b)
            total += graph_instructions(walk_scenario(s)[phase], row.tp, spec.hidden)
    return total


def evaluate(row: CompileRow) -> tuple[float, float]:
    """``(instructions, modeled compile seconds)`` of one row."""
    n = instructions(row)
    return n, modeled_compile_s(n, row.graphs)


def fit_rows() -> tuple[CompileRow, CompileRow]:
    """The two ``fit`` rows, the smaller graph first."""
    small, large = sorted((r for r in COMPILE_ROWS if r.role == "fit"), key=lambda r: instructions(r) / r.graphs)
    return small, large
