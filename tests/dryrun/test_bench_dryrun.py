"""benchmarks/bench_dryrun.py's smallest configuration runs to completion in a fresh process after eager warm-up
(issue 48 item 6: the benchmark once hung in its own warm-up)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_dryrun.py"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_smallest_configuration_runs_and_prints_its_figures() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--smallest"], capture_output=True, text=True, timeout=240, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "dry / plain = " in out and "fits False" in out
    assert "DOES NOT FIT (modeled): needs peak allocated" in out and "first over capacity in phase default" in out
    assert "20 returned, 0 hangs" in out
