"""The op registry: every fact about an op in one record (rules as data).

One :class:`OpRecord` per ATen base op (``"mm"``, ``"add_"``, ``"_softmax"``) holds

* ``category`` — where it runs on the device (TorchNeuron's compatibility table,
  shared/reference/torchneuron.md): ``native`` (a device kernel), ``cpu_fallback`` (copied to the
  host, run by the CPU kernel, copied back), ``unsupported`` (raises) or ``host_only`` (metadata/view
  ops that move no data); ``None`` derives it from the op's tags (pointwise and reductions are
  native, aliasing views are host-only, anything else falls back);
* ``reason`` — why it falls back or is unsupported (shown in warnings, errors and the policy table);
* ``dtypes`` — the "can it run here" checker's data: dtypes with a native kernel (other dtypes
  fall back, float64/complex128 are refused device-wide); memory formats are contiguous only;
* ``flops`` — its cost function ``(input shapes, output elements) -> FLOPs`` for matmul-class
  ops, read by the eager cost model and the compiler's schedule; ``None`` means "bandwidth-bound":
  the eager model charges the bytes and the compiler uses its IR kind's default;
* ``host_flops`` — its cost function on the host CPU when it falls back (sorts ``n log n``, linear
  algebra ``2·m·n·k``), read by the fallback cost model; ``None`` uses the device estimate;
* ``autocast`` — ``"lower"`` (runs in the autocast dtype) or ``"float32"`` under ``torch.autocast``;
* ``direct`` — overloads registered as direct PrivateUse1 kernels (hot ops skip the ``.out`` detour;
  some composite kernels round differently from the CPU's) instead of the boxed fallback;
* ``lower``/``kind``/``transcendental`` — the compiler IR op each overload lowers to, the IR op's
  kind (``view``, ``pointwise``, ``reduction``, ``matmul``, ``library``, ``copy``, ``factory``) and
  whether it runs on the ScalarE; ``random``/``reduces``/``i64_index``/``int_to_i64`` tell the passes how to
  treat it. The compiler builds its op set from these (``compiler/ops.py``);
* ``host_composite``/``upcast_int``/``decomposed`` — special eager handling (see the field comments);
* ``numerics``/``valid_range`` — how the op follows the Trainium precision policy
  (:meth:`OpRecord.numerics_class`: derived from the fields above unless set) and, for ScalarE
  activations, the documented input range outside which the hardware output is invalid.

The records are in :mod:`.op_table`; adding an op is one ``op(...)`` line there (or one
:meth:`OpRegistry.register` call at run time). :func:`set_op_category` overrides a category.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import torch

from ... import locks as _locks

if TYPE_CHECKING:
    import pandas as pd

Category = Literal["native", "cpu_fallback", "unsupported", "host_only"]
CATEGORIES: tuple[Category, ...] = ("native", "cpu_fallback", "unsupported", "host_only")
AWS_CLASSES: dict[str, str] = {
    "native": "Y: Native",
    "custom_kernel": "Y: Native",  # an NKI kernel (nki_op) runs on the device
    "host_only": "Y: Host-only",
    "cpu_fallback": "CPU_FALLBACK",
    "unsupported": "N",
}
"""Our categories in the words of the op classes AWS publishes per TorchNeuron release (``Y`` Native /
Host-only / Needs a process group, ``CPU_FALLBACK`` naming the dtypes, ``N``; torchneuron.md, "What changed in
SDK 2.34"), so a table here can be held against ``docs/torch_api_compatibility.md`` of a torch-neuronx release."""
PROCESS_GROUP_NAMESPACES = ("c10d", "_c10d_functional", "c10d_functional")


def aws_class(op: str, category: str, always_falls_back: bool = True) -> str:
    """The published class of ``op`` placed in ``category``: a collective "Y: Needs a process group"; a CPU
    fallback "CPU_FALLBACK (all dtypes)", or "(dtypes outside its native set)" when only some dtypes fall back
    (``always_falls_back`` False: the op's record is native)."""
    if op.split("::", 1)[0] in PROCESS_GROUP_NAMESPACES and "::" in op:
        return "Y: Needs a process group"
    cls = AWS_CLASSES.get(category, "N")
    if category == "cpu_fallback":
        cls += " (all dtypes)" if always_falls_back else " (dtypes outside its native set)"
    return cls


AutocastClass = Literal["lower", "float32"]
# How an op follows the numerics policy (device/numerics/calls.py): TensorE matmul-class, VectorE/ScalarE
# elementwise, reductions, ScalarE activations with a documented valid range, scatter-with-compute
# (elementwise for floats; integers through FP32, no integer datapath: aws-neuron-sdk EVRF060), integer-only
# ops, data movement (no arithmetic) and ops computed by the host CPU (fallbacks: CPU numerics on hardware too).
NumericsClass = Literal["matmul", "elementwise", "reduction", "activation", "scatter", "integer", "movement", "host"]
NUMERICS_CLASSES: tuple[NumericsClass, ...] = (
    "matmul", "elementwise", "reduction", "activation", "scatter", "integer", "movement", "host",
)  # fmt: skip
IR_KINDS = ("view", "pointwise", "reduction", "matmul", "library", "copy", "factory", "host")  # host: a host call

# Native dtypes of the device kernels; 64-bit integers are accepted (indices) and modeled as 32-bit.
NATIVE_DTYPES = frozenset(
    {
        torch.float32,
        torch.bfloat16,
        torch.float16,
        torch.int32,
        torch.int64,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
        torch.float8_e4m3fn,
        torch.float8_e5m2,
    }
)
# Refused device-wide (no 64-bit floating point on the device) unless TRN_NOTEBOOK_ALLOW_FLOAT64=1.
REJECTED_DTYPES = frozenset({torch.float64, torch.complex128})
# The only memory formats the device stores (TorchNeuron rejects channels_last too).
NATIVE_MEMORY_FORMATS = frozenset({torch.contiguous_format, torch.preserve_format})


def memory_format_error(memory_format: object, op: str = "") -> RuntimeError:
    """The one refusal of a non-contiguous memory format (eager kernels, the fallback, the compiler).

    TorchNeuron documents that only contiguous (or preserve) formats exist and ``channels_last`` is rejected;
    the simulator refuses the same requests, so a program that runs here does not fail on hardware."""
    where = f" (aten::{op})" if op else ""
    return RuntimeError(
        f"neuron supports only contiguous memory format, got {memory_format}{where}: TorchNeuron rejects "
        "channels_last (its documented limitation). Drop memory_format=torch.channels_last (or use "
        ".contiguous()); values do not change, and a channels_last CPU tensor moved with .to('neuron') is "
        "stored contiguous already"
    )


NO_KERNEL = "no native kernel in the simulated op set"

Shapes = Sequence[Sequence[int]]
FlopsFn = Callable[[Shapes, int], float]


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def matmul_flops(ins: Shapes, out_numel: int) -> float:
    """2·M·N·K: output elements times the contracted dimension of the first of the last two matrices."""
    mats = [s for s in ins if len(s) >= 2]
    k = mats[-2][-1] if len(mats) >= 2 else (mats[0][-1] if mats else 1)
    return 2.0 * out_numel * k


def grouped_mm_flops(ins: Shapes, out_numel: int) -> float:
    """``_grouped_mm``: 2·M·N·K summed over the groups, which is the same whatever the offsets split (routing).

    2-D x 2-D (a weight gradient: groups split the contracted dimension, the output stacks them) is 2·M·N·K of
    the whole; otherwise (2-D x 3-D, 3-D x 2-D, 3-D x 3-D) output elements times the contracted dimension."""
    a, b = ins[0], ins[1]
    if len(a) == 2 and len(b) == 2:
        return 2.0 * a[0] * a[1] * b[1]
    return 2.0 * out_numel * a[-1]


def conv_flops(ins: Shapes, out_numel: int) -> float:
    """2 · output elements · (weight elements per output channel); weight is the second input."""
    if len(ins) < 2:
        return 2.0 * out_numel
    w = ins[1]
    return 2.0 * out_numel * (_numel(w) // max(w[0], 1))


def conv_backward_flops(ins: Shapes, out_numel: int) -> float:
    """Input and weight gradients: 4 · grad_output elements · (weight elements per output channel)."""
    if len(ins) < 3:
        return 2.0 * out_numel
    w = ins[2]
    return 4.0 * _numel(ins[0]) * (_numel(w) // max(w[0], 1))


def sdpa_flops(ins: Shapes, out_numel: int) -> float:
    """QKᵀ and PV: 4 · |q| · keys (query, key, value are the first three inputs)."""
    if len(ins) < 3:
        return 2.0 * out_numel
    return 4.0 * _numel(ins[0]) * ins[1][-2]


def sort_flops(ins: Shapes, out_numel: int) -> float:
    """Host cost of sorts, selections and ``unique``: n·log2(n) over the largest input's last dimension."""
    if not ins:
        return 0.0
    big = max(ins, key=_numel)
    total = _numel(big)
    if total == 0:
        return 0.0
    n = big[-1] if len(big) else 1
    return float(total) * max(1.0, math.log2(max(n, 2)))


def cubic_flops(ins: Shapes, out_numel: int) -> float:
    """Host cost of factorizations, solves and inverses: 2·batch·m·n·min(m, n) of the first matrix input
    (no matrix input: one FLOP per element of the larger side)."""
    for s in ins:
        if len(s) >= 2:
            m, n = s[-2], s[-1]
            batch = _numel(s) // max(m * n, 1)
            return 2.0 * batch * m * n * min(m, n)
    return float(max(out_numel, sum(_numel(s) for s in ins)))


def sdpa_backward_flops(ins: Shapes, out_numel: int) -> float:
    """Twice the forward: 8 · |q| · keys (grad_out, query, key, value first)."""
    if len(ins) < 4:
        return 2.0 * out_numel
    return 8.0 * _numel(ins[1]) * ins[2][-2]


@dataclass(frozen=True, slots=True)
class ValidRange:
    """A ScalarE activation's documented valid input range ``[lo, hi]`` (``magnitude``: of ``|x|``, either sign)."""

    lo: float
    hi: float
    text: str  # as documented, e.g. "[2^-87, 2^97]"
    magnitude: bool = False


@dataclass(frozen=True, slots=True)
class OpRecord:
    """Everything the device, the cost model, autocast and the compiler know about one op."""

    name: str
    category: Category | None = None
    reason: str = ""
    dtypes: frozenset[torch.dtype] = NATIVE_DTYPES
    flops: FlopsFn | None = None
    host_flops: FlopsFn | None = (
        None  # FLOPs on the host CPU when it runs as a CPU fallback (None: ``flops``'s estimate)
    )
    autocast: AutocastClass | None = None
    autocast_overload: str = ""  # "" = every overload
    direct: tuple[str, ...] = ()
    lower: tuple[tuple[str, str], ...] = ()  # (overload or "*" for every tensor overload, IR op name)
    kind: str | None = None  # set on the record that defines the IR op(s) it lowers to
    transcendental: bool = False
    random: bool = False  # IR op with random or uninitialised output: never merged by CSE
    reduces: bool = False  # library IR op that reduces: a pointwise chain may fuse into it
    i64_index: bool = False  # IR op whose index inputs stay 64-bit through dtype legalisation
    int_to_i64: bool = False  # IR op whose integer inputs give int64 unless dtype= says otherwise (sum, cumsum)
    host_composite: bool = False  # runs on the host as a whole, below autograd (its decomposition would not)
    upcast_int: bool = False  # no CPU kernel for integer inputs: computed in float32 and cast back (as CUDA)
    decomposed: bool = False  # no CPU kernel at all: its decomposition runs on the device (accelerator_ops)
    numerics: NumericsClass | None = None  # None: derived by numerics_class()
    valid_range: ValidRange | None = None  # ScalarE activation: documented valid input range
    ns: str = "aten"

    def numerics_class(self, op: torch._ops.OpOverload | None = None) -> NumericsClass:
        """How this op follows the numerics policy, derived from what the record knows (and ``op``'s tags).

        Set ``numerics=`` on the record only where the derivation is wrong."""
        if self.numerics is not None:
            return self.numerics
        if self.category == "cpu_fallback":
            return "host"
        if self.flops is not None or self.kind == "matmul" or self.autocast == "lower":
            return "matmul"
        if self.valid_range is not None:
            return "activation"
        tags = op.tags if op is not None else ()
        if self.kind == "reduction" or self.reduces or torch.Tag.reduction in tags:
            return "reduction"
        if self.category == "host_only" or self.kind in ("view", "copy", "factory"):
            return "movement"
        if self.name.startswith(("bitwise_", "__and__", "__or__", "__xor__", "__lshift__", "__rshift__")):
            return "integer"
        return "elementwise"

    @property
    def key(self) -> str:
        """Registry key: the base name for ATen ops, ``ns::name`` otherwise."""
        return self.name if self.ns == "aten" else f"{self.ns}::{self.name}"

    def can_run(self, dtype: torch.dtype | None, memory_format: torch.memory_format | None = None) -> str | None:
        """Why this op cannot run natively for ``dtype``/``memory_format`` on the device, or ``None``."""
        if memory_format is not None and memory_format not in NATIVE_MEMORY_FORMATS:
            return f"the device stores only contiguous tensors, not {memory_format}"
        if dtype is not None and dtype not in self.dtypes:
            return f"aten::{self.name} has no native kernel for {dtype}"
        return None


def op(
    name: str,
    category: Category | None = None,
    reason: str = "",
    *,
    ir: str | Mapping[str, str] | None = None,
    over: str | tuple[str, ...] = "default",
    trans: bool = False,
    **facts: object,
) -> OpRecord:
    """Table shorthand: ``ir="add", over="*"`` lowers every tensor overload to IR op ``add``;
    ``ir={"dim": "max_dim", "default": "max"}`` maps overloads to IR ops one by one; ``trans`` marks a
    transcendental (ScalarE) IR op."""
    if isinstance(ir, str):
        overloads = (over,) if isinstance(over, str) else over
        lower = tuple((o, ir) for o in overloads)
    elif ir is not None:
        lower = tuple(ir.items())
    else:
        lower = ()
    if category is not None and category not in CATEGORIES:
        raise ValueError(f"{name}: unknown category {category!r}; valid: {', '.join(CATEGORIES)}")
    if isinstance(facts.get("valid_range"), tuple):  # (lo, hi, text[, magnitude]) in the table
        facts["valid_range"] = ValidRange(*facts["valid_range"])  # type: ignore[misc]
    return OpRecord(name, category, reason, lower=lower, transcendental=trans, **facts)  # type: ignore[arg-type]


def base_name(name: str) -> str:
    """``"aten::add.Tensor"`` -> ``"add"``."""
    return name.removeprefix("aten::").split(".", 1)[0]


class OpRegistry:
    """Records by key plus user category overrides; thread-safe. ``version`` bumps on every change."""

    def __init__(self, records: Sequence[OpRecord] = ()) -> None:
        self._lock = _locks.make("leaf", "op registry")
        self._records: dict[str, OpRecord] = {}
        self._overrides: dict[str, OpRecord] = {}
        self.version = 0
        for r in records:
            self._add(r)

    def _add(self, record: OpRecord) -> None:
        if record.key in self._records:
            raise ValueError(f"op {record.key!r} is registered twice; edit its one record instead")
        if record.kind is not None and record.kind not in IR_KINDS:
            raise ValueError(f"{record.key}: unknown IR kind {record.kind!r}; valid: {', '.join(IR_KINDS)}")
        self._records[record.key] = record

    def register(self, record: OpRecord, *, replace: bool = False) -> None:
        """Add one op's record (``replace=True`` swaps an existing one); raises ``ValueError`` on a duplicate."""
        with self._lock:
            if replace:
                self._records.pop(record.key, None)
            self._add(record)
            self.version += 1

    def records(self) -> Iterator[OpRecord]:
        """Every built-in record (overrides not applied), in table order."""
        return iter(list(self._records.values()))

    def get(self, key: str) -> OpRecord | None:
        """The built-in record of ``key`` (``"mm"``, ``"prims::convert_element_type"``), or ``None``."""
        return self._records.get(key)

    def rule(self, name: str, op: torch._ops.OpOverload | None = None) -> OpRecord:
        """The effective record of base op ``name``: user override, else the table, with the category
        derived from ``op``'s tags when the table leaves it open. Always has a category."""
        override = self._overrides.get(name)
        if override is not None:
            return override
        record = self._records.get(name)
        if record is not None and record.category is not None:
            return record
        category, reason = self._derive(name, op)
        base = record if record is not None else OpRecord(name)
        return dataclasses.replace(base, category=category, reason=reason)

    def _derive(self, name: str, op: torch._ops.OpOverload | None) -> tuple[Category, str]:
        if op is not None:
            tags = op.tags
            if torch.Tag.pointwise in tags or torch.Tag.reduction in tags:
                return "native", ""
            returns = op._schema.returns
            if returns and all(r.alias_info is not None and not r.alias_info.is_write for r in returns):
                return "host_only", ""
        if name.startswith("_foreach_"):
            return "native", ""
        if name.endswith("_") and len(name) > 1:  # in-place variant: same rule as the functional op
            functional = self.rule(name[:-1])
            if functional.reason != NO_KERNEL:
                return functional.category or "cpu_fallback", functional.reason
        return "cpu_fallback", NO_KERNEL

    def set(self, name: str, category: Category, reason: str = "") -> None:
        """Override the category of base op ``name``; raises ``ValueError`` on an unknown category."""
        if category not in CATEGORIES:
            raise ValueError(f"unknown category {category!r}; valid: {', '.join(CATEGORIES)}")
        key = base_name(name)
        with self._lock:
            base = self._records.get(key) or OpRecord(key)
            self._overrides[key] = dataclasses.replace(
                base, category=category, reason=reason or f"set by user to {category}"
            )
            self.version += 1

    def clear(self, name: str | None = None) -> None:
        """Drop the override of ``name`` (or of every op)."""
        with self._lock:
            if name is None:
                self._overrides.clear()
            else:
                self._overrides.pop(base_name(name), None)
            self.version += 1

    def reset(self) -> None:
        """Drop every user override (the built-in table stays)."""
        self.clear()

    def snapshot(self) -> dict[str, OpRecord]:
        """The user overrides in force, by op."""
        with self._lock:
            return dict(self._overrides)

    def table(self) -> pd.DataFrame:
        """Ops with a fixed category plus overrides as a DataFrame (op, category, reason, source)."""
        import pandas as pd

        order = {"host_only": 0, "native": 1, "cpu_fallback": 2, "unsupported": 3}
        rows = sorted(
            (r.name, r.category, r.reason or ("metadata/view op" if r.category == "host_only" else ""), "built-in")
            for r in self._records.values()
            if r.category is not None and r.ns == "aten"
        )
        rows.sort(key=lambda row: order[row[1]])
        df = pd.DataFrame(rows, columns=["op", "category", "reason", "source"]).set_index("op")
        for name, rule in self._overrides.items():
            df.loc[name] = [rule.category, rule.reason, "override"]
        df["class"] = [aws_class(str(op), str(category)) for op, category in zip(df.index, df["category"], strict=True)]
        return df
