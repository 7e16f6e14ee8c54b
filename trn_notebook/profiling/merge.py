"""Merge a profiling session into a Kineto (Chrome trace) JSON: the ``neuron:0 (modeled)`` process.

Lanes (threads of the modeled process): host dispatch, eager device ops, compiled graphs, kernels
inside graphs, transfers, syncs, fallbacks, compile; an ``HBM`` counter track; flow arrows from the
host op that issued each event. Device events follow Kineto's device-event schema (stream, correlation
with their modeled launch, ``ac2g`` flows, ``deviceProperties``, ``distributedInfo``; :mod:`.kineto`),
so HolisticTraceAnalysis and TensorBoard find the device work. Times in the modeled process are the simulator's *modeled* clocks,
anchored at the wall time the recording started (the CPU process keeps Kineto's wall time), plus the
wall seconds of graphs compiled inside the window (a real host would stall the device that long).
"""

from __future__ import annotations

import bisect
import json
import re
from array import array
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from ..device.source_lines import SourceLine
from ..device.trace.lanes import LANES, lane, thread_names
from . import kineto
from .kineto import CAT_GRAPH, CAT_KERNEL, CAT_MEMCPY, STREAM_COMM, STREAM_COMPUTE, STREAM_DMA, TRACE_SEPARATORS
from .link import link, simulator_kernels
from .recorder import Session

SCHEMA = "trn-notebook-profile/1"
PID = 2_000_000
SIM_KERNEL_CAT = "neuron_sim_kernel"
FLOW_BASE = 1 << 40  # above Kineto's own flow ids
SIM_NOTE = "CPU kernel the neuron simulator ran inside its parent op: its time is already in the parent, do not add it"
_HOST_ARGS = ("External id", "Sequence number", "Input Dims")


class HostOp(NamedTuple):
    """What the merge reads of one of Kineto's ``cpu_op`` events (kept small: a trace has millions)."""

    name: str
    ts: float
    dur: float
    pid: Any
    tid: Any
    args: dict[str, Any] | None  # only External id, Sequence number and Input Dims

    @classmethod
    def of(cls, e: dict[str, Any]) -> HostOp:
        """The fields of Kineto event ``e`` the merge uses."""
        a = e.get("args") or {}
        kept = {k: a[k] for k in _HOST_ARGS if k in a} or None
        return cls(
            str(e.get("name", "")), float(e["ts"]), float(e.get("dur", 0.0)), e.get("pid", 0), e.get("tid", 0), kept
        )


def _is_cpu_op(e: Any) -> bool:
    return isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == "cpu_op" and "ts" in e


def _plan(
    session: Session, hosts: list[HostOp], base_ns: int, device_lanes: bool
) -> tuple[list[int], dict[str, Any], Iterator[dict[str, Any]]]:
    """``(cpu ops to label as the simulator's kernels, the trace's trnNotebook metadata, the modeled events)``:
    the merge, whatever holds the trace (a dict, or a file streamed through :func:`merge_stream`)."""
    recs = session.records
    spans = [(h.ts, h.ts + h.dur, int(h.tid or 0)) for h in hosts]
    offset = session.wall_offset_ns - base_ns
    owner, parent = link(spans, [((r.wall_ns + offset) / 1000.0, r.thread) for r in recs])
    meta: dict[str, Any] = {
        "schema": SCHEMA,
        "clock": "modeled (simulated Trainium; not measured hardware)",
        "chip": session.chip,
        "records": len(recs),
        "dropped_records": session.dropped,
        "device_lanes": device_lanes,
        "partial": session.raised or "",
        "categories": {SIM_KERNEL_CAT: SIM_NOTE},
    }
    if not device_lanes:
        return simulator_kernels(parent, owner), meta, iter(())
    owners = [hosts[o] if o >= 0 else None for o in owner]
    backward = _backward_sources(session, hosts, owner, parent)
    events = _modeled_events(session, owners, _wall_to_us(session, base_ns), backward)
    return simulator_kernels(parent, owner), meta, events


def _label(e: dict[str, Any]) -> dict[str, Any]:
    e["name"] = f"[neuron sim] {e.get('name', '')}"
    e["cat"] = SIM_KERNEL_CAT
    return e


