"""Math operators shared by ``nki.language`` (as tile functions) and ``nki.isa`` (as ``op=`` arguments).

A :class:`BinaryOp` is an ALU operator (``nl.add``, ``nl.maximum``, ``nl.bitwise_and``...), a
:class:`UnaryOp` an activation function of the Scalar Engine (``nl.exp``, ``nl.gelu``...). Each
carries its torch implementation (float32 math, as the engines compute). The ``nki.language`` names
(``nl.add``...) are callable twins of these (:mod:`.language`): calling one on tiles issues the matching
ISA instruction. This module knows no tile code, so ``isa`` and ``language`` both sit above it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

Fn = Callable[..., torch.Tensor]


class BinaryOp:
    """An ALU operator: ``fn(a, b)``; ``reduce(x, dims)`` when it is a legal reduction operator."""

    def __init__(self, name: str, fn: Fn, reduce: Fn | None = None, bitvec: bool = False) -> None:
        self.name = name
        self.fn = fn
        self.reduce = reduce
        self.bitvec = bitvec

    def __repr__(self) -> str:
        return f"nl.{self.name}"


class UnaryOp:
    """An activation function (ScalarE ``activation``); ``fn(x)`` in float32."""

    def __init__(self, name: str, fn: Fn, alu: bool = False) -> None:
        self.name = name
        self.fn = fn
        self.alu = alu  # also a VectorE unary ALU op (abs, negative) usable in tensor_scalar

    def __repr__(self) -> str:
        return f"nl.{self.name}"


def _as_int(fn: Fn) -> Fn:
    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return fn(a.to(torch.int64), b.to(torch.int64) if isinstance(b, torch.Tensor) else int(b))

    return run


def _sum(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    return x.sum(dim=dims, keepdim=True)


def _max(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    return x.amax(dim=dims, keepdim=True)


def _min(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    return x.amin(dim=dims, keepdim=True)


def _prod(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    for d in sorted(dims, reverse=True):
        x = x.prod(dim=d, keepdim=True)
    return x


def _bits(fn: Fn) -> Fn:
    def red(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
        flat = x.to(torch.int64).flatten(dims[0])
        out = flat[..., 0]
        for i in range(1, flat.shape[-1]):
            out = fn(out, flat[..., i])
        return out.reshape(*x.shape[: dims[0]], *([1] * len(dims)))

    return red


BINARY: dict[str, BinaryOp] = {
    op.name: op
    for op in (
        BinaryOp("add", torch.add, _sum),
        BinaryOp("subtract", torch.sub),
        BinaryOp("multiply", torch.mul, _prod),
        BinaryOp("divide", torch.div),
        BinaryOp("maximum", torch.maximum, _max),
        BinaryOp("minimum", torch.minimum, _min),
        BinaryOp("power", torch.pow),
        BinaryOp("equal", lambda a, b: (a == b).float()),
        BinaryOp("not_equal", lambda a, b: (a != b).float()),
        BinaryOp("less", lambda a, b: (a < b).float()),
        BinaryOp("less_equal", lambda a, b: (a <= b).float()),
        BinaryOp("greater", lambda a, b: (a > b).float()),
        BinaryOp("greater_equal", lambda a, b: (a >= b).float()),
        BinaryOp("bitwise_and", _as_int(torch.bitwise_and), _bits(torch.bitwise_and), bitvec=True),
        BinaryOp("bitwise_or", _as_int(torch.bitwise_or), _bits(torch.bitwise_or), bitvec=True),
        BinaryOp("bitwise_xor", _as_int(torch.bitwise_xor), _bits(torch.bitwise_xor), bitvec=True),
        BinaryOp("left_shift", _as_int(torch.bitwise_left_shift), bitvec=True),
        BinaryOp("right_shift", _as_int(torch.bitwise_right_shift), bitvec=True),
        BinaryOp("logical_and", lambda a, b: ((a != 0) & (b != 0)).float()),
        BinaryOp("logical_or", lambda a, b: ((a != 0) | (b != 0)).float()),
        BinaryOp("logical_xor", lambda a, b: ((a != 0) ^ (b != 0)).float()),
        BinaryOp("fmod", torch.fmod),
        BinaryOp("mod", torch.remainder),
    )
}


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def _gelu_dx(x: torch.Tensor) -> torch.Tensor:
    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
    return cdf + x * torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _silu_dx(x: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    return s * (1 + x * (1 - s))


UNARY: dict[str, UnaryOp] = {
    op.name: op
    for op in (
        UnaryOp("copy", lambda x: x),
        UnaryOp("exp", torch.exp),
        UnaryOp("log", torch.log),
        UnaryOp("sqrt", torch.sqrt),
        UnaryOp("rsqrt", torch.rsqrt),
        UnaryOp("reciprocal", torch.reciprocal),
        UnaryOp("tanh", torch.tanh),
        UnaryOp("sigmoid", torch.sigmoid),
        UnaryOp("relu", torch.relu),
        UnaryOp("gelu", F.gelu),
        UnaryOp("gelu_apprx_tanh", _gelu_tanh),
        UnaryOp("gelu_apprx_sigmoid", lambda x: x * torch.sigmoid(1.702 * x)),
        UnaryOp("gelu_dx", _gelu_dx),
        UnaryOp("silu", F.silu),
        UnaryOp("silu_dx", _silu_dx),
        UnaryOp("softplus", F.softplus),
        UnaryOp("mish", F.mish),
        UnaryOp("erf", torch.erf),
        UnaryOp("erf_dx", lambda x: 2.0 / math.sqrt(math.pi) * torch.exp(-x * x)),
        UnaryOp("sin", torch.sin),
        UnaryOp("cos", torch.cos),
        UnaryOp("tan", torch.tan),
        UnaryOp("arctan", torch.atan),
        UnaryOp("square", torch.square),
        UnaryOp("abs", torch.abs, alu=True),
        UnaryOp("negative", torch.neg, alu=True),
        UnaryOp("sign", torch.sign),
        UnaryOp("ceil", torch.ceil),
        UnaryOp("floor", torch.floor),
        UnaryOp("trunc", torch.trunc),
    )
}
