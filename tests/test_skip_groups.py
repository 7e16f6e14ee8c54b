"""The suite names what did not run, by group, and a required browser that skipped fails the run (issue 49)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.skip_groups import skip_group, summary_lines

ROOT = Path(__file__).resolve().parents[1]
INNER = os.environ.get("TRN_SKIP_GROUPS_INNER") == "1"


def _skipped(reason: str, *, browser: bool = False) -> pytest.TestReport:
    keywords = {"browser": 1} if browser else {}
    return pytest.TestReport(
        "tests/x.py::t", ("tests/x.py", 1, "t"), keywords, "skipped", ("tests/x.py", 1, f"Skipped: {reason}"), "setup"
    )


def test_each_skip_lands_in_the_group_a_reader_acts_on():
    assert skip_group(_skipped("/usr/bin/chromium is missing: install Debian's browser")) == "browser"
    assert skip_group(_skipped("could not import 'playwright': No module named 'playwright'")) == "browser"
    assert skip_group(_skipped("something else", browser=True)) == "browser"
    assert skip_group(_skipped("needs Python 3.12 (TorchNeuron)")) == "python"
    assert skip_group(_skipped("needs torch_neuronx on a Trn2")) == "hardware"
    assert skip_group(_skipped("network namespaces are Linux-only")) == "platform"
    assert skip_group(_skipped("the whole zoo: set TRN_TRUTH_ALL=1 (run by hand)")) == "opt-in"
    assert skip_group(_skipped("runs in the fresh process of test_truth_in_a_fresh_process")) == "elsewhere"
    assert skip_group(_skipped("a reason nobody foresaw")) == "other"
    # the nbclient notebook runs skip where the browser runs them: that is not a browser that did not run
    ran_elsewhere = "run through JupyterLab in Chromium by tests/notebooks/test_workshop_browser.py"
    assert skip_group(_skipped(ran_elsewhere)) == "elsewhere"


def test_the_summary_counts_each_group_and_names_each_reason():
    lines = summary_lines(
        [_skipped("/usr/bin/chromium is missing")] * 3 + [_skipped("network namespaces are Linux-only")]
    )
    assert lines == [
        "browser: 3 skipped — /usr/bin/chromium is missing (×3)",
        "platform: 1 skipped — network namespaces are Linux-only (×1)",
    ]


@pytest.mark.skipif(not INNER, reason="the outer run: runs in the inner pytest of the test below")
def test_inner_browser_test_that_skips():
    pytest.skip("/usr/bin/chromium is missing (the inner run's stand-in for a browser test)")


@pytest.mark.slow
@pytest.mark.skipif(INNER, reason="the outer run")
@pytest.mark.parametrize("required", [False, True])
def test_a_skipped_browser_test_fails_the_run_only_where_the_browser_is_required(required):
    env = {**os.environ, "TRN_SKIP_GROUPS_INNER": "1", "TRN_NOTEBOOK_REQUIRE_BROWSER": "1" if required else "0"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"{__file__}::test_inner_browser_test_that_skips"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert "what did not run" in done.stdout and "browser: 1 skipped" in done.stdout, done.stdout
    if required:
        assert done.returncode == 1 and "browser tests skipped although chromium is installed" in done.stdout
    else:
        assert done.returncode == 0, done.stdout
