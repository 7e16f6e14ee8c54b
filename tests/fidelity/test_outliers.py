"""The out-of-band ledger rows' cited mechanisms: keyed to real rows, and the figures they quote."""

from __future__ import annotations

import pytest

from trn_notebook.fidelity import outliers
from trn_notebook.fidelity.compile_rows import COMPILE_ROWS
from trn_notebook.fidelity.ledger import ROWS, Result
from trn_notebook.fidelity.model import Budget


def test_every_reason_names_a_ledger_row():
    keys = {(r.id, r.metric, r.note) for r in ROWS}
    assert {key for key, _ in outliers.REASONS} <= keys
    assert {label for label, _ in outliers.COMPILE_REASONS} <= {r.label for r in COMPILE_ROWS}
    row = next(r for r in ROWS if r.id == "R3" and r.metric == "TTFT")
    assert outliers.reason(row.id, row.metric, row.note) is not None
    assert outliers.reason("R3", "TPOT", "") is None and outliers.compile_reason("no such row") is None


def test_implied_efficiency_inverts_the_compute_part():
    row = next(r for r in ROWS if r.id == "R3" and r.metric == "TTFT")  # published 0.8142 s
    budget = Budget(compute_s=1.0, collectives_s=0.1, host_s=0.0142)
    result = Result(row, budget.total_s, budget)
    # 1.0 s of compute at 0.2 must shrink to 0.8142 - 0.1142 = 0.7 s: efficiency 0.2 / 0.7
    assert outliers.implied_efficiency(result, 0.2) == pytest.approx(0.2 / 0.7)
    short = Result(row, 0.5, Budget(compute_s=0.1, collectives_s=0.9))  # the rest alone exceeds the published
    assert outliers.implied_efficiency(short, 0.2) == float("inf")
    assert outliers.fused_step_ratio(Result(row, 9.1e-3, budget)) == pytest.approx(1.0)
