"""The even-numbered lessons (02, 04, …) through the repeat runs of ``test_repeat_runs.py`` (which has the odd ones).

Two files, so that pytest-xdist (``--dist loadfile``: a file stays on one worker) runs the two halves at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.notebooks.test_repeat_runs import repeat_runs
from tests.notebooks.workshop import NOTEBOOKS

pytestmark = pytest.mark.slow
EVEN_LESSONS = NOTEBOOKS[1::2]


@pytest.mark.parametrize("name", EVEN_LESSONS)
def test_checks_hold_after_run_all_twice_any_re_run_and_a_restart(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repeat_runs(name, tmp_path, monkeypatch)
