"""The schedule of a planned graph: its kernels, the engine each runs on, and their modeled cost.

HBM traffic is charged only at kernel boundaries (what a fused kernel reads from other kernels or
the graph's inputs, and what it writes for them), FLOPs per node; each kernel costs a roofline
(the larger of its nodes' compute, each node's FLOPs at its own dtype's peak as eager charges it, and
its boundary bytes at the HBM rate) plus the in-graph dispatch constant, and the graph one launch.
(A bf16 matmul fused with the f32 pointwise ops after it, RMSNorm's upcast, runs at the bf16 peak,
not at the f32 peak of the kernel's last op.) The same graph run op by op in
eager would pay a launch and a full round trip to HBM per op: that is ``eager_device_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..device import costmodel
from ..device.memory.runtime import get_chip
from ..display.format import fmt_bytes
from .ir import DTYPES, Graph, Node, TensorType
from .kernel_call import node_seconds
from .ops import OPS, engine_of


@dataclass(frozen=True)
class Kernel:
    """One fused kernel of the schedule."""

    index: int
    ops: tuple[str, ...]
    engine: str
    flops: float
    bytes_in: int
    bytes_out: int
    device_s: float


@dataclass(frozen=True)
class Schedule:
    """Kernels in launch order plus graph totals (modeled seconds and bytes)."""

    kernels: tuple[Kernel, ...]
    device_s: float
    eager_device_s: float
    peak_bytes: int
    fused_kernels: int

    def text(self) -> str:
        """A readable table of the schedule."""
        lines = [f"{'kernel':<8}{'engine':<9}{'in':>10}{'out':>10}{'modeled':>12}  ops"]
        for k in self.kernels:
            if k.engine == "none":
                continue
            ops = ", ".join(k.ops) if len(k.ops) <= 8 else ", ".join(k.ops[:7]) + f", … ({len(k.ops)} ops)"
            modeled = "  on host" if k.engine == "host" else f"{k.device_s * 1e6:>10.1f}µs"
            lines.append(
                f"k{k.index:<7}{k.engine:<9}{fmt_bytes(k.bytes_in):>10}{fmt_bytes(k.bytes_out):>10}{modeled:>12}  {ops}"
            )
        lines.append(
            f"total: {len([k for k in self.kernels if k.engine != 'none'])} kernels ({self.fused_kernels} fused), "
            f"modeled device {self.device_s * 1e6:.1f} µs (op-by-op eager: {self.eager_device_s * 1e6:.1f} µs), "
            f"arena peak {fmt_bytes(self.peak_bytes)}"
        )
        return "\n".join(lines)


def node_flops(n: Node, types: dict[str, TensorType | None]) -> float:
    """Approximate FLOPs of one IR node from its static types: its record's cost function, else a
    default by kind (pointwise/reductions one op per element, four if transcendental)."""
    op = OPS[n.op]
    outs = sum(t.numel for t in n.types if t is not None)
    arg_types = [t for t in (types.get(r) for r in n.refs()) if t is not None]
    if op.kind == "view":
        return 0.0
    if op.flops is not None:  # the op record's cost function, shared with the eager cost model
        return op.flops([t.shape for t in arg_types], outs)
    if op.kind == "matmul":
        return 2.0 * outs
    ins = sum(t.numel for t in arg_types)
    if op.kind == "reduction":
        return float(ins) * (4.0 if op.transcendental else 1.0)
    if op.kind == "pointwise":
        return float(outs) * (4.0 if op.transcendental else 1.0)
    return float(ins + outs) if op.kind == "library" else 0.0


def build_schedule(g: Graph) -> Schedule:
    """Group the planned graph's nodes by kernel and model each kernel's device time."""
    chip = get_chip()
    consts = costmodel.get_cost_constants()
    types = g.types()
    base: dict[str, str] = {}
    produced_in: dict[str, int] = {}
    groups: dict[int, list[Node]] = {}
    eager = consts.graph_launch_s * 0
    for n in g.nodes:
        k = n.kernel if n.kernel is not None else -1
        groups.setdefault(k, []).append(n)
        refs = n.refs()
        if OPS[n.op].kind == "view" and refs:
            for o in n.outs:
                if o:
                    base[o] = base.get(refs[0], refs[0])
        for o in n.outs:
            if o:
                produced_in[o] = k
    kernels: list[Kernel] = []
    for k, members in groups.items():
        kinds = {OPS[n.op].kind for n in members}
        engine = engine_of(kinds, any(OPS[n.op].transcendental for n in members))
        flops = 0.0
        compute_s = 0.0  # each node's FLOPs at its own dtype's peak, as eager charges them
        read: dict[str, int] = {}
        written = 0
        for n in members:
            node_f = node_flops(n, types)
            flops += node_f
            compute_s += node_f / costmodel.roofline_rates(chip, DTYPES[_node_dtype(n, types)])[0] if node_f else 0.0
            for r in n.refs():
                b = base.get(r, r)
                if produced_in.get(b, -2) != k:
                    t = types.get(b)
                    read[b] = t.nbytes if t is not None else 0
            for t, m in zip(n.types, n.mem or (-1,) * len(n.outs)):
                if t is not None and m >= 0:
                    written += t.nbytes
            eager += _eager_node_s(n, types, base, chip, consts)
        nbytes_in = sum(read.values())
        if any(n.op == "kernel_call" for n in members):  # a custom tile kernel: its own modeled time
            engine = "NKI"
            device_s = consts.kernel_in_graph_s + sum(node_seconds(n, types) for n in members if n.op == "kernel_call")
        elif engine in ("none", "host"):  # a host call is charged as a CPU fallback when the graph runs
            device_s = 0.0
        else:
            memory_s = (nbytes_in + written) / costmodel.roofline_rates(chip, DTYPES[_node_dtype(members[0])])[1]
            device_s = consts.kernel_in_graph_s + max(compute_s, memory_s)
        kernels.append(Kernel(k, tuple(n.op for n in members), engine, flops, nbytes_in, written, device_s))
    total = consts.graph_launch_s + sum(k.device_s for k in kernels)
    fused = sum(1 for k in kernels if sum(1 for op in k.ops if OPS[op].kind != "view") >= 2)
    peak = int(dict(g.meta).get("arena_bytes", "0"))
    return Schedule(tuple(kernels), total, eager, peak, fused)


def _node_dtype(n: Node, types: dict[str, TensorType | None] | None = None) -> str:
    """The dtype a node's FLOPs run at, as eager charges it: a matmul's first operand's (the TensorE runs at its
    input precision: an FP8 ``scaled_mm`` at the FP8 rate whatever its output), else its first output's (``f32``
    when it has none)."""
    if types is not None and OPS[n.op].kind == "matmul" and n.refs():
        first = types.get(n.refs()[0])
        if first is not None:
            return first.dtype
    return n.types[0].dtype if n.types and n.types[0] is not None else "f32"


def _eager_node_s(n: Node, types: dict[str, TensorType | None], base: dict[str, str], chip, consts) -> float:
    if OPS[n.op].kind in ("view", "host"):  # a host call is no device time in eager either (a CPU fallback)
        return 0.0
    if n.op == "kernel_call":
        return consts.eager_launch_s + node_seconds(n, types)
    nbytes = sum(t.nbytes for t in n.types if t is not None)
    for r in n.refs():
        t = types.get(base.get(r, r))
        nbytes += t.nbytes if t is not None else 0
    return consts.eager_launch_s + costmodel.roofline_seconds(
        chip, node_flops(n, types), nbytes, DTYPES[_node_dtype(n, types)]
    )
