"""Figures and the ``docs/compatibility.md`` section of the compiled sweep (:mod:`.compiled`)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ..compiler.host_call import DATA_DEPENDENT
from .compiled import COMPILED_SAMPLES, CompiledResult
from .sweep import Tally


@dataclass(frozen=True)
class CompiledSummary:
    """Compiled coverage: entries (and samples) passing compiled, over those passing eagerly, per direction."""

    entries: int
    forward_entries: tuple[int, int]  # (entries whose compiled samples all pass, entries with an eager-passing sample)
    backward_entries: tuple[int, int]
    forward_samples: tuple[int, int]
    backward_samples: tuple[int, int]
    uncapturable: int
    reasons: tuple[tuple[str, int], ...]  # failing entries by direction, op and reason
    refused: int = 0  # samples refused at compile time (a data-dependent output shape), not counted
    host_call_entries: int = 0  # passing entries whose graphs ran ops on the host (CPU fallbacks of eager)
    host_call_ops: tuple[tuple[str, int], ...] = ()  # those ops, by how many passing entries call them

    @staticmethod
    def rate(pair: tuple[int, int]) -> float:
        """``passed / total`` (1.0 when nothing was counted)."""
        return pair[0] / pair[1] if pair[1] else 1.0


def reason_of(error: str) -> str:
    """A short failure class of a compiled sample (the missing lowering, the refused contract, a mismatch)."""
    if DATA_DEPENDENT in error:
        return f"refused: {DATA_DEPENDENT}"
    m = re.search(r"no lowering for (\S+)", error)
    if m:
        return f"no lowering for {m.group(1)}"
    if "static shapes" in error or "symbolic shape" in error or "DynamicShapes" in error:
        return "data-dependent or symbolic shape (static shapes only, as on TorchNeuron)"
    if error.startswith("mismatch"):
        return "mismatch vs CPU"
    return re.split(r"[:(]", error, maxsplit=1)[0] or error


def _entry(t: Tally) -> tuple[int, int]:
    return (int(t.total > 0 and t.passed == t.total), int(t.total > 0))


def summarize_compiled(results: list[CompiledResult]) -> CompiledSummary:
    """Headline figures over the compiled results; failing entries grouped by reason."""
    fe, be, fs, bs = [0, 0], [0, 0], [0, 0], [0, 0]
    reasons: Counter[str] = Counter()
    for r in results:
        for tally, entries, samples, what in ((r.forward, fe, fs, "forward"), (r.backward, be, bs, "backward")):
            p, t = _entry(tally)
            entries[0], entries[1] = entries[0] + p, entries[1] + t
            samples[0], samples[1] = samples[0] + tally.passed, samples[1] + tally.total
            if t and not p:
                reasons[f"{what}: {r.op}: {reason_of(tally.first_error)}"] += 1
    unc = sum(r.uncapturable for r in results)
    hosts = [r for r in results if r.host_calls and _passes(r)]
    host_ops = Counter(op for r in hosts for op in r.host_calls)
    return CompiledSummary(
        len(results),
        (fe[0], fe[1]),
        (be[0], be[1]),
        (fs[0], fs[1]),
        (bs[0], bs[1]),
        unc,
        tuple(reasons.most_common()),
        sum(r.refused for r in results),
        len(hosts),
        tuple(sorted(host_ops.items(), key=lambda kv: (-kv[1], kv[0]))),
    )


def _passes(r: CompiledResult) -> bool:
    """Every counted compiled sample of the entry passes (and at least one was counted)."""
    counted = [t for t in (r.forward, r.backward) if t.total]
    return bool(counted) and all(t.passed == t.total for t in counted)


def summary_lines(s: CompiledSummary) -> list[str]:
    """The figures as printed by the CLI and the benchmark."""
    r = CompiledSummary.rate
    return [
        f"compiled OpInfo entries: {s.entries}; samples aot_eager cannot capture either (not counted): {s.uncapturable}",
        f"compiled forward:  {s.forward_entries[0]}/{s.forward_entries[1]} entries = {r(s.forward_entries):.2%} "
        f"of those passing eagerly ({s.forward_samples[0]}/{s.forward_samples[1]} samples)",
        f"compiled backward: {s.backward_entries[0]}/{s.backward_entries[1]} entries = {r(s.backward_entries):.2%} "
        f"of those passing eagerly ({s.backward_samples[0]}/{s.backward_samples[1]} samples)",
        f"passing entries whose graphs make host calls (CPU fallbacks of eager, charged as eager charges them): "
        f"{s.host_call_entries}",
        f"samples refused at compile time, {DATA_DEPENDENT} (not counted): {s.refused}",
    ]


BEGIN = "<!-- compiled sweep: begin (python -m trn_notebook.compat --compiled writes this section) -->"
END = "<!-- compiled sweep: end -->"


def compiled_markdown(results: list[CompiledResult], command: str) -> str:
    """The compiled section of ``docs/compatibility.md`` (between :data:`BEGIN` and :data:`END`): figures,
    host calls, failing entries, per-op rows."""
    s = summarize_compiled(results)
    lines = [
        BEGIN,
        '## Compiled: each OpInfo sample under `torch.compile(backend="neuron", fullgraph=True)`',
        "",
        f"Generated by `{command}`: up to {COMPILED_SAMPLES} float32 samples per entry and direction that pass "
        "eagerly on `neuron` (the table above), compiled with every tensor as a graph input and compared with "
        "CPU eager; backward compares input gradients. Samples PyTorch's own `aot_eager` cannot capture with "
        "`fullgraph=True` either are not counted, nor are samples the compiler refuses because an output's "
        "shape depends on the data (static shapes only, as on TorchNeuron). Ops that eager runs as CPU "
        "fallbacks run as host calls inside the graph, charged as eager charges them (placement: "
        "`cpu_fallback`). Do not edit by hand.",
        "",
        *[f"- {line}" for line in summary_lines(s)],
        "",
        "### Host calls in passing graphs (op: entries)",
        "",
        ", ".join(f"`{op}`: {n}" for op, n in s.host_call_ops) or "none",
        "",
        "### Entries that do not pass compiled",
        "",
        *([f"- {reason}" for reason, _ in s.reasons] or ["none"]),
        "",
        "| op | compiled forward | compiled backward | host calls | first error |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        if not r.forward.total and not r.backward.total and not r.refused:
            continue
        err = (r.forward.first_error or r.backward.first_error).replace("|", "\\|").replace("\n", " ")[:160]
        if r.refused and not err:
            err = f"refused ({r.refused} samples): {DATA_DEPENDENT}"
        fwd = f"{r.forward.passed}/{r.forward.total}" if r.forward.total else "n/a"
        bwd = f"{r.backward.passed}/{r.backward.total}" if r.backward.total else "n/a"
        hosts = ", ".join(r.host_calls)
        lines.append(f"| `{r.op}` | {fwd} | {bwd} | {hosts} | {err} |")
    return "\n".join([*lines, END]) + "\n"


def splice(document: str, section: str) -> str:
    """``document`` with its compiled section (:data:`BEGIN` … :data:`END`) replaced by ``section``, or with
    ``section`` appended when it has none (the eager table above stays as it was)."""
    start = document.find(BEGIN)
    if start < 0:
        return document.rstrip("\n") + "\n\n" + section
    stop = document.find(END, start)
    tail = document[stop + len(END) :].lstrip("\n") if stop >= 0 else ""
    return document[:start] + section + (("\n" + tail) if tail else "")


def section_of(document: str) -> str:
    """The compiled section of ``document`` (``""`` when it has none)."""
    start = document.find(BEGIN)
    if start < 0:
        return ""
    stop = document.find(END, start)
    return document[start : stop + len(END)] + "\n" if stop >= 0 else document[start:]
