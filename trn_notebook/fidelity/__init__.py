"""Model-level fidelity: full-size models walked shapes-only and priced by the device cost model.

* :mod:`.walk` — the shapes-only walk (``FakeTensorMode`` + a ``TorchDispatchMode``): every ATen op's
  FLOPs and HBM bytes; the one function to swap for ``trn_notebook.dryrun()`` later;
* :mod:`.model` — one graph execution's modeled budget (compute, weight/KV reads, TP collectives,
  host, launch, padding) at the calibrated efficiencies of ``device.costmodel``;
* :mod:`.ledger` — the published Trainium rows and their modeled figures;
* :mod:`.fit` — the fitted constants (four, with the compile constant) and the rows they are fitted on;
* :mod:`.outliers` — the rows left out of band and the cited mechanism behind each;
* :mod:`.serve` — ``serve_estimate()``: TTFT, TPOT, p50/p99 and tokens/s of a serving configuration;
* :mod:`.costs` — time to the first useful result and the cost comparison (user figures only).

``python benchmarks/bench_fidelity.py`` regenerates docs/fidelity.md's "Model level" section.
"""

from .model import Budget, Layout, step_budget
from .walk import OpCount, walk

__all__ = ["Budget", "Layout", "OpCount", "step_budget", "walk"]
