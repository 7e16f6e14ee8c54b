""" "Why is it slow": an HTA-style breakdown of the modeled device timeline of a merged trace.

Reads only the trace (so a trace saved by an earlier run works): device busy vs idle in the modeled
window, the idle time split into *fallback* (host computing a CPU fallback and copying both ways),
*compile*, *after sync* (the queue drained at a sync — ``.item()``, ``.cpu()``, ``print`` — and the
device waits for the host to refill it; named with the source line) and *host-bound* (the host
dispatches slower than the device computes), plus the top source lines by device time.
"""

from __future__ import annotations

import bisect
import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..device.trace.lanes import BY_KEY, BY_TID
from ..display.format import fmt_bytes, fmt_compile, fmt_pct, fmt_s
from .traceio import load_trace

if TYPE_CHECKING:
    import pandas as pd

IDLE_KINDS = ("host_bound", "after_sync", "fallback", "compile")


@dataclass
class Summary:
    """The breakdown; times in milliseconds of the modeled clock (compile: wall seconds as a stall)."""

    window_ms: float
    busy_ms: float
    idle_ms: dict[str, float]
    syncs: pd.DataFrame
    fallbacks: pd.DataFrame
    top_lines: pd.DataFrame
    compiles: pd.DataFrame
    partial: str = ""
    findings: list[str] = field(default_factory=list)

    @property
    def idle_total_ms(self) -> float:
        """All idle time in the window."""
        return sum(self.idle_ms.values())

    def text(self) -> str:
        """The findings as plain text."""
        return "\n".join(self.findings)

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{html.escape(f)}</li>" for f in self.findings)
        tables = ""
        for title, df in (("Syncs", self.syncs), ("Fallbacks", self.fallbacks), ("Top lines", self.top_lines)):
            if len(df):
                tables += f"<h4>{title}</h4>" + df.head(10).to_html(index=False, float_format="%.3f")
        return f"<div class='trn-summary'><b>Why is it slow</b><ul>{items}</ul>{tables}</div>"

    def __repr__(self) -> str:
        return self.text()


def why_slow(source: Any, top: int = 10) -> Summary:
    """Analyse a merged trace (path, dict, or finished ``torch.profiler`` profile).

    Raises :class:`~.traceio.TraceFormatError` for a file that is not a trn-notebook trace.
    """
    if hasattr(source, "export_chrome_trace") and not isinstance(source, dict):
        from .export import trace_dict

        source = trace_dict(source)
    trace = load_trace(source)
    return summarize(trace, top)


