"""Layouts and workloads of :func:`trn_notebook.plan`: TP × FSDP × activation checkpointing, a training step."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """One candidate layout: ``tp`` tensor-parallel ranks × ``fsdp`` FSDP2 ranks, activation checkpointing ``ac``.

    ``reshard`` is FSDP2's ``reshard_after_forward`` (True: the unsharded parameters are freed after
    each layer's forward and gathered again in backward).
    """

    tp: int = 1
    fsdp: int = 1
    ac: bool = False
    reshard: bool = True

    def __post_init__(self) -> None:
        if self.tp < 1 or self.fsdp < 1:
            raise ValueError(f"tp and fsdp must be positive, got tp={self.tp}, fsdp={self.fsdp}")

    @property
    def world_size(self) -> int:
        """Ranks (logical NeuronCores) the layout uses."""
        return self.tp * self.fsdp

    @property
    def name(self) -> str:
        """Short name, e.g. ``tp4×fsdp8+ac`` (the form :func:`parse_layouts` reads, with ``x`` for ``×``)."""
        parts = [f"tp{self.tp}"] if self.tp > 1 else []
        if self.fsdp > 1:
            parts.append(f"fsdp{self.fsdp}")
        name = "×".join(parts) or "1 rank"
        if self.ac:
            name += "+ac"
        if self.fsdp > 1 and not self.reshard:
            name += "+noreshard"
        return name


_TOKEN = re.compile(r"(tp|fsdp)(\d+)")


def parse_layouts(text: str) -> list[Layout]:
    """``'tp4, fsdp16+ac, tp2xfsdp8+noreshard'`` as layouts; raises ``ValueError`` naming the accepted form."""
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
                    f"bad layout {item!r}; write tpN, fsdpN or tpNxfsdpM, optionally +ac and/or +noreshard "
                    "(e.g. 'tp4,fsdp16+ac,tp2xfsdp8')"
                )
            kw[m.group(1)] = int(m.group(2))
        unknown = set(flags) - {"ac", "noreshard"}
        if unknown:
            raise ValueError(f"bad layout {item!r}: unknown flag(s) {sorted(unknown)}; flags are +ac and +noreshard")
        out.append(Layout(kw.get("tp", 1), kw.get("fsdp", 1), "ac" in flags, "noreshard" not in flags))
    if not out:
        raise ValueError("no layouts given; e.g. 'tp4,fsdp16,fsdp16+ac'")
    return out


@dataclass(frozen=True)
class Workload:
    """A training step: ``batch`` sequences of ``seq`` tokens per data-parallel rank; forward, backward, AdamW."""

    batch: int = 1
    seq: int = 2048
    kind: str = "train"

    def __post_init__(self) -> None:
        if self.kind != "train":
            raise ValueError(
                f"workload kind {self.kind!r} is not planned here; plan() models a training step "
                "(serving latency: trn_notebook's serve_estimate())"
            )
        if self.batch < 1 or self.seq < 1:
            raise ValueError(f"batch and seq must be positive, got batch={self.batch}, seq={self.seq}")


DEFAULT_LAYOUTS = (
    Layout(fsdp=8),
    Layout(fsdp=8, ac=True),
    Layout(fsdp=32),
    Layout(fsdp=32, ac=True),
    Layout(tp=4, fsdp=8),
    Layout(tp=4, fsdp=8, ac=True),
)
