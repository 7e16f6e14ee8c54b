"""The result of :func:`trn_notebook.compare_numerics`: facts computed once, a DataFrame, text, HTML, a widget."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..aws_ratio import SOURCE as RATIO_SOURCE
from ..aws_ratio import NumericsRatio
from ..display.format import fmt_ratio, fmt_s, fmt_share
from ..display.results import Card, Message, Result, Table
from .generation import LOGIT_SOURCE, GenerationCheck
from .metrics import Heatmap, ModuleRow

__all__ = ["COLUMNS", "EXACT_NOTE", "NumericsComparison"]

COLUMNS = (
    "module",
    "class",
    "shape",
    "ratio_linf",
    "ratio_l2",
    "max_abs",
    "max_rel",
    "cosine",
    "bf16_max_abs",
    "bf16_max_rel",
    "passed",
    "source",
)
EXACT_NOTE = (
    "equal to CPU in exact mode proves plumbing only; run under trainium "
    "(trn_notebook.compare_numerics(..., numerics={'mode': 'trainium'})) to judge precision"
)


@dataclass(repr=False)
class NumericsComparison(Result):
    """CPU FP32 vs CPU BF16 vs neuron (and compiled) per module, judged by AWS's ratio against ``threshold``."""

    model: str
    policy: Any  # trn_notebook.device.numerics.policy.NumericsPolicy (frozen)
    threshold: float
    rows: list[ModuleRow]
    heatmaps: dict[str, Heatmap]
    first: ModuleRow | None
    first_op: str | None
    compiled: NumericsRatio | None = None
    generation: GenerationCheck | None = None
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    hardware: str = ""  # the live backend's name when the neuron run was real Trainium (TorchNeuron), else ""

    def __post_init__(self) -> None:
        self.table = pd.DataFrame(
            [
                (
                    r.module,
                    r.cls,
                    r.shape,
                    r.ratio_linf,
                    r.ratio_l2,
                    r.max_abs,
                    r.max_rel,
                    r.cosine,
                    r.bf16_max_abs,
                    r.bf16_max_rel,
                    not r.crosses(self.threshold),
                    r.source,
                )
                for r in self.rows
            ],
            columns=list(COLUMNS),
        )

    @property
    def mode(self) -> str:
        """The numerics the neuron run used: ``hardware`` (real Trainium), else the policy's ``exact``/``trainium``."""
        return "hardware" if self.hardware else str(self.policy.mode)

    @property
    def judged(self) -> bool:
        """Whether the neuron run stands for Trainium's numerics (hardware, or the trainium policy)."""
        return self.mode in ("trainium", "hardware")

    @property
    def passed(self) -> bool:
        """Every module below the threshold in both norms, the compiled output too, and generation within NxD's tiers."""
        ok = self.first is None
        if self.compiled is not None:
            ok = ok and self.compiled.passed
        if self.generation is not None:
            ok = ok and self.generation.passed
        return ok

    @property
    def acceptable(self) -> bool:
        """``passed`` on hardware or under the trainium policy; never True in exact mode (that proves plumbing only)."""
        return self.passed and self.judged

    def verdict(self) -> str:
        """One sentence: passes / where it first crosses, with the mode's caveat."""
        if self.first is not None:
            r = self.first
            line = (
                f"FAIL: first module over {self.threshold:g}: {r.module} ({r.cls}) ratio L-inf "
                f"{fmt_ratio(r.ratio_linf)}, L2 {fmt_ratio(r.ratio_l2)}; defined at {r.source}"
            )
        elif not self.passed:
            line = "FAIL: every module passes, but " + (
                "the compiled output does not"
                if self.compiled is not None and not self.compiled.passed
                else "generation is outside NxD's logit tolerances"
            )
        else:
            line = f"PASS: every module below {self.threshold:g} (L-inf and L2)"
        if not self.judged:
            line += f" — {EXACT_NOTE}"
        return line

    def summary_fields(self) -> list[tuple[str, object]]:
        """The card's ``label: value`` lines (mode, sources, verdict, compiled, generation)."""
        p = self.policy
        fields: list[tuple[str, object]] = [
            ("model", self.model),
            ("numerics", f"Trainium hardware ({self.hardware})" if self.hardware else p.label()),
            (
                "policy sourced",
                "n/a: the hardware's own numerics"
                if self.hardware
                else f"{len(p.sourced())} documented items (docs/numerics.md)",
            ),
            ("policy assumed", "none: the hardware's own numerics" if self.hardware else "; ".join(p.assumed())),
            ("criterion", f"AWS ratio |neuron - FP32| / |CPU BF16 - FP32| < {self.threshold:g} ({RATIO_SOURCE})"),
            ("verdict", self.verdict()),
        ]
        if self.first_op:
            fields.append(("first differing op", self.first_op))
        if self.compiled is not None:
            fields.append(("compiled (model output)", self.compiled.label()))
        g = self.generation
        if g is not None:
            fields.append(
                (
                    "generation",
                    f"{g.new_tokens} greedy tokens: neuron agrees with FP32 on {fmt_share(g.neuron_token_agreement)}"
                    f" (first divergence {g.neuron_first_divergence}), CPU BF16 on {fmt_share(g.bf16_token_agreement)}"
                    f" (first divergence {g.bf16_first_divergence})",
                )
            )
            for who, tiers in (("neuron", g.neuron_tiers), ("CPU BF16", g.bf16_tiers)):
                fields.append(
                    (
                        f"teacher-forced logits, {who}",
                        "; ".join(
                            f"{t.tier} (rtol {t.rtol:g}) {t.passed_positions}/{t.positions} positions"
                            f"{'' if t.passed else ' FAIL'}"
                            for t in tiers
                        )
                        + f" (atol 1e-5; {LOGIT_SOURCE})",
                    )
                )
        fields.append(("wall time", f"{fmt_s(self.wall_s)} (this host)"))
        return fields

    def display_rows(self) -> list[list[str]]:
        """The table's rows with every figure formatted once (display.format.fmt_ratio)."""
        return [
            [
                r.module,
                r.cls,
                "x".join(map(str, r.shape)),
                fmt_ratio(r.ratio_linf),
                fmt_ratio(r.ratio_l2),
                fmt_ratio(r.max_abs),
                fmt_ratio(r.max_rel),
                f"{r.cosine:.6f}",
                fmt_ratio(r.bf16_max_abs),
                "pass" if not r.crosses(self.threshold) else "FAIL",
                r.source,
            ]
            for r in self.rows
        ]

    def parts(self) -> list[Result]:
        """Summary card, then one row per module call."""
        parts: list[Result] = [Card("Three-way numerics: CPU FP32 · CPU BF16 · neuron", self.summary_fields())]
        parts.append(
            Table(
                "Per module (in the order calls finished)",
                [
                    "module",
                    "class",
                    "shape",
                    "ratio L-inf",
                    "ratio L2",
                    "max abs",
                    "max rel",
                    "cosine",
                    "BF16 max abs",
                    "verdict",
                    "defined at",
                ],
                self.display_rows(),
                self.notes,
                max_rows=60,
            )
        )
        if not self.judged:
            parts.append(Message(EXACT_NOTE, "warning"))
        return parts