def summarize(trace: dict[str, Any], top: int = 10) -> Summary:
    """The breakdown of an already loaded and validated merged trace."""
    import pandas as pd

    events = trace["traceEvents"]
    pid, lanes = _modeled_process(events)
    busy: list[tuple[float, float]] = []
    fallback_iv: list[tuple[float, float]] = []
    compile_iv: list[tuple[float, float]] = []
    syncs: list[tuple[float, str, str, str, float]] = []
    fallbacks: list[tuple[str, float, float, int, str]] = []
    lines: dict[str, list[Any]] = {}
    compiles: list[tuple[str, str, float, float | None]] = []
    lo, hi = float("inf"), float("-inf")
    for e in events:
        if e.get("pid") != pid:
            continue
        ph = e.get("ph")
        lane = lanes.get(e.get("tid"), "")  # the lane's key, matched by thread id
        args = e.get("args") or {}
        if ph == "X":
            ts, dur = float(e["ts"]), float(e["dur"])
            lo, hi = min(lo, ts), max(hi, ts + dur)
            if lane and BY_KEY[lane].device:  # modeled device work: eager ops, compiled graphs
                busy.append((ts, ts + dur))
                if lane == "op" or not args.get("has_kernels", False):
                    _add_line(lines, args, dur)
            elif lane == "kernel":
                _add_line(lines, args, dur)
            elif lane == "fallback":
                fallback_iv.append((ts, ts + dur))
                fallbacks.append(
                    (args.get("op", e["name"]), dur, float(args.get("copy_us", 0.0)), int(args.get("bytes", 0)),
                     args.get("source", "")),
                )  # fmt: skip
            elif lane == "compile":
                compile_iv.append((ts, ts + dur))
                modeled = args.get("modeled_neuron_compile_s")
                compiles.append(
                    (
                        args.get("graph", ""),
                        args.get("cache", ""),
                        float(args.get("wall_s", dur / 1e6)),
                        float(modeled) if isinstance(modeled, int | float) else None,
                    )
                )
        elif ph in ("i", "I") and lane == "sync":
            syncs.append(
                (float(e["ts"]), args.get("reason", e["name"]), args.get("source", ""), args.get("code", ""),
                 float(args.get("wait_us", 0.0))),
            )  # fmt: skip
    if lo == float("inf"):
        lo = hi = 0.0
    busy_u = union_intervals(busy)
    busy_us = sum(b - a for a, b in busy_u)
    idle = dict.fromkeys(IDLE_KINDS, 0.0)
    sync_idle: dict[tuple[str, str], float] = {}
    fb_u, cp_u = union_intervals(fallback_iv), union_intervals(compile_iv)
    syncs.sort()
    sync_ts = [s[0] for s in syncs]
    for a, b in _gaps(busy_u, lo, hi):
        fb = _overlap(fb_u, a, b)
        cp = _overlap(cp_u, a, b)
        rest = max(0.0, (b - a) - fb - cp)
        idle["fallback"] += fb
        idle["compile"] += cp
        j = bisect.bisect_left(sync_ts, a - 1e-6)
        if j < len(syncs) and syncs[j][0] <= b + 1e-6:
            idle["after_sync"] += rest
            key = (syncs[j][1], syncs[j][2])
            sync_idle[key] = sync_idle.get(key, 0.0) + rest
        else:
            idle["host_bound"] += rest
    sync_rows: dict[tuple[str, str], list[Any]] = {}
    for _, reason, src, code, wait in syncs:
        row = sync_rows.setdefault((reason, src), [reason, src, code, 0, 0.0])
        row[3] += 1
        row[4] += wait / 1e3
    sync_df = pd.DataFrame(
        [(*r, sync_idle.get(k, 0.0) / 1e3) for k, r in sync_rows.items()],
        columns=["reason", "source", "code", "count", "host_wait_ms", "device_idle_after_ms"],
    ).sort_values(["device_idle_after_ms", "host_wait_ms", "count"], ascending=False, ignore_index=True)
    fb_df = pd.DataFrame(fallbacks, columns=["op", "modeled_us", "copy_us", "bytes", "source"])
    fb_df = (
        fb_df.groupby(["op", "source"], as_index=False)
        .agg(calls=("modeled_us", "size"), total_ms=("modeled_us", "sum"), copy_ms=("copy_us", "sum"),
             bytes=("bytes", "sum"))
        .assign(total_ms=lambda d: d.total_ms / 1e3, copy_ms=lambda d: d.copy_ms / 1e3)
        .sort_values("total_ms", ascending=False, ignore_index=True)
    )  # fmt: skip
    line_df = pd.DataFrame(
        [(src, v[0], v[1] / 1e3, v[2]) for src, v in lines.items()], columns=["source", "code", "device_ms", "events"]
    ).sort_values("device_ms", ascending=False, ignore_index=True)
    comp_df = pd.DataFrame(compiles, columns=["graph", "cache", "wall_s", "modeled_neuron_compile_s"])
    s = Summary(
        window_ms=(hi - lo) / 1e3,
        busy_ms=busy_us / 1e3,
        idle_ms={k: v / 1e3 for k, v in idle.items()},
        syncs=sync_df,
        fallbacks=fb_df,
        top_lines=line_df.head(top),
        compiles=comp_df,
        partial=str((trace.get("trnNotebook") or {}).get("partial", "")),
    )
    s.findings = _findings(s)
    return s


def _modeled_process(events: list[dict[str, Any]]) -> tuple[Any, dict[Any, str]]:
    """The modeled process's pid and ``{tid: lane key}`` of the declared lanes it names (matched by tid).

    Raises :class:`~.traceio.TraceFormatError` when the trace has no modeled process."""
    pid = None
    for e in events:
        if (
            e.get("ph") == "M"
            and e.get("name") == "process_name"
            and (e.get("args") or {}).get("name", "").startswith("neuron:")
        ):
            pid = e.get("pid")
            break
    if pid is None:
        from .traceio import TraceFormatError

        raise TraceFormatError("the trace has no neuron:0 (modeled) process: was it profiled with PrivateUse1?")
    lanes = {
        e["tid"]: BY_TID[e["tid"]].key
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == pid and e.get("tid") in BY_TID
    }
    return pid, lanes


