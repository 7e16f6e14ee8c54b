"""The JSON-bomb guard against the parse it protects (issue 57): time and extra memory of
``limits.json_shape`` next to ``json.loads`` on the same bytes, in this process.

Inputs: a 47 MB Kineto-shaped trace (many short strings with brackets in names) and a 64 MB bomb
(``[]`` repeated, what the guard exists to refuse). Memory is the peak growth of this process's resident
set while the call runs (sampled by a thread every 2 ms, after ``gc.collect``). Targets: the bomb
<= 0.5 s and <= 64 MB extra; on the trace the guard adds <= 20 % to the parse.
Run: ``python benchmarks/bench_json_guard.py``.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from trn_notebook import limits


def _trace(target_bytes: int) -> bytes:
    event = {
        "ph": "X", "cat": "cpu_op", "name": "aten::index_put_ [neuron sim]", "pid": 1, "tid": 7,
        "ts": 1234567.891, "dur": 12.5, "args": {"External id": 42, "Input Dims": [[4, 4], [], [4]]},
    }  # fmt: skip
    one = len(json.dumps(event)) + 2
    return json.dumps({"traceEvents": [dict(event, ts=i) for i in range(target_bytes // one)]}).encode()


def _measure(fn: Callable[[], Any]) -> tuple[float, int]:
    gc.collect()
    proc = psutil.Process(os.getpid())
    base = proc.memory_info().rss
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.002)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    t0 = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t0
    done.set()
    t.join()
    peak[0] = max(peak[0], proc.memory_info().rss)
    del result
    return seconds, peak[0] - base


def main() -> None:
    """Print a markdown table: seconds and extra MB of the guard and of json.loads, and their ratio."""
    print(f"load average before: {os.getloadavg()}")
    trace = _trace(47 * 10**6)
    bomb = b"[" + b"[]," * (64 * 10**6 // 3) + b"[]]"
    print("| input | guard s | guard +MB | json.loads s | json.loads +MB | guard / parse time |")
    print("|---|---|---|---|---|---|")
    for label, raw in ((f"trace {len(trace) / 1e6:.0f} MB", trace), (f"bomb {len(bomb) / 1e6:.0f} MB", bomb)):
        guard = functools.partial(limits.json_shape, raw)
        g_s, g_b = min((_measure(guard) for _ in range(3)), key=lambda r: r[0])
        parse = functools.partial(json.loads, raw)
        p_s, p_b = _measure(parse) if label.startswith("trace") else (float("nan"), 0)
        ratio = g_s / p_s if p_s == p_s else float("nan")
        p_cell = f"{p_s:.2f} | {p_b / 1e6:.0f}" if p_s == p_s else "not run (the bomb is what the guard refuses) | -"
        print(f"| {label} | {g_s:.2f} | {g_b / 1e6:.0f} | {p_cell} | {ratio:.2f} |")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
