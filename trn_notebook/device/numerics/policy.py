"""The numerics policy of the simulated device: ``exact`` (CPU PyTorch in the op's dtype) or ``trainium``.

One owner (:data:`numerics`, registered with :mod:`trn_notebook.state` as ``numerics``) holds the policy
in force. ``trainium`` mirrors the *documented* Neuron precision policy (auto-cast mode and type, FP32
accumulation, FP32 engine-internal math, RNE or seeded stochastic rounding, int64 → int32 downcast);
what the docs do not publish is listed by :meth:`NumericsPolicy.assumed`. How each op follows the
policy is its numerics class in the op registry (:mod:`.calls`). Sources: docs/numerics.md.

The policy is a setting (like the chip): :func:`trn_notebook.reset` keeps it; restore it with the value
:func:`set_numerics` returns, or use :func:`numerics_scope` (``trn_notebook.numerics(...)``). Changing it
drops compiled graphs held in memory (the next call compiles under the new policy; the compile cache key
includes the policy).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args

import torch

from ... import envvars
from ... import locks as _locks
from ... import state as _state

Mode = Literal["exact", "trainium"]
Autocast = Literal["none", "matmult", "all"]
AutocastType = Literal["bf16", "fp16", "tf32", "fp8_e4m3"]
MODES: tuple[str, ...] = get_args(Mode)
AUTOCASTS: tuple[str, ...] = get_args(Autocast)
AUTOCAST_TYPES: tuple[str, ...] = get_args(AutocastType)
ENV_VAR = "TRN_NOTEBOOK_NUMERICS"

_DOCS = "aws-neuron-sdk@81ce03a"
# Every documented item of the policy: (item, where it is documented). docs/numerics.md has the URLs.
SOURCED: tuple[tuple[str, str], ...] = (
    ("auto-cast none/matmult/all to bf16/fp16/tf32/fp8_e4m3", f"{_DOCS} compiler/neuronx-cc/api-reference-guide/index.rst L102-121"),
    ("auto-cast default 'none' since Neuron 2.27.0 (before: 'matmult')", f"{_DOCS} release-notes/components/compiler.rst L279-294"),
    ("mixed-precision accumulation (softmax, layernorm) on by default", f"{_DOCS} release-notes/components/compiler.rst L279-294"),
    ("TensorE/PSUM accumulate in FP32, output rounded to the output dtype", f"{_DOCS} nki/guides/architecture/trainium_inferentia2_arch.rst L103-105, L264-270, L836"),
    ("VectorE/ScalarE compute in FP32 with casts at the boundaries", f"{_DOCS} nki/guides/architecture/trainium_inferentia2_arch.rst L312-318, L418-423"),
    ("ScalarE activation valid input ranges (log, sin, arctan, sqrt, rsqrt, reciprocal)", f"{_DOCS} nki/api/nki.api.shared.rst L137-175"),
    ("RNE rounding; stochastic rounding off by default, seed default 0", f"{_DOCS} neuron-runtime/guides/nrt-developer-guide.rst L1067, L1112"),
    ("int64 downcast to int32 (neuronx-cc --native-int64 off)", "trn2-model-figures.md 'Numerics'"),
    ("no integer datapath: integer matmul, scatter-with-compute (scatter_add, index_add, scatter_reduce), all-reduce "
     "and reduce-scatter convert operands to FP32, compute, convert back (lossy above 2^24)",
     f"{_DOCS} compiler/error-codes/EVRF035.rst L11-18, EVRF060.rst L11-18, EVRF061.rst L11-16, EVRF063.rst L11-16; "
     "release-notes/components/compiler.rst L28 (default: downcast with a warning)"),
)  # fmt: skip
ASSUMED: tuple[str, ...] = (
    "ScalarE approximation error: not published; activations inside their range return the CPU FP32 value",
    "invalid output outside an activation's range: not published; the CPU value is kept and a warning is raised",
    "accumulation order inside a tile and denormal/flush-to-zero behaviour: not published; CPU order, no flush",
    "auto-cast matmult keeps the FP32 PSUM result as the op's FP32 output (no second rounding)",
    "auto-cast all rounds every FP32 op's inputs and its result through the cast type (stored as FP32)",
    "low-precision elementwise/reduction ops: the CPU kernel's FP32-internal math and one RNE rounding stand in "
    "for VectorE/ScalarE's (documented as FP32 internally; the exact sequence of casts is not)",
    "fp8_e4m3 auto-cast uses torch.float8_e4m3fn conversion (overflow gives NaN, no saturation)",
    "stochastic rounding draws from one seeded torch.Generator per session (the hardware's RNG is not published)",
    "mixed_precision_accumulation=False is not modeled below FP32 (the CPU kernels accumulate in FP32)",
    "int64 downcast wraps values modulo 2^32 (two's complement), as a C int32 conversion does",
    "integer ops through FP32: the FP32 result converts back as the CPU's float-to-int cast does (toward zero; "
    "out of the integer range: the CPU's result); int32 matmul on trn1 (documented as native there) is also "
    "computed through FP32; an integer all-reduce sums in gloo's order",
    "TorchNeuron's own fp32 and stochastic-rounding defaults: not documented; fp32 stays fp32",
)  # fmt: skip


class NeuronNumericsWarning(UserWarning):
    """An op's input lies outside the range the Trainium engine computes it for (its output is invalid there)."""


