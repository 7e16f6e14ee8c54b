"""Every workshop notebook under the fake TorchNeuron (issue 18): which run as they would on a Trn2.

Each ``examples/*.ipynb`` runs in a fresh kernel and a fresh scratch folder under the stand-in
``torch_neuronx`` of ``tests/facts/fake_hardware`` with its ``neuron`` device, its cells tagged
simulator-only left out, exactly as ``tests/facts/test_fake_hardware_notebook.py`` runs the quickstart
(both use ``tests.facts.fakehw.run_notebook``). One line per notebook: passed or failed, seconds, and for a
failure the cell id and the last line of the error. A run that raises nothing but never prints the check
cell's ``all checks passed`` is shown as failed too, unless that check cell is itself tagged simulator-only
(then the line says so: every cell that would run on a Trn2 ran, but nothing asserted their figures).

Run from the checkout: ``PYTHONPATH=. python benchmarks/bench_fake_hardware_workshop.py [-k STEM] [--timeout S]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.facts.fakehw import run_notebook  # noqa: E402 - after the checkout is on the path
from tests.notebooks.workshop import EXAMPLES, NOTEBOOKS, PASSED  # noqa: E402


def _check_cells(name: str) -> set[str]:
    """Ids of the cells of ``examples/<name>`` that print the pass line."""
    nb = json.loads((EXAMPLES / name).read_text(encoding="utf-8"))
    return {c["id"] for c in nb["cells"] if c["cell_type"] == "code" and PASSED in "".join(c["source"])}


def main() -> int:
    """Run the sweep and print one line per notebook; exit status 1 when any notebook failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="select", default="", help="only notebooks whose name contains this")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    args = parser.parse_args()
    names = [n for n in NOTEBOOKS if args.select in n]
    failed = 0
    start = time.perf_counter()
    for name in names:
        with tempfile.TemporaryDirectory(prefix="fakehw-") as tmp:
            run = run_notebook(name, Path(tmp), timeout=args.timeout)
        checked = any(PASSED in text for text in run.texts.values())
        check_skipped = bool(set(run.skipped) & _check_cells(name))
        if run.ok and checked:
            verdict = "passed"
        elif run.ok and check_skipped:
            verdict = "passed  (its check cell is simulator-only: every other cell ran)"
            checked = True
        elif run.ok:
            verdict = f"failed  (no cell printed {PASSED!r})"
        else:
            verdict = f"failed  cell {run.error_cell}: {run.error}"
        failed += not (run.ok and checked)
        skipped = f"{len(run.skipped)} simulator-only skipped"
        print(f"{name:32s} {run.seconds:6.1f} s  {skipped:24s} {verdict}", flush=True)
    print(
        f"{len(names) - failed}/{len(names)} passed under the fake TorchNeuron in {time.perf_counter() - start:.0f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
