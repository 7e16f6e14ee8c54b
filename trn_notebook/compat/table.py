"""The compatibility table: sweep results as a DataFrame, pass-rate figures and ``docs/compatibility.md``."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from trn_notebook.device import policy
from trn_notebook.device.ops.registry import OpRecord, aws_class

from .sweep import DTYPE_NAMES, FLOAT64_REASON, OpResult

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = [
    "op",
    "category",
    "class",
    "dtypes_passing",
    "dtypes_failing",
    "first_error",
    "forward",
    "backward",
    "forward_samples",
    "backward_samples",
    "noncontig",
    "out",
    "inplace",
    "print",
    "aten_ops",
]
_VARIANTS = ("noncontig", "out", "inplace", "print")
_WORST = ("unsupported", "cpu_fallback", "native", "host_only")


def category_of(result: OpResult) -> str:
    """Category from the device policy registry: the op's own aten op if it reached the device, else the
    worst category among the aten ops it decomposed into, else the registry's rule for its aten name."""
    name = result.aten_name
    if any("is not supported on the neuron device" in t.first_error for t in result.forward.values()):
        return "unsupported"
    if name in result.aten_ops:
        return result.aten_ops[name]
    reached = set(result.aten_ops.values())
    for category in _WORST[:-1]:
        if category in reached:
            return category
    if reached:
        return "host_only"
    record = _record(name)
    if record is not None:
        return record.category or "cpu_fallback"
    return "host_only"  # nothing reached the device's Python layer: a C++ view/metadata op


def _record(name: str) -> OpRecord | None:
    """The registry's rule for ATen op ``name`` (its record, or one from the op's tags); ``None`` when ``name`` is
    no ATen op with an overload."""
    packet = getattr(torch.ops.aten, name, None)
    if isinstance(packet, torch._ops.OpOverloadPacket) and packet.overloads():
        return policy.rule(name, getattr(packet, packet.overloads()[0]))
    return None


def class_of(result: OpResult, category: str) -> str:
    """The op's class in the words AWS publishes per TorchNeuron release (``Y: Native``, ``Y: Host-only``,
    ``Y: Needs a process group``, ``CPU_FALLBACK (dtypes)``, ``N``; ``registry.aws_class``). A CPU fallback names
    the swept dtypes that fall back: all of them unless the op's record is native, then those outside its set."""
    if category != "cpu_fallback":
        return aws_class(result.aten_name, category)
    record = _record(result.aten_name)
    if record is None or record.category != "native":
        return "CPU_FALLBACK (all dtypes)"
    outside = [name for dtype, name in DTYPE_NAMES.items() if name in result.forward and dtype not in record.dtypes]
    return f"CPU_FALLBACK ({', '.join(outside) or 'dtypes outside its native set'})"


def _status(passed: int, total: int) -> str:
    if total == 0:
        return "n/a"
    return "pass" if passed == total else ("fail" if passed == 0 else "partial")


def results_frame(results: list[OpResult]) -> pd.DataFrame:
    """One row per OpInfo entry with the columns of :data:`COLUMNS` (plus ``crashed``)."""
    import pandas as pd

    rows = []
    for r in results:
        passing = [d for d, t in r.forward.items() if t.total and t.passed == t.total]
        failing = [d for d, t in r.forward.items() if t.passed < t.total]
        errors = [r.forward[d].first_error for d in failing]
        if r.backward and r.backward.first_error:
            errors.append("backward: " + r.backward.first_error)
        errors += [t.first_error for t in r.variants.values() if t.first_error]
        f32 = r.forward.get("float32")
        fwd_p = sum(t.passed for t in r.forward.values())
        fwd_t = sum(t.total for t in r.forward.values())
        bwd = r.backward
        category = category_of(r)
        rows.append(
            {
                "op": r.op,
                "category": category,
                "class": class_of(r, category),
                "dtypes_passing": ", ".join(passing),
                "dtypes_failing": ", ".join(failing),
                "first_error": r.crashed or (errors[0] if errors else ""),
                "forward": "crash" if r.crashed else _status(fwd_p, fwd_t),
                "backward": "crash" if r.crashed else (_status(bwd.passed, bwd.total) if bwd else "n/a"),
                "forward_samples": f"{f32.passed}/{f32.total}" if f32 else "",
                "backward_samples": f"{bwd.passed}/{bwd.total}" if bwd else "",
                **{
                    k: _status(r.variants[k].passed, r.variants[k].total) if k in r.variants else "n/a"
                    for k in _VARIANTS
                },
                "aten_ops": ", ".join(sorted(r.aten_ops)),
                "crashed": bool(r.crashed),
            }
        )
    return pd.DataFrame(rows, columns=[*COLUMNS, "crashed"])


