"""Fitting the model-level cost model's fitted constants on a named subset of the ledger rows.

The fitted constants — five in all (:data:`ALL_FITTED`, each with the rows it is fitted on):

* ``compute_efficiency`` (MFU), ``memory_efficiency`` (MBU) and ``collective_in_graph_s`` of
  ``device.costmodel.CostConstants``, jointly on the fit rows (:func:`split`: every ledger row but the
  held-out and the not-fittable ones) plus R6's published profile split (collectives ~3 ms of a token
  step), so the collective floor matches the split where it is published;
* ``NEURON_COMPILE_FIXED_S`` and ``NEURON_COMPILE_S_PER_INSTRUCTION`` (``compiler.compile_time``), jointly
  on two compile rows, one small graph (ViT-L, TorchNeuron native) and one large (Trinity-Mini TP4 batch 1);
  every other compile row is held out (``fidelity.compile_rows``).

:func:`fit` refits the first three (:data:`FITTED`); the objective is the mean squared log ratio
(modeled / published) over the fit rows plus R6's collective split, minimised by coordinate descent
in log space through the same ``ledger.evaluate`` that produces the ledger (no separate formula).
``serving_step_s`` is **not** fitted: it is R6's TPOT minus R6's published device profile (1.5 ms,
``CostConstants``), and ``vllm_step_s`` is R6's vLLM ITL minus its native TPOT (1.7 ms).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..device import costmodel
from .ledger import ROWS, Row, evaluate

FITTED = ("compute_efficiency", "memory_efficiency", "collective_in_graph_s")  # refit by fit()
# Every fitted constant of the model level, where it lives, and the rows it is fitted on (five).
ALL_FITTED = (
    ("compute_efficiency", "device.costmodel.CostConstants", "the fit rows (fit.split) + R6's collective split"),
    ("memory_efficiency", "device.costmodel.CostConstants", "the fit rows (fit.split) + R6's collective split"),
    ("collective_in_graph_s", "device.costmodel.CostConstants", "the fit rows + R6's collective split (~3 ms)"),
    ("NEURON_COMPILE_FIXED_S", "compiler.compile_time", "ViT-L native (~20 s) + Trinity-Mini TP4 batch 1 (3.9 min)"),
    ("NEURON_COMPILE_S_PER_INSTRUCTION", "compiler.compile_time", "ViT-L native + Trinity-Mini TP4 batch 1 compiles"),
)
BOUNDS = {
    "compute_efficiency": (0.05, 1.0),
    "memory_efficiency": (0.1, 1.0),
    "collective_in_graph_s": (1e-6, 200e-6),
}
R6_COLLECTIVES_S = 3e-3  # trn2-model-figures.md R6, "Profile split of a token step: collectives ~3 ms"


def objective(rows: Iterable[Row]) -> float:
    """Mean squared log ratio over ``rows`` plus R6's collective split (at the constants in force)."""
    errs = []
    for row in rows:
        r = evaluate(row)
        errs.append(math.log(r.ratio) ** 2)
    r6 = evaluate(next(r for r in ROWS if r.id == "R6" and r.metric == "TPOT"))
    errs.append(math.log(r6.budget.collectives_s / R6_COLLECTIVES_S) ** 2)
    return sum(errs) / max(len(errs), 1)


def fit(rows: Iterable[Row], rounds: int = 6) -> dict[str, float]:
    """Fit :data:`FITTED` on ``rows``; sets them with ``set_cost_constants`` and returns them."""
    rows = tuple(rows)
    step = 2.0
    best = objective(rows)
    for _ in range(rounds):
        for name in FITTED:
            lo, hi = BOUNDS[name]
            while True:
                current = getattr(costmodel.get_cost_constants(), name)
                moved = False
                for factor in (step, 1 / step):
                    trial = min(hi, max(lo, current * factor))
                    costmodel.set_cost_constants(**{name: trial})
                    value = objective(rows)
                    if value < best - 1e-9:
                        best, moved = value, True
                        break
                    costmodel.set_cost_constants(**{name: current})
                if not moved:
                    break
        step = math.sqrt(step)
    return {name: getattr(costmodel.get_cost_constants(), name) for name in FITTED}


HELD_OUT = ("R1", "R12", "R17")
# Rows no setting of the fitted constants can reach, kept out of the objective (and shown out of band):
# MoE context encoding (published 30-200x slower than its FLOPs at any MFU) and R6's decode step
# (its published profile puts ~12 ms in compute that a batch-1 step's FLOPs do not explain).
NOT_FITTABLE = (("R6", "TTFT", ""), ("R6", "TPOT", ""), ("R11", "TTFT", "Qwen3.5-35B-A3B"))


def split(rows: tuple[Row, ...] = ROWS, held_out: Iterable[str] = HELD_OUT) -> tuple[list[Row], list[Row]]:
    """The rows fitted on and the rows held out (by row id); :data:`NOT_FITTABLE` rows are in neither."""
    out = set(held_out)
    fit_rows = [r for r in rows if r.id not in out and (r.id, r.metric, r.note) not in NOT_FITTABLE]
    return fit_rows, [r for r in rows if r.id in out]


def ledger_backing() -> str:
    """Which ledger rows back every modeled figure of the calibrated cost model (fit and held-out rows)."""
    fitted = sorted({r.id for r in split()[0]}, key=lambda i: int(i[1:]))
    return (
        f"modeled with the calibrated cost model: constants fitted on ledger rows {', '.join(fitted)} and R6's collective split, "
        f"checked on held-out rows {', '.join(HELD_OUT)} (docs/fidelity.md, 'Model level')"
    )