@dataclass(frozen=True)
class NumericsPolicy:
    """One precision policy: ``mode`` plus the documented knobs (meaningful in ``trainium`` mode)."""

    mode: Mode = "exact"
    autocast: Autocast = "none"
    autocast_type: AutocastType = "bf16"
    mixed_precision_accumulation: bool = True
    stochastic_rounding: bool = False
    seed: int | None = None
    downcast_int64: bool = True
    chip: str | None = None

    def __post_init__(self) -> None:
        _check(self)

    @property
    def active(self) -> bool:
        """True when ops follow the Trainium policy (``mode == "trainium"``)."""
        return self.mode == "trainium"

    @property
    def cast_dtype(self) -> torch.dtype:
        """The torch dtype auto-cast rounds to (``tf32`` is FP32 storage with a 10-bit mantissa)."""
        return _CAST_DTYPES[self.autocast_type]

    def label(self) -> str:
        """One line: ``exact (CPU PyTorch in each op's dtype)`` or the trainium knobs."""
        if not self.active:
            return "exact (CPU PyTorch in each op's dtype; not Trainium's precision)"
        cast = "none" if self.autocast == "none" else f"{self.autocast}->{self.autocast_type}"
        rounding = f"stochastic(seed={self.seed or 0})" if self.stochastic_rounding else "RNE"
        return (
            f"trainium (auto-cast {cast}, FP32 accumulation, rounding {rounding}, "
            f"int64 {'->int32' if self.downcast_int64 else 'native'}"
            f"{', mixed-precision accumulation' if self.mixed_precision_accumulation else ''}"
            f"{f', chip {self.chip}' if self.chip else ''})"
        )

    def sourced(self) -> tuple[tuple[str, str], ...]:
        """The documented parts of the policy, each with its source (document and lines)."""
        return SOURCED if self.active else ()

    def assumed(self) -> tuple[str, ...]:
        """The parts the Neuron docs do not publish, and what the simulator assumes for each."""
        return ASSUMED if self.active else ("exact mode: CPU PyTorch numerics, not a model of Trainium",)

    def to_dict(self) -> dict[str, Any]:
        """The policy's fields by name (for cache keys and reports)."""
        return dataclasses.asdict(self)


_CAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp8_e4m3": torch.float8_e4m3fn}


FP32_EXACT_INTEGERS = 2**24  # every integer of magnitude <= 2^24 is an FP32 value; above it FP32 loses the low bits


def no_integer_datapath(dtype: torch.dtype) -> bool:
    """Whether an operand of ``dtype`` goes through FP32 on an op with no integer datapath (TensorE dot,
    scatter-with-compute, the collectives' reduction) under the policy in force: ``trainium`` and an
    integer dtype other than bool (aws-neuron-sdk compiler/error-codes/EVRF035, EVRF060, EVRF061, EVRF063)."""
    return numerics.active and not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool


def integer_to_fp32(t: torch.Tensor) -> torch.Tensor:
    """An integer operand as an op with no integer datapath sees it: converted to FP32 (RNE above 2^24)."""
    return t.to(torch.float32)


