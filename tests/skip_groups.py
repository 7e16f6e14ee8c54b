"""What did not run, by group (issue 49 item 4): the suite's summary names every skipped group and why.

A skipped test is sorted by its markers and its reason into one of a few groups a reader can act on:
``browser`` (real-browser tests: Debian's ``chromium`` or playwright missing), ``python`` (a Python version),
``hardware`` (a real Trainium / ``torch_neuronx``), ``platform`` (Linux-only tools), ``opt-in`` (set a variable
to run a sweep by hand), ``elsewhere`` (checked by another test of this run: a fresh process, the browser), and
``other``. With ``TRN_NOTEBOOK_REQUIRE_BROWSER=1`` (set by ``.ci/run`` once ``chromium`` installed) a skipped
browser test fails the session: on such a machine a browser test that does not run is a defect, not noise.
"""

from __future__ import annotations

import os
import re

import pytest

GROUPS = ("browser", "python", "hardware", "platform", "opt-in", "elsewhere", "other")
_BY_REASON = (  # in order: the first match wins ("run through JupyterLab in Chromium" ran, elsewhere)
    ("elsewhere", re.compile(r"fresh process|the outer run|run through JupyterLab", re.I)),
    ("browser", re.compile(r"chromium|playwright", re.I)),
    ("python", re.compile(r"\bPython 3\.\d+|python_version", re.I)),
    ("hardware", re.compile(r"torch_neuronx|hardware|Trainium|NeuronCore", re.I)),
    ("platform", re.compile(r"Linux-only|namespace|not a git checkout|Node\.js", re.I)),
    ("opt-in", re.compile(r"set TRN_|by hand", re.I)),
)


def skip_reason(report: pytest.TestReport) -> str:
    """The reason text pytest recorded for a skipped report."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def skip_group(report: pytest.TestReport) -> str:
    """The group of a skipped report: its ``browser`` marker first, then its reason's words."""
    reason = skip_reason(report)
    for group, pattern in _BY_REASON:
        if pattern.search(reason):
            return group
    if "browser" in report.keywords:
        return "browser"
    return "other"


def summary_lines(skipped: list[pytest.TestReport]) -> list[str]:
    """One line per group that skipped anything: how many tests, and each distinct reason with its count."""
    by_group: dict[str, dict[str, int]] = {}
    for report in skipped:
        reasons = by_group.setdefault(skip_group(report), {})
        reason = skip_reason(report)
        reasons[reason] = reasons.get(reason, 0) + 1
    lines = []
    for group in GROUPS:
        if group in by_group:
            reasons = by_group[group]
            told = "; ".join(f"{r} (×{n})" for r, n in sorted(reasons.items(), key=lambda x: -x[1]))
            lines.append(f"{group}: {sum(reasons.values())} skipped — {told}")
    return lines


def browser_required() -> bool:
    """True when this run must not skip a browser test (``TRN_NOTEBOOK_REQUIRE_BROWSER=1``)."""
    return os.environ.get("TRN_NOTEBOOK_REQUIRE_BROWSER") == "1"
