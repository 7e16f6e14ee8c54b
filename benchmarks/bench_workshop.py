"""How long each workshop notebook takes, cold and warm (issue 50 item 4): the README's instructor table.

For every notebook in ``examples/``: Run All in a fresh kernel with an empty compile cache of its own (cold),
then Run All in another fresh kernel on the cache the first run left (warm: a student coming back the next
day). Baseline, in this process: a fresh kernel that only runs ``import torch, trn_notebook`` (what every
notebook pays before its first lesson cell). Prints a markdown table (seconds, and each against the baseline)
and the machine's load average before and after, since every figure is a measured wall time of a shared
machine. Run: ``python benchmarks/bench_workshop.py [--only 05_compile_cache.ipynb ...]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_all(nb_path: Path, cache: Path) -> float:
    """Run All of the notebook at ``nb_path`` in a fresh kernel with ``cache`` as its compile cache; seconds."""
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = str(cache)
    nb = nbformat.read(nb_path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(nb_path.parent)}},
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    t0 = time.perf_counter()
    client.execute()  # kernel start included: what a student waits for after "Restart and Run All"
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="notebook file names (default: all)")
    args = parser.parse_args()
    names = args.only or sorted(p.name for p in EXAMPLES.glob("*.ipynb"))
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-workshop-") as tmp:
        root = Path(tmp)
        base_nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import torch, trn_notebook")])
        nbformat.write(base_nb, root / "baseline.ipynb")
        baseline = min(run_all(root / "baseline.ipynb", root / "base-cache") for _ in range(2))
        rows = []
        for name in names:
            folder = root / name.removesuffix(".ipynb")
            folder.mkdir()
            shutil.copy(EXAMPLES / name, folder / name)
            cache = folder / "cache"
            cold = run_all(folder / name, cache)
            warm = run_all(folder / name, cache)
            rows.append((name, cold, warm))
            print(f"  {name}: cold {cold:.1f} s, warm {warm:.1f} s", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    print(f"baseline (fresh kernel, `import torch, trn_notebook`): {baseline:.1f} s")
    print("| notebook | cold (s) | warm (s) | cold ÷ baseline | warm ÷ cold |")
    print("|---|---:|---:|---:|---:|")
    for name, cold, warm in rows:
        print(
            f"| {name.removesuffix('.ipynb')} | {cold:.1f} | {warm:.1f} | {cold / baseline:.1f}× | {warm / cold:.2f} |"
        )
    total_cold = sum(r[1] for r in rows)
    total_warm = sum(r[2] for r in rows)
    print(f"| all {len(rows)} | {total_cold:.0f} | {total_warm:.0f} | | {total_warm / total_cold:.2f} |")
    print(
        f"machine: {os.cpu_count()} cores, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
        "(measured wall times, kernel start included)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