def merge_trace(trace: dict[str, Any], session: Session, device_lanes: bool = True) -> dict[str, Any]:
    """Add the session's lanes, flows and counters to a Kineto trace dict (modified and returned).

    Also labels the simulator's inner CPU kernels (category ``neuron_sim_kernel``, explained once in the
    trace's ``trnNotebook.categories``). Raises ``ValueError`` if ``trace`` is not a Chrome trace object (no
    ``traceEvents`` list).
    """
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        raise ValueError("not a Chrome trace: no 'traceEvents' list")
    cpu_idx = [i for i, e in enumerate(events) if _is_cpu_op(e)]
    sim, meta, modeled = _plan(
        session, [HostOp.of(events[i]) for i in cpu_idx], int(trace.get("baseTimeNanoseconds", 0) or 0), device_lanes
    )
    for k in sim:
        _label(events[cpu_idx[k]])
    trace["trnNotebook"] = meta
    if device_lanes:
        kineto.add_metadata(trace, session.chip)
        events.extend(modeled)
    return trace


_GAP = re.compile(r"[\s,]*")
_BATCH = 1 << 20


def _expect(text: str, i: int, char: str) -> int:
    i = _GAP.match(text, i).end()  # type: ignore[union-attr]
    if text[i : i + 1] != char:
        raise ValueError(f"not a Chrome trace: expected {char!r} at character {i}")
    return i + 1


def _scan(text: str, seen: Callable[[int, dict[str, Any]], None]) -> tuple[dict[str, Any], array[int], array[int]]:
    """The top-level members other than ``traceEvents`` (parsed), and where each of its events starts and ends
    in ``text``; each event is parsed once, handed to ``seen(index, event)`` and dropped (only offsets are kept)."""
    decode = json.JSONDecoder().raw_decode
    others: dict[str, Any] = {}
    starts, ends = array("q"), array("q")
    found = False
    i = _expect(text, 0, "{")
    while True:
        i = _GAP.match(text, i).end()  # type: ignore[union-attr]
        if text[i : i + 1] == "}":
            break
        key, i = decode(text, i)
        i = _expect(text, i, ":")
        i = _GAP.match(text, i).end()  # type: ignore[union-attr]
        if key != "traceEvents":
            others[key], i = decode(text, i)
            continue
        found = True
        i = _expect(text, i, "[")
        while True:
            i = _GAP.match(text, i).end()  # type: ignore[union-attr]
            if text[i : i + 1] == "]":
                i += 1
                break
            starts.append(i)
            event, i = decode(text, i)
            seen(len(ends), event)
            ends.append(i)
    if not found:
        raise ValueError("not a Chrome trace: no 'traceEvents' list")
    return others, starts, ends


def merge_stream(text: str, session: Session, device_lanes: bool = True) -> Iterator[bytes]:
    """The merged trace of Kineto JSON ``text``, as UTF-8 chunks (what :func:`merge_trace` makes of the parsed
    file), without building the trace as Python objects: Kineto's events are copied as text, except the ones
    relabelled; only the ``cpu_op`` events' few fields the merge reads are kept. Raises ``ValueError`` when
    ``text`` is not a Chrome trace object (``json.JSONDecodeError`` for malformed JSON)."""
    decode = json.JSONDecoder().raw_decode
    hosts: list[HostOp] = []
    cpu_at: list[int] = []
    names: dict[str, str] = {}  # one string per distinct op name

    def seen(k: int, e: dict[str, Any]) -> None:
        if _is_cpu_op(e):
            h = HostOp.of(e)
            hosts.append(h._replace(name=names.setdefault(h.name, h.name)))
            cpu_at.append(k)

    others, starts, ends = _scan(text, seen)
    sim, meta, modeled = _plan(session, hosts, int(others.get("baseTimeNanoseconds", 0) or 0), device_lanes)
    relabel = {cpu_at[k] for k in sim}
    cpu_at.clear()
    others["trnNotebook"] = meta
    if device_lanes:
        kineto.add_metadata(others, session.chip)

    def pieces() -> Iterator[str]:
        yield "{"
        for key, value in others.items():
            yield f"{json.dumps(key)}:{json.dumps(value, separators=TRACE_SEPARATORS)},"
        yield '"traceEvents":['
        for k in range(len(starts)):
            if k:
                yield ","
            if k in relabel:
                yield json.dumps(_label(decode(text, starts[k])[0]), separators=TRACE_SEPARATORS)
            else:
                yield text[starts[k] : ends[k]]
        first = not starts
        for e in modeled:
            yield (
                json.dumps(e, separators=TRACE_SEPARATORS)
                if first
                else "," + json.dumps(e, separators=TRACE_SEPARATORS)
            )
            first = False
        yield "]}"

    batch: list[str] = []
    size = 0
    for piece in pieces():
        batch.append(piece)
        size += len(piece)
        if size >= _BATCH:
            yield "".join(batch).encode("utf-8")
            batch, size = [], 0
    yield "".join(batch).encode("utf-8")


