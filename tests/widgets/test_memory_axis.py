"""The memory timeline's x axis (``memory.js``'s ``timeAxis``, run by Node): a pause is cut, phase bands keep their width.

Issue 30: the three phases of notebook 06's training cell take about a second; after the student paused for
minutes before the next allocation, a linear wall-time axis squeezed their bands into a sliver at the left edge.
"""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path

import pytest

MEMORY_JS = Path(__file__).resolve().parents[2] / "trn_notebook" / "widgets" / "static" / "memory.js"
NODE = shutil.which("node")
LEFT, WIDTH = 66, 566

pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js to import the widget's ES module")


def axis(times: list[float], probes: list[float], pixels: list[float]) -> dict:
    """``timeAxis(times, LEFT, WIDTH)`` evaluated in Node: X at ``probes``, T at ``pixels``, gaps, break width."""
    script = (
        f"const m = await import({json.dumps(MEMORY_JS.as_uri())});"
        f"const a = m.timeAxis({json.dumps(times)}, {LEFT}, {WIDTH});"
        f"console.log(JSON.stringify({{x: {json.dumps(probes)}.map(a.X), t: {json.dumps(pixels)}.map(a.T),"
        " gaps: a.gaps, breakPx: a.breakPx, pause: m.PAUSE_S}));"
    )
    out = subprocess.run([str(NODE), "--input-type=module", "-e", script], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_pause_is_cut_so_the_busy_second_keeps_most_of_the_width() -> None:
    busy = [0.0, 0.1, 0.35, 0.6, 1.0]  # load, warm-up, steady: about a second of allocations
    later = [301.0, 301.2, 301.5]  # the next cell, five minutes later
    a = axis(busy + later, [0.0, 1.0, 301.0, 301.5], [LEFT, LEFT + WIDTH])
    x0, x_busy_end, x_resume, x_end = a["x"]
    assert a["gaps"] == [[1.0, 301.0]] and 0 < a["breakPx"] <= 14
    assert x0 == LEFT and x_end == pytest.approx(LEFT + WIDTH)
    # the busy second is drawn in proportion to the busy time shown (1.0 s of 1.5 s), not 1 s of 301.5 s
    assert (x_busy_end - x0) == pytest.approx((WIDTH - a["breakPx"]) * 1.0 / 1.5)
    assert x_resume - x_busy_end == pytest.approx(a["breakPx"])
    assert a["t"] == pytest.approx([0.0, 301.5])  # tick labels read real wall times back


def test_without_a_pause_the_axis_is_linear_wall_time() -> None:
    times = [0.0, 0.5, 1.9, 3.0]  # no two samples further apart than PAUSE_S
    a = axis(times, times, [LEFT + WIDTH / 2])
    assert max(b - a_ for a_, b in itertools.pairwise(times)) <= a["pause"] and a["gaps"] == [] and a["breakPx"] == 0
    assert a["x"] == pytest.approx([LEFT + WIDTH * t / 3.0 for t in times])
    assert a["t"] == pytest.approx([1.5])


def test_x_and_t_are_inverse_and_monotone_across_several_pauses() -> None:
    times = [0.0, 0.4, 10.0, 10.3, 50.0, 50.1, 50.2]
    probes = [0.0, 0.2, 0.4, 5.0, 10.0, 10.3, 30.0, 50.0, 50.2]
    a = axis(times, probes, [])
    assert len(a["gaps"]) == 2 and a["x"] == sorted(a["x"]) and len(set(a["x"])) == len(a["x"])
    back = axis(times, [], a["x"])["t"]
    assert back == pytest.approx(probes)