@dataclass(frozen=True)
class Summary:
    """Headline figures of a sweep: float32 forward/backward sample pass rates and crashes."""

    ops: int
    forward_passed: int
    forward_total: int
    backward_passed: int
    backward_total: int
    crashes: int
    reasons: tuple[tuple[str, int], ...]  # failing float32 forward samples by op and reason, most frequent first
    backward_reasons: tuple[tuple[str, int], ...] = ()
    variant_reasons: tuple[tuple[str, int], ...] = ()  # failing out= / in-place / print checks (float32)

    @property
    def forward_rate(self) -> float:
        return self.forward_passed / self.forward_total if self.forward_total else 1.0

    @property
    def backward_rate(self) -> float:
        return self.backward_passed / self.backward_total if self.backward_total else 1.0


def reason_of(error: str) -> str:
    """A short failure class for grouping (``float64 by design``, ``mismatch``, the exception type...)."""
    if FLOAT64_REASON in error:
        return "float64/complex128 created on the device (rejected by design)"
    if "Sparse" in error or "sparse" in error:
        return "sparse layouts (not supported on neuron)"
    if "only contiguous memory format" in error:
        return "channels_last memory format requested explicitly (rejected by design, as on TorchNeuron)"
    if error.startswith("mismatch"):
        return "mismatch vs CPU"
    return re.split(r"[:(]", error, maxsplit=1)[0] or error


def summarize(results: list[OpResult]) -> Summary:
    """Figures over all OpInfo entries whose float32 samples run on CPU (samples that fail on CPU don't count)."""
    fp = ft = bp = bt = 0
    reasons: Counter[str] = Counter()
    back: Counter[str] = Counter()
    variants: Counter[str] = Counter()
    for r in results:
        f32 = r.forward.get("float32")
        if f32:
            fp, ft = fp + f32.passed, ft + f32.total
            if f32.passed < f32.total:
                reasons[f"{r.op}: {reason_of(f32.first_error)}"] += f32.total - f32.passed
        if r.backward:
            bp, bt = bp + r.backward.passed, bt + r.backward.total
            if r.backward.passed < r.backward.total:
                back[f"{r.op}: {reason_of(r.backward.first_error)}"] += r.backward.total - r.backward.passed
        for kind, t in r.variants.items():
            if t.passed < t.total:
                variants[f"{r.op} ({kind}): {t.first_error[:120]}"] += t.total - t.passed
    crashes = sum(1 for r in results if r.crashed)
    return Summary(
        len(results),
        fp,
        ft,
        bp,
        bt,
        crashes,
        tuple(reasons.most_common()),
        tuple(back.most_common()),
        tuple(variants.most_common()),
    )


_MARKDOWN_COLUMNS = ("category", "class", "dtypes_passing", "dtypes_failing", "forward", "backward", "out", "inplace",
                     "forward_samples")  # fmt: skip


def to_markdown(results: list[OpResult], command: str = "python -m trn_notebook.compat") -> str:
    """The generated ``docs/compatibility.md``: headline figures, then one table row per OpInfo entry."""
    s = summarize(results)
    df = results_frame(results)
    lines = [
        "# Operator compatibility of the simulated `neuron` device",
        "",
        f"Generated by `{command}` with torch {torch.__version__}: PyTorch's OpInfo samples "
        "(`torch.testing._internal.common_methods_invocations.op_db`) run on `neuron` and compared with CPU "
        f"for {', '.join(DTYPE_NAMES.values())}; backward in float32. Do not edit by hand.",
        "",
        f"- OpInfo entries swept: **{s.ops}**; interpreter crashes: **{s.crashes}**",
        f"- forward float32 samples passing: **{s.forward_passed}/{s.forward_total} ({s.forward_rate:.2%})**",
        f"- backward float32 samples passing: **{s.backward_passed}/{s.backward_total} ({s.backward_rate:.2%})**",
        "- category comes from the device policy registry (`trn_notebook.policy_table()`); class is the same placement "
        "in the words of AWS's published op classes (`Y: Native`, `Y: Host-only`, `Y: Needs a process group`, "
        "`CPU_FALLBACK (dtypes)`, `N`), to hold against `docs/torch_api_compatibility.md` of a torch-neuronx release.",
        "",
        "## Float32 samples that do not pass, by op and reason",
        "",
        *[f"- forward, {n} samples — {reason}" for reason, n in s.reasons],
        *[f"- backward, {n} samples — {reason}" for reason, n in s.backward_reasons],
        *[f"- variant check, {n} samples — {reason}" for reason, n in s.variant_reasons],
        "",
        "## Per op",
        "",
        "| op | category | class | dtypes passing | dtypes failing | forward | backward | out= | in-place "
        "| float32 samples | first error |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in df.to_dict("records"):
        err = row["first_error"].replace("|", "\\|").replace("\n", " ")[:160]
        cells = [f"`{row['op']}`", *(str(row[c]) for c in _MARKDOWN_COLUMNS), err]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
