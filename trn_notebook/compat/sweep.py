"""The conformance sweep: PyTorch's OpInfo samples run on ``neuron`` and compared against CPU.

For each OpInfo entry (``torch.testing._internal.common_methods_invocations.op_db``) and each swept
dtype it supports on CPU (float32, bfloat16, int32, bool), every sample is built on the CPU, moved
with ``.to("neuron")`` (float64 tensors stay on the CPU: the device rejects float64 on purpose), run
on both devices and compared with ``torch.testing.assert_close`` at the dtype's tolerance (the
OpInfo's own tolerance overrides when they are looser). Backward (float32) runs where the OpInfo
supports autograd: gradients of every input are compared the same way. One op's failure never stops
the sweep; interpreter crashes are caught one level up, by :mod:`trn_notebook.compat.isolate`.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import torch

import trn_notebook  # noqa: F401  (registers the neuron device)
from trn_notebook.device import placement_log
from trn_notebook.device.placement import PlacementEntry

from .. import state as _state

SWEEP_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16, torch.int32, torch.bool)
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.int32: "int32", torch.bool: "bool"}
_CONFINED = (torch.float64, torch.complex128)  # stay on the CPU when samples are moved
QUICK_SAMPLES = 2
FLOAT64_REASON = "neuron does not support"  # the device's TypeError for float64/complex128 (by design)


@dataclass
class Tally:
    """Samples of one (op, dtype, direction): passed / total and the first failure."""

    passed: int = 0
    total: int = 0
    first_error: str = ""

    def add(self, error: str | None) -> None:
        """Count one sample; ``error`` is ``None`` when it passed."""
        self.total += 1
        if error is None:
            self.passed += 1
        elif not self.first_error:
            self.first_error = error


@dataclass
class OpResult:
    """Outcome of one OpInfo entry: per-dtype forward tallies, float32 backward, the aten ops it reached."""

    op: str
    aten_name: str
    forward: dict[str, Tally] = field(default_factory=dict)
    backward: Tally | None = None
    aten_ops: dict[str, str] = field(default_factory=dict)  # base op -> category seen in the placement log
    crashed: str = ""
    variants: dict[str, Tally] = field(default_factory=dict)  # float32 "noncontig", "out", "inplace", "print"

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (the worker protocol of :mod:`~trn_notebook.compat.isolate`)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OpResult:
        """Inverse of :meth:`to_json`."""
        fwd = {k: Tally(**v) for k, v in data["forward"].items()}
        bwd = Tally(**data["backward"]) if data.get("backward") else None
        variants = {k: Tally(**v) for k, v in data.get("variants", {}).items()}
        return cls(data["op"], data["aten_name"], fwd, bwd, dict(data["aten_ops"]), data.get("crashed", ""), variants)


def op_id(opinfo: Any) -> str:
    """Name of an OpInfo entry as used in tables: ``name`` or ``name.variant``."""
    return opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")


@functools.cache
def _op_db() -> dict[str, Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return {op_id(op): op for op in op_db}


def select_ops(pattern: str | None = None) -> list[str]:
    """OpInfo ids matching ``pattern`` (comma-separated globs, e.g. ``"add,nn.functional.*"``; all if None)."""
    names = list(_op_db())
    if not pattern:
        return names
    globs = [p.strip() for p in pattern.split(",") if p.strip()]
    return [n for n in names if any(fnmatch.fnmatchcase(n, g) for g in globs)]


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


class _Mover:
    """Moves a CPU sample to the device; counts what it moved (a sample that moves nothing is not a device test)."""

    def __init__(self, requires_grad: bool = False, keep_index_tensors: bool = False, devices: bool = True) -> None:
        self.requires_grad = requires_grad
        self.devices = devices  # False: device arguments stay "cpu" (float64 confined to the CPU)
        self.keep_index_tensors = keep_index_tensors  # e.g. tensor_split's indices must stay on the CPU
        self.moved = 0

    def __call__(self, x: Any, key: str | None = None) -> Any:
        if isinstance(x, torch.Tensor):
            return self._tensor(x)
        if isinstance(x, torch.device) and x.type == "cpu" and self.devices:
            self.moved += 1
            return torch.device("neuron", 0)
        if isinstance(x, str) and x == "cpu" and self.devices:  # the device argument of factories and .to()
            self.moved += 1
            return "neuron"
        if isinstance(x, list):
            return [self(v) for v in x]
        if isinstance(x, tuple):
            return tuple(self(v) for v in x)
        if isinstance(x, dict):
            return {k: self(v, k) for k, v in x.items()}
        return x

    def _tensor(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype in _CONFINED or x.device.type != "cpu" or x.layout != torch.strided:
            return x
        if self.keep_index_tensors and x.dtype == torch.int64:
            return x
        self.moved += 1
        x_ = x.detach()
        extent = x_.untyped_storage().nbytes() // max(x_.element_size(), 1)
        if x_.storage_offset() or (x_.numel() and extent > x_.numel()):
            # a view into a larger storage: move the whole storage so as_strided-style samples see the same bytes
            base = torch.empty(0, dtype=x_.dtype).set_(x_.untyped_storage(), 0, (extent,), (1,)).to("neuron")
            moved = base.as_strided(x_.shape, x_.stride(), x_.storage_offset()).detach()
        else:
            moved = x_.to("neuron")
        if self.requires_grad and x.requires_grad:
            moved.requires_grad_(True)
        return moved


_TRANSFERS = frozenset({"_copy_from", "_copy_from_and_resize", "_to_copy", "copy", "_local_scalar_dense"})
_KEEP_INDEX_TENSORS = frozenset({"tensor_split"})


def _move_sample(opinfo: Any, sample: Any, requires_grad: bool = False, devices: bool = True) -> tuple[Any, int]:
    mover = _Mover(requires_grad, opinfo.name in _KEEP_INDEX_TENSORS, devices)
    inp, args, kwargs = mover((sample.input, sample.args, sample.kwargs))
    moved = type(sample)(inp, args=args, kwargs=kwargs, output_process_fn_grad=sample.output_process_fn_grad)
    return moved, mover.moved


def _to_cpu(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, list | tuple):
        return type(x)(_to_cpu(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_cpu(v) for k, v in x.items()}
    return x


def _tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, list | tuple):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def _tolerance(opinfo: Any, dtype: torch.dtype) -> tuple[float, float] | tuple[None, None]:
    """(rtol, atol) from the OpInfo's tolerance overrides for ``dtype``; (None, None) = assert_close's defaults."""
    from torch.testing._internal.common_device_type import toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo

    found: tuple[float, float] | None = None
    for deco in opinfo.decorators:
        inner = deco.decorators if isinstance(deco, DecorateInfo) else [deco]
        for d in inner:
            if isinstance(d, toleranceOverride) and dtype in d.d:
                tol = d.d[dtype]
                found = (max(found[0], tol.rtol), max(found[1], tol.atol)) if found else (tol.rtol, tol.atol)
    return found if found else (None, None)


def _wrong_device(out: Any) -> str | None:
    for t in _tensors(out):
        if t.device.type != "neuron" and t.dim() > 0:
            return f"output on {t.device.type}, expected neuron"
    return None


def compare(
    actual: Any,
    expected: Any,
    rtol: float | None = None,
    atol: float | None = None,
    nondet: bool = False,
    check_device: bool = True,
) -> str | None:
    """None if ``actual`` (neuron results) matches ``expected`` (CPU results), else the reason.

    Tolerances default to ``torch.testing.assert_close``'s for each output's dtype; ``nondet`` compares only
    shapes and dtypes (ops whose values are undefined: ``empty``, random sampling).
    """
    bad = _wrong_device(actual) if check_device else None
    if bad:
        return bad
    actual = _to_cpu(actual)
    try:
        if nondet:
            a, e = _tensors(actual), _tensors(expected)
            if [(t.shape, t.dtype) for t in a] != [(t.shape, t.dtype) for t in e]:
                return "mismatch: shapes/dtypes differ from CPU"
            return None
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_device=False)
    except AssertionError as exc:
        return "mismatch: " + _short(exc).removeprefix("AssertionError: ")
    except Exception as exc:  # assert_close rejects the structure (e.g. tensor vs number)
        return "mismatch: " + _short(exc)
    return None


def _call(opinfo: Any, sample: Any) -> Any:
    out = opinfo(sample.input, *sample.args, **sample.kwargs)
    return sample.output_process_fn_grad(out)


def _forward_sample(opinfo: Any, sample: Any, dtype: torch.dtype, seed: int) -> str | Literal[False] | None:
    """Error string, None on a pass, or False when the sample is not a device test (CPU fails, nothing moved)."""
    torch.manual_seed(seed)
    try:
        expected = _to_cpu(_call(opinfo, sample))
    except Exception:
        return False
    rtol, atol = _tolerance(opinfo, dtype)
    nondet = opinfo.has_nondeterministic_output or _is_random(opinfo)
    error: str | None = None
    for devices in (True, False):  # second pass: float64 confined to the CPU (device arguments left "cpu")
        try:
            on_device, moved = _move_sample(opinfo, sample, devices=devices)
            if not moved:
                return False
            torch.manual_seed(seed)
            before = placement_log.snapshot()
            try:
                actual = _call(opinfo, on_device)
            finally:
                _note_reached(opinfo, before)
        except Exception as exc:
            error = error or _short(exc)
            if FLOAT64_REASON not in error:
                return error
            continue
        outcome = compare(actual, expected, rtol, atol, nondet, check_device=devices)
        return outcome if devices or outcome is None else error
    return error


def _is_random(opinfo: Any) -> bool:
    from torch.testing._internal.opinfo.core import DecorateInfo

    # PyTorch itself skips comparing these ops across devices (their values are undefined or random)
    return any(
        isinstance(deco, DecorateInfo)
        and deco.test_name == "test_compare_cpu"
        and deco.device_type is None
        and any(getattr(d, "__name__", "") == "decorator" for d in deco.decorators)
        for deco in opinfo.decorators
    )


def _grad_inputs(sample: Any) -> list[torch.Tensor]:
    return [t for t in _tensors((sample.input, sample.args, sample.kwargs)) if t.requires_grad]


def _backward_sample(opinfo: Any, sample: Any, seed: int) -> str | Literal[False] | None:
    """Compare input gradients of one float32 sample (False when it is not a device test)."""
    inputs = _grad_inputs(sample)
    torch.manual_seed(seed)
    try:
        outs = [t for t in _tensors(_call(opinfo, sample)) if t.requires_grad and t.is_floating_point()]
        if not outs or not inputs:
            return False
        gen = torch.Generator().manual_seed(seed)
        grads_out = [torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in outs]
        expected = torch.autograd.grad(outs, inputs, grads_out, allow_unused=True)
    except Exception:
        return False
    try:
        on_device, moved = _move_sample(opinfo, sample, requires_grad=True)
        if not moved:
            return False
        torch.manual_seed(seed)
        n_outs = [t for t in _tensors(_call(opinfo, on_device)) if t.requires_grad and t.is_floating_point()]
        grads = [g.to("neuron") for g in grads_out]
        actual = torch.autograd.grad(n_outs, _grad_inputs(on_device), grads, allow_unused=True)
    except Exception as exc:
        return _short(exc)
    rtol, atol = _tolerance(opinfo, torch.float32)
    if rtol is None:  # gradients accumulate in a different order when a layout differs
        rtol, atol = 1e-5, 1e-5
    if any((a is None) != (e is None) for a, e in zip(actual, expected)):
        return "mismatch: a gradient is None on one device only"
    pairs = [(a, e) for a, e in zip(actual, expected) if e is not None]
    return compare([a for a, _ in pairs], [e for _, e in pairs], rtol, atol, _is_random(opinfo))


def _variant_checks(opinfo: Any, sample: Any, tallies: dict[str, Tally], seed: int) -> None:
    """out=, in-place and printing checks of a float32 sample whose forward pass matched CPU."""
    from .variants import inplace_sample, out_sample, print_check

    rtol, atol = _tolerance(opinfo, torch.float32)
    nondet = opinfo.has_nondeterministic_output or _is_random(opinfo)

    def cmp(actual: Any, expected: Any) -> str | None:
        return compare(actual, expected, rtol, atol, nondet)

    checks = {
        "out": lambda on_device: out_sample(opinfo, sample, on_device, cmp),
        "inplace": lambda on_device: inplace_sample(opinfo, sample, on_device, cmp),
        "print": lambda on_device: print_check(_call(opinfo, on_device)),
    }
    try:  # the same sample with non-contiguous inputs (strided host views, strided fresh outputs)
        outcome = _forward_sample(opinfo, sample.noncontiguous(), torch.float32, seed)
    except Exception as exc:
        outcome = _short(exc)
    if isinstance(outcome, str) and FLOAT64_REASON not in outcome:
        outcome = "noncontiguous: " + outcome
    if outcome is not False and not (isinstance(outcome, str) and FLOAT64_REASON in outcome):
        tallies.setdefault("noncontig", Tally()).add(outcome)
    for kind, check in checks.items():
        torch.manual_seed(seed)
        try:
            outcome = check(_move_sample(opinfo, sample)[0])
        except Exception as exc:
            outcome = f"{kind}: " + _short(exc)
        if isinstance(outcome, str) and FLOAT64_REASON in outcome:
            continue  # the forward pass needed float64 confined to the CPU; nothing more to check
        if outcome is not False:
            tallies.setdefault(kind, Tally()).add(outcome)


def run_op(name: str, quick: bool = False) -> OpResult:
    """Sweep one OpInfo entry in-process; never raises for a failing sample."""
    opinfo = _op_db()[name]
    result = OpResult(name, opinfo.aten_name or opinfo.name)
    _reached.clear()
    supported = opinfo.supported_dtypes("cpu")
    limit = QUICK_SAMPLES if quick else None
    for dtype in SWEEP_DTYPES:
        if dtype not in supported:
            continue
        tally = Tally()
        try:
            samples = opinfo.sample_inputs("cpu", dtype, requires_grad=False)
            for i, sample in enumerate(samples):
                if limit is not None and tally.total >= limit:
                    break
                outcome = _forward_sample(opinfo, sample, dtype, seed=i)
                if outcome is not False:
                    tally.add(outcome)
                if outcome is None and dtype == torch.float32:
                    _variant_checks(opinfo, sample, result.variants, seed=i)
        except Exception as exc:  # the sample generator itself failed
            tally.add("sample generation failed: " + _short(exc))
        if tally.total:
            result.forward[DTYPE_NAMES[dtype]] = tally
    if opinfo.supports_autograd and torch.float32 in opinfo.supported_backward_dtypes("cpu"):
        tally = Tally()
        try:
            for i, sample in enumerate(opinfo.sample_inputs("cpu", torch.float32, requires_grad=True)):
                if limit is not None and tally.total >= limit:
                    break
                outcome = _backward_sample(opinfo, sample, seed=i)
                if outcome is not False:
                    tally.add(outcome)
        except Exception as exc:
            tally.add("sample generation failed: " + _short(exc))
        if tally.total:
            result.backward = tally
    result.aten_ops = dict(_reached)
    return result


_reached: dict[str, str] = {}  # aten ops (-> category) that the op's forward calls reached on the device
_state.register("compat_sweep", _state.Globals(__name__, "_reached"), reset=False)  # filled and read within one sweep
_CONVERSIONS = frozenset(
    [
        "to",
        "type_as",
        "float",
        "double",
        "half",
        "bfloat16",
        "bool",
        "byte",
        "char",
        "int",
        "long",
        "short",
        "cfloat",
        "cdouble",
        "chalf",
    ]
)


def _note_reached(opinfo: Any, before: Mapping[str, PlacementEntry]) -> None:
    name = opinfo.aten_name or opinfo.name
    for op, entry in placement_log.snapshot().items():
        if op in _TRANSFERS and op != name and name not in _CONVERSIONS:
            continue  # copies of inputs and results are not the op under test (unless it is a conversion)
        if entry.calls > (before[op].calls if op in before else 0):
            _reached[op] = entry.category