def _backward_sources(
    session: Session, hosts: list[HostOp], owner: list[int], parent: list[int]
) -> dict[int, tuple[SourceLine, str]]:
    """Records run by the autograd engine (no user frame) → the forward op's source line, via sequence numbers."""

    def args(i: int) -> dict[str, Any]:
        return hosts[i].args or {}

    seq_frame: dict[Any, SourceLine] = {}
    for r, o in zip(session.records, owner):
        i = o
        while r.event.source is not None and i >= 0:
            a = args(i)
            if "Sequence number" in a:
                seq_frame.setdefault(a["Sequence number"], r.event.source)
                break
            i = parent[i]
    out: dict[int, tuple[SourceLine, str]] = {}
    for k, (r, o) in enumerate(zip(session.records, owner)):
        i = o
        while r.event.source is None and i >= 0:
            name = hosts[i].name
            if name.startswith("autograd::engine::evaluate_function: "):
                frame = seq_frame.get(args(i).get("Sequence number"))
                if frame is not None:
                    out[k] = (frame, name.rsplit(" ", 1)[-1])
                break
            i = parent[i]
    return out


def _wall_to_us(session: Session, base_ns: int) -> Any:
    offset = session.wall_offset_ns - base_ns

    def to_us(perf_ns: int) -> float:
        return (perf_ns + offset) / 1000.0

    return to_us


