"""Render :class:`Evidence` as the seed article's table, in HTML and Markdown."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import torch

from .. import state as _state
from ..device.ops.registry import AWS_CLASSES
from ..device.placement import aws_class_of
from ..display.format import fmt_compile, fmt_rate, fmt_ratio, plural
from ..display.results import Result, Table, fmt_bytes, fmt_s
from ..outfiles import write_text_atomic
from .evidence import NOT_MEASURED, Evidence, collect_evidence

_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}()#+!|~])")


def md_escape(text: str) -> str:
    """``text`` as literal Markdown: HTML tags become entities, Markdown punctuation is backslash-escaped."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False)).replace("\n", " ")


_last: list[MigrationReport] = []  # the last report measured with a model (shown by %trn report)
_state.register("last_report", _state.Globals(__name__, "_last"))


def _ms(seconds: float | None) -> str:
    return NOT_MEASURED if seconds is None else fmt_s(seconds)


def _cold(startup: dict[str, Any]) -> str:
    """The cold-compile clause: the session's cold compiles, or why there were none (all from a cache)."""
    if startup["cold_compile_s"] is not None and startup.get("wall_label") == "Trainium hardware":
        return f"cold compile {fmt_s(startup['cold_compile_s'])} (measured: the Neuron compiler on this instance)"
    if startup["cold_compile_s"] is not None:
        return f"cold compile {fmt_compile(startup['cold_compile_s'], startup.get('modeled_neuron_compile_s'))}"
    return (
        "no cold compile in this session (every graph came from the compile cache; "
        f"loading them took {fmt_s(startup['disk_hit_compile_s'])})"
    )


def _serve_estimate() -> Any:
    """The session's latest ``serve_estimate()`` (None when there is none, or its module never loaded)."""
    import sys

    module = sys.modules.get("trn_notebook.fidelity.serve")  # never imported just for the report
    return module.last_estimate() if module is not None else None


def _backing() -> str:
    """Which ledger rows back the modeled device times (the calibrated cost model's fit and held-out rows)."""
    from ..fidelity.fit import ledger_backing

    return "Modeled device times: " + ledger_backing()


def _plumbing(ev: Evidence) -> str:
    """The FP32 check (device vs CPU float32 at a stated tolerance) and the BF16 noise floor."""
    if ev.numerics:
        n = ev.numerics
        return (
            f"FP32 check {'within' if n['passed'] else 'OUTSIDE'} tolerance: max |device - CPU fp32| = "
            f"{fmt_ratio(n['device_vs_cpu_fp32_max_abs'])} with {n['tolerance']}; CPU bf16 vs CPU fp32 (precision noise "
            f"floor) = {fmt_ratio(n['cpu_bf16_vs_cpu_fp32_max_abs'])}"
        )
    if "numerics" in ev.skipped:
        return f"numerical check could not run: {ev.skipped['numerics']}"
    return f"numerical check: {NOT_MEASURED} (pass model= and inputs=)"


def acceptable_row(ev: Evidence) -> str:
    """The "is the result acceptable?" answer: the three-way verdict (never a pass on ``exact`` numerics
    alone), the numerics mode with its sourced and assumed parts, then the FP32 check."""
    from ..numerics_compare import EXACT_NOTE

    t = ev.three_way
    if t is None:
        why = ev.skipped.get("three_way")
        head = (
            f"three-way comparison could not run: {why}"
            if why
            else f"three-way comparison (CPU FP32 / CPU BF16 / neuron): {NOT_MEASURED} "
            "(trn_notebook.compare_numerics(model, inputs, numerics={'mode': 'trainium'}) or %trn numerics)"
        )
        return f"{head}. {_plumbing(ev)}"
    if t["mode"] not in ("trainium", "hardware"):
        head = f"NOT JUDGED on {t['mode']} numerics: {EXACT_NOTE} ({t['origin']}, {t['modules']} module outputs)"
    else:
        head = f"{'PASS' if t['acceptable'] else 'FAIL'} ({t['origin']}): {t['verdict']}"
    policy = f"numerics mode: {t['policy']}"
    if t["sourced"]:
        policy += f"; sourced ({len(t['sourced'])}): {'; '.join(t['sourced'])}"
    if t["assumed"]:
        policy += f"; assumed: {'; '.join(t['assumed'])}"
    return f"{head}. {policy}. {_plumbing(ev)}"


