"""The compiler's IR: a small, typed, SSA-style graph of core tensor ops.

A :class:`Graph` has typed inputs, a tuple of :class:`Node` in execution order and outputs. Every
node defines one or more SSA values (``%v3``) with a :class:`TensorType` (dtype + static shape, and
strides when not contiguous). Arguments are either :class:`Ref` to a value or constants (int, float,
bool, None, str, :class:`DType`, or lists of those). Passes never mutate: they build new graphs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from ..device.source_lines import SourceLine

DTYPES: dict[str, torch.dtype] = {
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f64": torch.float64,
    "i64": torch.int64,
    "i32": torch.int32,
    "i16": torch.int16,
    "i8": torch.int8,
    "u8": torch.uint8,
    "b8": torch.bool,
    "c64": torch.complex64,
    # FP8 (TorchNeuron 2.34: _scaled_mm native) and MXFP8's shared block exponents (E8M0 scales)
    "f8e4m3": torch.float8_e4m3fn,
    "f8e5m2": torch.float8_e5m2,
    "f8e8m0": torch.float8_e8m0fnu,
    "u64": torch.uint64,  # varlen attention's (constant) RNG state
}
DTYPE_NAMES: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}


class IRError(ValueError):
    """A malformed IR graph or IR text (unknown op, undefined value, bad type)."""


@dataclass(frozen=True)
class DType:
    """A dtype constant argument (prints as ``f32``)."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in DTYPES:
            raise IRError(f"unknown dtype {self.name!r}; valid: {sorted(DTYPES)}")

    @property
    def torch(self) -> torch.dtype:
        return DTYPES[self.name]

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Ref:
    """A use of an SSA value."""

    name: str

    def __str__(self) -> str:
        return f"%{self.name}"


@dataclass(frozen=True)
class TensorType:
    """dtype + static shape (+ strides when the layout is not contiguous)."""

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None = None

    @classmethod
    def of(cls, t: torch.Tensor) -> TensorType:
        """The type of a (possibly fake) tensor; raises ``IRError`` for an unsupported dtype."""
        name = DTYPE_NAMES.get(t.dtype)
        if name is None:
            raise IRError(f"dtype {t.dtype} is not supported by the neuron compiler")
        shape = tuple(int(s) for s in t.shape)
        strides = tuple(int(s) for s in t.stride())
        return cls(name, shape, None if strides == contiguous_strides(shape) or t.numel() <= 1 else strides)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPES[self.dtype].itemsize

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def __str__(self) -> str:
        dims = ",".join(str(s) for s in self.shape)
        if self.strides is not None:
            return f"{self.dtype}[{dims};{','.join(str(s) for s in self.strides)}]"
        return f"{self.dtype}[{dims}]"


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides of ``shape``."""
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


@dataclass(frozen=True)
class Node:
    """One op: ``outs`` (value names, ``""`` for a None output) = ``op(args, kwargs)``.

    ``kernel`` is the fused kernel id (set by fusion); ``mem`` the arena offset of each output
    (set by memory planning; -1 for values that never reach HBM).
    """

    outs: tuple[str, ...]
    types: tuple[TensorType | None, ...]
    op: str
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()
    source: SourceLine | None = None  # the user's line that produced it
    kernel: int | None = None
    mem: tuple[int, ...] | None = None

    def refs(self) -> list[str]:
        """Names of every value this node reads (args and kwargs, lists included)."""
        found: list[str] = []
        _collect(self.args, found)
        _collect(tuple(v for _, v in self.kwargs), found)
        return found

    def with_(self, **changes: Any) -> Node:
        return replace(self, **changes)


def _collect(values: Any, found: list[str]) -> None:
    for v in values:
        if isinstance(v, Ref):
            found.append(v.name)
        elif isinstance(v, list | tuple):
            _collect(v, found)


def map_refs(value: Any, fn: Any) -> Any:
    """``value`` with every :class:`Ref` replaced by ``fn(ref)`` (lists rebuilt)."""
    if isinstance(value, Ref):
        return fn(value)
    if isinstance(value, list):
        return [map_refs(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(map_refs(v, fn) for v in value)
    return value


@dataclass(frozen=True)
class Graph:
    """A compiled unit: typed inputs, nodes in order, outputs (Refs or None)."""

    name: str
    inputs: tuple[tuple[str, TensorType], ...]
    nodes: tuple[Node, ...]
    outputs: tuple[Ref | None, ...]
    meta: tuple[tuple[str, str], ...] = field(default=())

    def types(self) -> dict[str, TensorType | None]:
        """Every value's type by name."""
        out: dict[str, TensorType | None] = dict(self.inputs)
        for n in self.nodes:
            for name, t in zip(n.outs, n.types):
                if name:
                    out[name] = t
        return out

    def with_nodes(self, nodes: list[Node] | tuple[Node, ...], outputs: Any = None) -> Graph:
        return replace(self, nodes=tuple(nodes), outputs=self.outputs if outputs is None else tuple(outputs))
