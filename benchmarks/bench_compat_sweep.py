"""The full OpInfo conformance sweep of the neuron device: prints pass rates against the CPU baseline.

Every OpInfo entry's samples run on CPU (the baseline, in the same worker process) and on ``neuron``;
a sample counts when it runs on CPU. Workers are subprocesses, so an interpreter crash is reported, not
fatal. Targets: forward float32 >= 97%, backward float32 >= 95%, zero crashes.

    python benchmarks/bench_compat_sweep.py [--ops PATTERN] [--write-docs]
"""

from __future__ import annotations

import argparse
import time

from trn_notebook.compat.api import sweep
from trn_notebook.compat.table import summarize, to_markdown

TARGETS = {"forward": 0.97, "backward": 0.95}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", help="comma-separated globs over OpInfo names (default: all)")
    parser.add_argument("--write-docs", action="store_true", help="regenerate docs/compatibility.md")
    args = parser.parse_args()
    t0 = time.perf_counter()
    results = sweep(args.ops, quick=False, isolated=True)
    s = summarize(results)
    print(f"OpInfo entries swept: {s.ops} in {time.perf_counter() - t0:.0f} s; interpreter crashes: {s.crashes}")
    for name, passed, total in (
        ("forward", s.forward_passed, s.forward_total),
        ("backward", s.backward_passed, s.backward_total),
    ):
        rate = passed / total if total else 1.0
        verdict = "ok" if rate >= TARGETS[name] else "BELOW TARGET"
        print(
            f"{name:8s} float32: {passed}/{total} samples pass vs CPU = {rate:.2%} (target {TARGETS[name]:.0%}: {verdict})"
        )
    print("failing float32 forward samples by op and reason:")
    for reason, n in s.reasons:
        print(f"  {n:6d}  {reason}")
    print("failing float32 backward samples by op and reason:")
    for reason, n in s.backward_reasons:
        print(f"  {n:6d}  {reason}")
    print("failing float32 out= / in-place / print checks:")
    for reason, n in s.variant_reasons:
        print(f"  {n:6d}  {reason}")
    if args.write_docs:
        with open("docs/compatibility.md", "w", encoding="utf-8") as fh:
            fh.write(to_markdown(results, "python benchmarks/bench_compat_sweep.py --write-docs"))
        print("wrote docs/compatibility.md")


if __name__ == "__main__":
    main()