class MigrationReport(Result):
    """The report: six questions, the evidence that answers each, and the common ambiguity it avoids."""

    QUESTIONS = (
        (
            "Does the model run?",
            "Exact code, versions and completed execution",
            "Confusing load success with full workload success",
        ),
        (
            "Is the result acceptable?",
            "Task-quality checks and numerical tolerances",
            "Treating identical shapes as equivalent answers",
        ),
        (
            "Where does work execute?",
            "Operator placement and fallback profile",
            "Assuming every successful API call is device-native",
        ),
        (
            "How fast is the service?",
            "End-to-end latency and throughput at stated load",
            "Reporting only a kernel or enqueue interval",
        ),
        (
            "What does startup cost?",
            "Cold and warm measurements with cache conditions",
            "Hiding compilation inside an unreported warmup",
        ),
        (
            "What must be maintained?",
            "Custom kernels, patches and version constraints",
            "Counting the device change while omitting integration work",
        ),
    )

    def __init__(self, evidence: Evidence, notes: list[str] | None = None) -> None:
        self.evidence = evidence
        self.notes = list(notes or [])

    def parts(self) -> list[Result]:
        return [
            Table(
                "Migration evidence report",
                ["Question", "Evidence from this session", "Common ambiguity"],
                self.rows(),
                self.notes,
            )
        ]

    def text(self) -> str:
        """The report as plain text (``str(report)``, ``text/plain``): each question, its evidence, its ambiguity.

        Nothing is escaped here: Markdown escaping belongs to :meth:`to_markdown`, HTML escaping to the HTML view.
        """
        lines = ["Migration evidence report"]
        for i, (q, a, amb) in enumerate(self.rows(), 1):
            lines += ["", f"{i}. {q}", f"   {a}", f"   Common ambiguity: {amb}"]
        return "\n".join(lines + ([""] + [f"note: {n}" for n in self.notes] if self.notes else [])) + "\n"

    def rows(self) -> list[tuple[str, str, str]]:
        """``(question, evidence from this session, common ambiguity)`` for each of the six rows."""
        ev = self.evidence
        versions = "; ".join(f"{k} {v}" for k, v in ev.versions.items())
        run = f"{versions}. {ev.completed or 'execution: ' + NOT_MEASURED}"
        numerics = acceptable_row(ev)
        p = ev.placement
        calls = p.get("calls", {})
        # our category, then AWS's published class for it (to hold against torch_api_compatibility.md)
        placement = ", ".join(f"{k} {v} ({AWS_CLASSES.get(k, 'N')})" for k, v in sorted(calls.items()))
        placement = placement or NOT_MEASURED
        if p.get("fallbacks"):
            tops = "; ".join(
                f"aten::{n} ×{c} ({fmt_bytes(b) if isinstance(b, int | float) else b} moved; "
                f"{aws_class_of(n, 'cpu_fallback')}) at {s}"
                for n, c, b, s in p["fallbacks"][:5]
            )
            placement += f". Top fallbacks: {tops}"
        elif calls:
            placement += ". No CPU fallbacks."
        if ev.latency:
            lat = ev.latency
            speed = (
                f"batch {lat['batch'] if lat['batch'] is not None else 'not stated'}; {lat['boundary']}; "
                f"p50 wall ({lat.get('wall_label', 'simulator on this host')}) {_ms(lat['wall_p50_s'])}; "
                f"p50 modeled device time {_ms(lat['modeled_device_p50_s'])}"
            )
            if lat.get("throughput_per_s_modeled"):
                speed += f"; modeled throughput {fmt_rate(lat['throughput_per_s_modeled'], 'samples')}"
        elif "latency" in ev.skipped:
            speed = f"latency/throughput could not run: {ev.skipped['latency']}"
        else:
            speed = f"latency/throughput: {NOT_MEASURED}"
        if ev.startup:
            s = ev.startup
            startup = (
                f"{plural(s['graphs'], 'graph')} ({s['cache']}); {_cold(s)}; "
                f"warm call {_ms(s['warm_call_s'])} wall ({s.get('wall_label', 'simulator on this host')})"
            )
            if s["recompile_reasons"]:
                startup += f"; recompiles: {'; '.join(s['recompile_reasons'])}"
        else:
            startup = f"cold vs warm: {NOT_MEASURED} (no compiled run)"
        estimate = _serve_estimate()
        if estimate is not None:
            speed += f". {estimate.line()}"
            if estimate.costs is not None:
                startup += f". Serve estimate (modeled): {estimate.costs.line()}"
        speed += f". {_backing()}"
        m = ev.maintain
        maintain = "; ".join(f"{k}: {v if v not in ({}, [], '') else 'none'}" for k, v in m.items()) or NOT_MEASURED
        answers = (run, numerics, placement, speed, startup, maintain)
        return [(q, a, amb) for (q, _, amb), a in zip(self.QUESTIONS, answers)]

    def to_markdown(self) -> str:
        """The report as a Markdown table, followed by its notes (each escaped for Markdown)."""
        lines = [
            "# Migration evidence report",
            "",
            "| Question | Evidence from this session | Common ambiguity |",
            "|---|---|---|",
        ]
        for q, a, amb in self.rows():
            lines.append(f"| {md_escape(q)} | {md_escape(a)} | {md_escape(amb)} |")
        if self.notes:  # the same notes the text and HTML views carry
            lines += [""] + [f"Note: {md_escape(n)}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def save(self, path: str | Path) -> Path:
        """Write the Markdown (``.md``) or HTML (``.html``) report to ``path``; returns the path."""
        path = Path(path)
        text = self._repr_html_() if path.suffix == ".html" else self.to_markdown()
        return write_text_atomic(path, text)


def report(
    model: torch.nn.Module | None = None,
    inputs: Any = None,
    *,
    runs: int = 5,
    batch: int | None = None,
    save: str | Path | None = None,
) -> MigrationReport:
    """Build the migration report from this session's evidence (optionally measuring ``model`` on ``inputs``).

    ``save`` writes it beside the notebook (``.md`` or ``.html``). Raises what the model raises on the device.
    """
    rep = MigrationReport(collect_evidence(model, inputs, runs=runs, batch=batch))
    if model is not None:
        _last[:] = [rep]
    if save is not None:
        rep.save(save)
    return rep


def last_report() -> MigrationReport:
    """The last report measured with a model in this session, else one from the session's evidence alone."""
    if _last:
        # The model's own stages (run, numerics, latency) are those the last report measured; the session-wide
        # rows (placement, compiles, maintenance) are read now, so the report reflects every cell run before it.
        measured, now = _last[0].evidence, collect_evidence(None, None)
        now.completed, now.numerics, now.latency = measured.completed, measured.numerics, measured.latency
        now.three_way = now.three_way or measured.three_way  # the session's newest comparison, else the report's
        now.skipped = dict(measured.skipped)
        return MigrationReport(
            now,
            [
                "numerics and latency: the model run of the last trn_notebook.report(model, inputs, …); call it "
                "again to re-measure. Three-way numerics: the session's last comparison. Placement, startup and "
                "maintenance: the whole session up to this cell"
            ],
        )
    return MigrationReport(
        collect_evidence(None, None),
        ["numerics and latency are measured when you pass a model: trn_notebook.report(model, inputs, batch=…)"],
    )