def integer_from_fp32(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """An FP32 result of an integer op converted back to the op's integer ``dtype`` (the values are integral)."""
    return x.to(dtype)


# aws-neuron-sdk compiler/error-codes page of each engine with no integer datapath
INTEGER_CODES = (("dot", "EVRF035"), ("scatter", "EVRF060"), ("all_reduce", "EVRF061"), ("reduce_scatter", "EVRF063"))


def warn_integer_fp32(op: str, dtype: torch.dtype, engine: str, where: tuple[str, int] | None = None) -> None:
    """Warn (:class:`NeuronNumericsWarning`, once per op and user source line) that ``op`` computes its
    ``dtype`` data through FP32 (``engine``: ``dot``/``scatter``/``all_reduce``/``reduce_scatter``), as
    neuronx-cc warns by default (aws-neuron-sdk release-notes/components/compiler.rst L28)."""
    import warnings

    from ..source_lines import user_frame

    where = where or user_frame() or ("<unknown>", 0)
    key = (f"integer:{op}", f"{where[0]}:{where[1]}")
    if key in numerics.warned:
        return
    numerics.warned.add(key)
    code = dict(INTEGER_CODES)[engine]
    warnings.warn_explicit(
        f"{op} on {dtype}: Trainium has no integer datapath for {engine}, so the integer operands are converted "
        f"to FP32, computed and converted back: exact only while values stay within 2^24 (source: aws-neuron-sdk "
        f"compiler/error-codes/{code}.rst; neuronx-cc warns by default, --implicit-integer-downcast). Cast to "
        "float32 yourself to make it explicit, or keep this integer math on the CPU",
        NeuronNumericsWarning,
        where[0],
        where[1],
        "trn_notebook",
    )


def _one_of(name: str, value: object, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ValueError(f"numerics {name}={value!r} is not valid; use one of {', '.join(map(repr, valid))}")


def _check(p: NumericsPolicy) -> None:
    _one_of("mode", p.mode, MODES)
    _one_of("autocast", p.autocast, AUTOCASTS)
    _one_of("autocast_type", p.autocast_type, AUTOCAST_TYPES)
    for name in ("mixed_precision_accumulation", "stochastic_rounding", "downcast_int64"):
        if not isinstance(getattr(p, name), bool):
            raise TypeError(f"numerics {name} must be True or False, got {getattr(p, name)!r}")
    if p.seed is not None and (isinstance(p.seed, bool) or not isinstance(p.seed, int) or p.seed < 0):
        raise ValueError(f"numerics seed must be a non-negative int or None, got {p.seed!r}")
    if p.chip is not None:
        from ..chips import get_chip_spec

        get_chip_spec(p.chip)  # raises ValueError naming the chips


class _Numerics:
    """The owner of the policy in force, the stochastic-rounding generator and the warnings already shown."""

    def __init__(self, policy: NumericsPolicy) -> None:
        self.lock = _locks.make("leaf", "numerics policy")
        self.policy = policy
        self.active = policy.active  # the one cheap check of the per-op path
        self.generator = torch.Generator()
        self.generator.manual_seed(policy.seed or 0)
        self.warned: set[tuple[str, str]] = set()
        self.version = 0  # bumps on every change (compiled graphs key on the policy itself)

    def set(self, policy: NumericsPolicy) -> NumericsPolicy:
        """Put ``policy`` in force (re-seeds the rounding generator); returns the previous policy."""
        with self.lock:
            previous, self.policy = self.policy, policy
            self.active = policy.active
            self.generator.manual_seed(policy.seed or 0)
            self.warned.clear()
            self.version += 1
        if previous != policy:
            _drop_compiled()
        return previous

    def snapshot(self) -> NumericsPolicy:
        """The policy in force (frozen)."""
        return self.policy

    def reset(self) -> None:
        """Show numerics warnings again and restart the rounding generator from the policy's seed."""
        with self.lock:
            self.warned.clear()
            self.generator.manual_seed(self.policy.seed or 0)


def _drop_compiled() -> None:
    """A new policy needs new compiles (the auto-cast is a compiler flag on hardware too): drop the compiled
    frames and graphs held in memory (the owners :func:`trn_notebook.reset` drops with ``compiled=True``)."""
    for r in _state.registrations().values():
        if r.reset == "compiled":
            r.owner.reset()


def parse_numerics(text: str) -> NumericsPolicy:
    """``"trainium"`` or ``"trainium,autocast=matmult,stochastic_rounding=1,seed=3"`` as a policy.

    Raises ``ValueError`` naming the accepted forms for an unknown mode, key or value.
    """
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError(f"empty numerics spec; use one of {', '.join(MODES)}, e.g. 'trainium,autocast=matmult'")
    fields = {f.name: f for f in dataclasses.fields(NumericsPolicy)}
    changes: dict[str, Any] = {"mode": parts[0]}
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or key not in fields or key == "mode":
            valid = ", ".join(k for k in fields if k != "mode")
            raise ValueError(f"numerics option {part!r} is not KEY=VALUE with KEY one of {valid}")
        changes[key] = _value(key, value.strip())
    return NumericsPolicy(**changes)


def _value(key: str, value: str) -> Any:
    if key in ("mixed_precision_accumulation", "stochastic_rounding", "downcast_int64"):
        word = value.lower()
        if word in ("1", "true", "yes", "on"):
            return True
        if word in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"numerics {key}={value!r}: use 1/0, true/false, yes/no or on/off")
    if key == "seed":
        if not value.isdigit():
            raise ValueError(f"numerics seed={value!r}: use a non-negative integer")
        return int(value)
    if key == "chip":
        return value or None
    return value


def _from_env() -> NumericsPolicy:
    value = envvars.text(ENV_VAR)
    if value is None:
        return NumericsPolicy()
    try:
        return parse_numerics(value)
    except (ValueError, TypeError) as exc:  # a bad value must not break `import torch` (autoload)
        envvars.warn_bad(ENV_VAR, value, f"exact or trainium[,KEY=VALUE...] ({exc})")
        return NumericsPolicy()


numerics = _Numerics(_from_env())
_state.register("numerics", numerics, reset=True)  # reset() keeps the policy; it re-seeds and re-warns


def numerics_policy() -> NumericsPolicy:
    """The numerics policy in force (a frozen :class:`NumericsPolicy`)."""
    return numerics.policy


def _policy_of(mode: str, kwargs: dict[str, Any]) -> NumericsPolicy:
    base = NumericsPolicy()
    try:
        return dataclasses.replace(base, mode=mode, **kwargs)  # type: ignore[arg-type]
    except TypeError as exc:
        if "unexpected keyword" in str(exc):
            valid = ", ".join(f.name for f in dataclasses.fields(NumericsPolicy))
            raise TypeError(f"unknown numerics option ({exc}); valid: {valid}") from None
        raise


def set_numerics(
    mode: str = "exact",
    *,
    autocast: str = "none",
    autocast_type: str = "bf16",
    mixed_precision_accumulation: bool = True,
    stochastic_rounding: bool = False,
    seed: int | None = None,
    downcast_int64: bool = True,
    chip: str | None = None,
) -> NumericsPolicy:
    """Put a numerics policy in force for eager ops and later compiles; returns the previous policy.

    ``mode="trainium"`` follows the documented Neuron policy (docs/numerics.md); ``"exact"`` computes
    each op with CPU PyTorch in its own dtype. Raises ``ValueError``/``TypeError`` for a bad value
    (the policy in force does not change).
    """
    policy = NumericsPolicy(
        mode,  # type: ignore[arg-type]
        autocast,  # type: ignore[arg-type]
        autocast_type,  # type: ignore[arg-type]
        mixed_precision_accumulation,
        stochastic_rounding,
        seed,
        downcast_int64,
        chip,
    )
    return numerics.set(policy)


@contextlib.contextmanager
def numerics_scope(mode: str | NumericsPolicy = "trainium", **knobs: Any) -> Iterator[NumericsPolicy]:
    """``with trn_notebook.numerics("trainium", autocast="matmult"):`` — the policy inside, the previous after.

    Takes the arguments of :func:`set_numerics` (or a :class:`NumericsPolicy`); raises as it does.
    """
    policy = mode if isinstance(mode, NumericsPolicy) else _policy_of(mode, knobs)
    previous = numerics.set(policy)
    try:
        yield policy
    finally:
        numerics.set(previous)


__all__ = [
    "ASSUMED",
    "ENV_VAR",
    "FP32_EXACT_INTEGERS",
    "SOURCED",
    "NeuronNumericsWarning",
    "NumericsPolicy",
    "integer_from_fp32",
    "integer_to_fp32",
    "no_integer_datapath",
    "numerics",
    "numerics_policy",
    "numerics_scope",
    "parse_numerics",
    "set_numerics",
    "warn_integer_fp32",
]
