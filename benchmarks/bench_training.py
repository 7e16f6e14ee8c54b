"""Training ledger: plan() against AWS's published Trn1 training table (regenerates docs/fidelity.md's "Training").

    python benchmarks/bench_training.py             # the ledger at the committed constant; write the section
    python benchmarks/bench_training.py --fit       # refit training_compute_efficiency on T1, T2 first
    python benchmarks/bench_training.py --no-write  # print only

Every row runs ``plan(..., execution="graph")`` on trn1.32xlarge (the figure) and trn1n.32xlarge (beside it);
the figures are modeled, so the machine's load changes only the wall time, which is printed with ``uptime``
(the issue's figure: ``plan()`` of T1's configuration within 3 minutes on 2 cores). The fit's value is printed
beside the committed default, so a drift between them shows.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

from trn_notebook.device import costmodel
from trn_notebook.fidelity import training

DOC = Path(__file__).resolve().parents[1] / "docs" / "fidelity.md"
BEGIN, END = "<!-- training: begin (bench_training.py) -->", "<!-- training: end -->"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", action="store_true", help="refit the training constant on T1 and T2 first")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/fidelity.md alone")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    committed = costmodel.get_cost_constants().training_compute_efficiency
    if args.fit:
        t0 = time.perf_counter()
        fitted = training.fit()
        print(f"fit on T1, T2: training_compute_efficiency {fitted:.3f} (committed {committed:.3f}), "
              f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    results = []
    for row in training.ROWS:
        t0 = time.perf_counter()
        r = training.evaluate(row)
        wall = time.perf_counter() - t0
        results.append(r)
        ratio = "missing" if r.modeled is None else f"{r.ratio:.2f}x"
        modeled = "missing" if r.modeled is None else f"{r.modeled:,.1f}"
        print(f"{row.id}: published {row.published:,.2f} {row.unit}/s, modeled {modeled} ({ratio}), "
              f"dominates {r.dominant}; plan wall {wall:.1f} s for trn1 + trn1n")  # fmt: skip
    table = training.markdown(results)
    print(table)
    if not args.no_write:
        text = DOC.read_text(encoding="utf-8")
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        DOC.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}", encoding="utf-8")
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