def _modeled_events(
    session: Session, hosts: list[HostOp | None], to_us: Any, backward: dict[int, tuple[SourceLine, str]]
) -> Iterator[dict[str, Any]]:
    """The ``neuron:0 (modeled)`` process: metadata, lanes, flows and the HBM counter (made as they are read)."""
    yield {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "neuron:0 (modeled)"}}
    yield {"ph": "M", "name": "process_labels", "pid": PID, "tid": 0, "args": {"labels": "simulated Trainium"}}
    yield {"ph": "M", "name": "process_sort_index", "pid": PID, "tid": 0, "args": {"sort_index": -1}}
    yield from thread_names(PID)
    for ln in LANES:
        yield {"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": ln.tid, "args": {"sort_index": ln.tid}}
    anchor = to_us(session.start_perf_ns)
    m0 = session.model_start_s
    compiles = sorted(session.compiles)
    starts = [c[0] for c in compiles]
    cum = [0.0]
    for c in compiles:
        cum.append(cum[-1] + c[1])
    # compile stalls: placed at the modeled host time of the first record after they started
    rec_walls = [r.wall_ns for r in session.records]
    for (t_perf, secs, graph, cache, modeled), before in zip(compiles, cum):
        j = bisect.bisect_left(rec_walls, t_perf)
        host = (
            session.records[j].event.host_s - session.records[j].event.duration_s
            if j < len(rec_walls)
            else _last_host(session)
        )
        ts = anchor + (host - m0 + before) * 1e6
        facts = {"graph": graph, "cache": cache, "wall_s": secs, "modeled_neuron_compile_s": modeled}
        yield _x("compile", f"compile {graph}", ts, secs * 1e6, facts)
    prev_host = m0
    run_start = None
    run_n = 0
    last_alloc = -1
    flow_id = FLOW_BASE
    corr = kineto.CORRELATION_BASE
    k = 0
    for n, (r, host_op) in enumerate(zip(session.records, hosts)):
        while k < len(starts) and starts[k] <= r.wall_ns:
            k += 1
        shift = cum[k] * 1e6
        kind = r.event.kind
        name = r.event.name
        start = anchor + (r.event.start_s - m0) * 1e6 + shift
        dur = r.event.duration_s * 1e6
        detail = r.detail
        src = r.event.source
        args: dict[str, Any] = {"source": str(src), "code": src.code} if src is not None else {}
        if src is None and n in backward:
            fwd, node = backward[n]
            args = {"source": f"{fwd} (backward)", "code": fwd.code, "autograd_node": node}
        if host_op is not None:
            args["host_op"] = host_op.name
            hargs = host_op.args or {}
            if "Input Dims" in hargs:
                args["shapes"] = hargs["Input Dims"]
            args["wall_us"] = host_op.dur
        host_now = anchor + (r.event.host_s - m0) * 1e6 + shift
        ext = (host_op.args or {}).get("External id") if host_op is not None else None
        launch: dict[str, Any] | None = None
        target: dict[str, Any] | None = None
        if kind in ("op", "graph"):
            launch_ts = anchor + (prev_host - m0) * 1e6 + shift
            if run_start is None:
                run_start = launch_ts
            run_n += 1
            corr += 1
            args["op"] = name if kind == "graph" else f"aten::{name}"
            args["modeled_us"] = dur
            launch = kineto.runtime_event(f"launch {args['op']}", launch_ts, host_now - launch_ts, lane("host").tid,
                                          PID, corr, ext, {"modeled_us": host_now - launch_ts})  # fmt: skip
            yield launch
            kernels = []
            if kind == "graph" and detail is not None:
                kernels = _graph_kernels(detail, start, args.get("source", ""), args.get("code", ""))
                args["has_kernels"] = bool(kernels)
            if kernels:  # the graph is a device-side range around its kernels, which share its launch
                ev = _x(kind, args["op"], start, dur, args, CAT_GRAPH)
                for kn in kernels:
                    kineto.device_args(kn["args"], STREAM_COMPUTE, corr, ext)
                target = kernels[0]
            else:
                ev = _x(kind, args["op"], start, dur, kineto.device_args(args, STREAM_COMPUTE, corr, ext), CAT_KERNEL)
                target = ev
            yield ev
            yield from kernels
        else:
            if run_start is not None:
                yield _host_run(run_start, start, run_n)
                run_start, run_n = None, 0
            if kind == "sync":
                args["reason"] = name
                args["wait_us"] = dur
                if dur > 0:
                    yield _x("sync", f"wait: {name}", start, dur, args)
                    yield _x("host", f"wait: {name}", start, dur, {"reason": name, "modeled_us": dur})
                yield ({"ph": "i", "s": "t", "name": f"sync: {name}", "cat": "sync", "ts": host_now, "pid": PID,
                            "tid": lane("sync").tid, "args": args})  # fmt: skip
                ev = None
            elif kind == "comm":  # a collective on the communication queue (its launch is inside the c10d op)
                d = detail if isinstance(detail, dict) else {}
                args.update({"op": name, "modeled_us": dur, "blocking": bool(d.get("blocking"))})
                corr += 1
                ev = _x("comm", f"collective {name}", start, dur, kineto.device_args(args, STREAM_COMM, corr, ext),
                        CAT_KERNEL)  # fmt: skip
                yield ev
            else:
                d = detail if isinstance(detail, dict) else {}
                where = "fallback" if d.get("fallback") else "transfer" if d.get("transfer") else "host"
                args.update({k2: v for k2, v in d.items() if k2 in ("h2d", "d2h")})
                args["bytes"] = int(d.get("h2d", 0)) + int(d.get("d2h", 0))
                args["modeled_us"] = dur
                if where == "fallback":
                    args["op"] = f"aten::{name}"
                    args["copy_us"] = float(d.get("copy_s", 0.0)) * 1e6
                    args["fallback"] = True
                    label = f"fallback aten::{name}"
                else:
                    args["op"] = name
                    label = f"{'H2D' if d.get('h2d') else 'D2H'} {args['bytes']} B" if where == "transfer" else name
                if where == "transfer":  # Kineto's memcpy naming, which HTA's memory-kernel rule matches
                    corr += 1
                    kname = "Memcpy HtoD (host -> neuron)" if d.get("h2d") else "Memcpy DtoH (neuron -> host)"
                    ev = _x(where, kname, start, dur, kineto.device_args(args, STREAM_DMA, corr, ext), CAT_MEMCPY)
                    launch = kineto.runtime_event(label, start, dur, lane("host").tid, PID, corr, ext,
                                                  {"op": args["op"], "modeled_us": dur})  # fmt: skip
                    yield from (ev, launch)
                    target = ev
                else:
                    ev = _x(where, label, start, dur, args)
                    yield ev
                    yield _x("host", label, start, dur, {"op": args["op"], "modeled_us": dur})
        if launch is not None and target is not None:
            yield from kineto.flow(launch["args"]["correlation"], launch, target)
        if ev is not None and host_op is not None:
            flow_id += 1
            yield {"ph": "s", "id": flow_id, "name": "neuron launch", "cat": "neuron_flow", "ts": host_op.ts,
                   "pid": host_op.pid, "tid": host_op.tid}  # fmt: skip
            yield {"ph": "f", "bp": "e", "id": flow_id, "name": "neuron launch", "cat": "neuron_flow",
                   "ts": ev["ts"], "pid": PID, "tid": ev["tid"]}  # fmt: skip
        if r.allocated != last_alloc:
            last_alloc = r.allocated
            yield {"ph": "C", "name": "HBM", "pid": PID, "tid": 0, "ts": host_now,
                   "args": {"allocated": r.allocated, "reserved": r.reserved}}  # fmt: skip
        prev_host = r.event.host_s
    if run_start is not None:
        yield _host_run(run_start, anchor + (prev_host - m0) * 1e6 + (cum[-1] * 1e6), run_n)


