"""Layouts and workloads of :func:`trn_notebook.plan`: TP × PP × (FSDP or DP with ZeRO-1) × activation
checkpointing, and a training step with gradient accumulation to a global batch."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """One candidate layout of ranks (logical NeuronCores).

    ``tp`` tensor-parallel ranks (Megatron split, within an instance); ``pp`` pipeline stages (1F1B);
    data parallelism either as ``fsdp`` FSDP2 ranks (parameters, gradients and optimizer state sharded) or as
    ``dp`` replicas (parameters replicated, gradients all-reduced; with ``zero1`` the optimizer state and its
    step sharded over the replicas, gradients reduce-scattered and parameters all-gathered, as NxD Training's
    ZeRO-1). ``ac``: activation checkpointing of every layer. ``reshard`` is FSDP2's ``reshard_after_forward``.
    """

    tp: int = 1
    fsdp: int = 1
    ac: bool = False
    reshard: bool = True
    dp: int = 1
    pp: int = 1
    zero1: bool = False

    def __post_init__(self) -> None:
        if min(self.tp, self.fsdp, self.dp, self.pp) < 1:
            raise ValueError(f"tp, pp, dp and fsdp must be positive, got {self}")
        if self.fsdp > 1 and (self.dp > 1 or self.pp > 1):
            raise ValueError(
                f"layout {self.name}: FSDP with DP replicas or pipeline stages is not planned; use dpN+zero1"
            )
        if self.zero1 and self.dp == 1:
            raise ValueError(f"layout {self.name}: +zero1 shards the optimizer over DP replicas; add dpN (N > 1)")

    @property
    def data_parallel(self) -> int:
        """Data-parallel degree: FSDP ranks or DP replicas (each takes its own microbatches)."""
        return self.fsdp * self.dp

    @property
    def world_size(self) -> int:
        """Ranks (logical NeuronCores) the layout uses."""
        return self.tp * self.pp * self.data_parallel

    @property
    def name(self) -> str:
        """Short name, e.g. ``tp32×pp8×dp4+zero1`` (the form :func:`parse_layouts` reads, with ``x`` for ``×``)."""
        parts = [
            f"{k}{v}" for k, v in (("tp", self.tp), ("pp", self.pp), ("fsdp", self.fsdp), ("dp", self.dp)) if v > 1
        ]
        name = "×".join(parts) or "1 rank"
        if self.zero1:
            name += "+zero1"
        if self.ac:
            name += "+ac"
        if self.fsdp > 1 and not self.reshard:
            name += "+noreshard"
        return name


_TOKEN = re.compile(r"(tp|fsdp|dp|pp)(\d+)")
_FLAGS = ("ac", "noreshard", "zero1")


def parse_layouts(text: str) -> list[Layout]:
    """``'tp4, fsdp16+ac, tp32xdp32+zero1, tp32xpp8xdp4'`` as layouts; raises ``ValueError`` naming the accepted
    form (or what makes a layout impossible)."""
    out = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        base, *flags = item.lower().split("+")
        kw: dict[str, int] = {}
        for part in re.split(r"[x×*]", base):
            m = _TOKEN.fullmatch(part.strip())
            if m is None or m.group(1) in kw:
                raise ValueError(
                    f"bad layout {item!r}; write tpN, ppN, fsdpN or dpN joined by x, optionally +zero1, +ac, "
                    "+noreshard (e.g. 'tp4,fsdp16+ac,tp32xdp32+zero1,tp32xpp8xdp4')"
                )
            kw[m.group(1)] = int(m.group(2))
        unknown = set(flags) - set(_FLAGS)
        if unknown:
            raise ValueError(
                f"bad layout {item!r}: unknown flag(s) {sorted(unknown)}; flags are +zero1, +ac, +noreshard"
            )
        out.append(Layout(reshard="noreshard" not in flags, ac="ac" in flags, zero1="zero1" in flags, **kw))
    if not out:
        raise ValueError("no layouts given; e.g. 'tp4,fsdp16,fsdp16+ac'")
    return out


@dataclass(frozen=True)
class Workload:
    """A training step: ``batch`` sequences of ``seq`` tokens per data-parallel rank and microstep; forward,
    backward, AdamW.

    ``global_batch``: sequences per optimizer step over the whole cluster (default: one microstep on every
    data-parallel rank); the step accumulates ``global_batch / (batch × data-parallel degree)`` microbatches.
    ``master_weights``: FP32 master weights, gradients and AdamW state beside BF16 compute (NxD Training's
    mixed precision); without it the whole model and optimizer are in the plan's dtype (BF16 with stochastic
    rounding, as the BERT rows of the training table).
    """

    batch: int = 1
    seq: int = 2048
    kind: str = "train"
    global_batch: int | None = None
    master_weights: bool = False

    def __post_init__(self) -> None:
        if self.kind != "train":
            raise ValueError(
                f"workload kind {self.kind!r} is not planned here; plan() models a training step "
                "(serving latency: trn_notebook's serve_estimate())"
            )
        if self.batch < 1 or self.seq < 1 or (self.global_batch is not None and self.global_batch < 1):
            raise ValueError(f"batch, seq and global_batch must be positive, got {self}")

    def microbatches(self, layout: Layout) -> int:
        """Microbatches each data-parallel rank runs per optimizer step; raises ``ValueError`` when the global
        batch is not a multiple of ``batch`` × the layout's data-parallel degree."""
        per_step = self.batch * layout.data_parallel
        if self.global_batch is None:
            return 1
        if self.global_batch % per_step:
            raise ValueError(
                f"global batch {self.global_batch} is not a multiple of batch {self.batch} × {layout.data_parallel} "
                f"data-parallel ranks of {layout.name}; choose a global batch divisible by {per_step}"
            )
        return self.global_batch // per_step


DEFAULT_LAYOUTS = (
    Layout(fsdp=8),
    Layout(fsdp=8, ac=True),
    Layout(fsdp=32),
    Layout(fsdp=32, ac=True),
    Layout(tp=4, fsdp=8),
    Layout(tp=4, fsdp=8, ac=True),
)