def _add_line(lines: dict[str, list[Any]], args: dict[str, Any], dur: float) -> None:
    src = args.get("source") or "<no user line: autograd engine / library>"
    row = lines.setdefault(src, [args.get("code", ""), 0.0, 0])
    if not row[0] and args.get("code"):
        row[0] = args["code"]
    row[1] += dur
    row[2] += 1


def union_intervals(iv: list[tuple[float, float]], keep_empty: bool = True) -> list[tuple[float, float]]:
    """The union of ``(start, end)`` intervals, sorted and merged where they touch or overlap.

    ``keep_empty=False`` drops zero-length intervals first (the comm ledger's exposed time); the profile summary
    keeps them, so an instant event still splits an idle gap as it did.
    """
    out: list[tuple[float, float]] = []
    for a, b in sorted(iv):
        if not keep_empty and b <= a:
            continue
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _gaps(union: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    out, t = [], lo
    for a, b in union:
        if a > t:
            out.append((t, a))
        t = max(t, b)
    if hi > t:
        out.append((t, hi))
    return out


def _overlap(union: list[tuple[float, float]], a: float, b: float) -> float:
    i = bisect.bisect_right(union, (a, float("inf"))) - 1
    total = 0.0
    i = max(i, 0)
    while i < len(union) and union[i][0] < b:
        x, y = union[i]
        total += max(0.0, min(b, y) - max(a, x))
        i += 1
    return total


def _findings(s: Summary) -> list[str]:
    out = []
    if s.partial:
        out.append(f"PARTIAL trace: the profiled code raised ({s.partial}); figures cover what ran before it.")
    w = s.window_ms or 1e-12
    out.append(
        f"Device busy {_ms(s.busy_ms)} of a {_ms(s.window_ms)} modeled window ({fmt_pct(s.busy_ms, w)}); "
        f"idle {_ms(s.idle_total_ms)}."
    )
    names = {"host_bound": "host-bound (host dispatch slower than the device)", "after_sync": "after syncs (queue "
             "drained)", "fallback": "CPU fallbacks (host compute + copies)", "compile": "compile (host, wall time)"}  # fmt: skip
    for k in sorted(IDLE_KINDS, key=lambda k: -s.idle_ms[k]):
        if s.idle_ms[k] > 0:
            out.append(f"  idle {names[k]}: {_ms(s.idle_ms[k])} ({fmt_pct(s.idle_ms[k], w)} of the window)")
    for r in s.syncs.head(3).itertuples():
        out.append(
            f"Sync {r.reason!s} at {r.source or '?'} ×{r.count}: host waited {_ms(r.host_wait_ms)}, device idle "
            f"{_ms(r.device_idle_after_ms)} after it" + (f" — `{r.code}`" if r.code else "")
        )
    for r in s.fallbacks.head(3).itertuples():
        out.append(
            f"Fallback {r.op} at {r.source or '?'} ×{r.calls}: {_ms(r.total_ms)} on the host, of which copies "
            f"{_ms(r.copy_ms)} ({fmt_bytes(r.bytes)} moved)"
        )
    if len(s.compiles):
        modeled = s.compiles.modeled_neuron_compile_s.dropna()
        both = fmt_compile(float(s.compiles.wall_s.sum()), float(modeled.sum()) if len(modeled) else None)
        out.append(f"Compile: {len(s.compiles)} graph(s) inside the window, {both}.")
    for r in s.top_lines.head(3).itertuples():
        out.append(
            f"Top line {r.source}: {_ms(r.device_ms)} device ({r.events} events)" + (f" — `{r.code}`" if r.code else "")
        )
    return out


def _ms(ms: float) -> str:
    """A figure the trace holds in milliseconds, written by the one formatter."""
    return fmt_s(ms / 1e3)