def _last_host(session: Session) -> float:
    return session.records[-1].event.host_s if session.records else session.model_start_s


def _x(lane_key: str, name: str, ts: float, dur: float, args: dict[str, Any], cat: str = "") -> dict[str, Any]:
    return {"ph": "X", "name": name, "cat": cat or lane_key, "ts": ts, "dur": dur, "pid": PID, "tid": lane(lane_key).tid,
            "args": args}  # fmt: skip


def _host_run(start: float, end: float, n: int) -> dict[str, Any]:
    return _x("host", f"dispatch ({n} launches)", start, max(0.0, end - start), {"launches": n})


def _graph_kernels(exe: Any, start_us: float, source: str, code: str = "") -> list[dict[str, Any]]:
    """One slice per kernel of a compiled graph's schedule, with its IR nodes and their user lines."""
    schedule = getattr(exe, "schedule", None)
    graph = getattr(exe, "graph", None)
    if schedule is None or graph is None:
        return []
    nodes_by_kernel: dict[int, list[Any]] = {}
    for n in graph.nodes:
        nodes_by_kernel.setdefault(n.kernel if n.kernel is not None else -1, []).append(n)
    kernels = schedule.kernels
    t = start_us + max(0.0, schedule.device_s - sum(kn.device_s for kn in kernels)) * 1e6  # launch overhead first
    out = []
    for kn in kernels:
        if kn.device_s <= 0:
            continue
        members = nodes_by_kernel.get(kn.index, [])
        found = {n.source for n in members if n.source is not None}
        lines = sorted(str(s) for s in found)
        codes = {str(s): s.code for s in found}
        nodes = [f"{', '.join(o for o in n.outs if o)} = {n.op}" for n in members][:12]
        # nodes traced inside library code (an nn.Module's forward) have no user frame: use the call's line
        lines = lines or ([source] if source else [])
        args = {
            "op": f"kernel {kn.index}: {'+'.join(dict.fromkeys(kn.ops))}",
            "engine": kn.engine,
            "ir_nodes": nodes,
            "source": lines[0] if lines else "",
            "sources": lines,
            "code": (codes.get(lines[0]) or code) if lines else "",
            "modeled_us": kn.device_s * 1e6,
            "graph": getattr(exe, "launch_name", ""),
        }
        out.append(_x("kernel", args["op"], t, kn.device_s * 1e6, args, CAT_KERNEL))
        t += kn.device_s * 1e6
    return out
