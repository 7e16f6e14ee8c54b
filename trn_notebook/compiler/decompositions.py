"""The decomposition table: one rule per non-core IR op, rewriting it into core ops.

A rule receives the node's :class:`Site` and returns the replacement nodes, or the name of an
existing value when the node is an alias of it. Each rule's algebra is in its docstring. An IR op is
*core* exactly when it has no rule here (``compiler/ops.py`` reads this table); adding a
decomposition is one decorated function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .ir import DType, Node, Ref, TensorType


@dataclass(frozen=True)
class Site:
    """A node to decompose with what its rule needs: first argument, types, a fresh-name source."""

    node: Node
    x: Any
    src: TensorType | None
    out: TensorType
    fresh: Callable[[], str]

    @property
    def kw(self) -> dict[str, Any]:
        """The node's keyword arguments."""
        return dict(self.node.kwargs)


Rule = Callable[[Site], "list[Node] | str"]
DECOMPOSITIONS: dict[str, Rule] = {}


def rule(*names: str) -> Callable[[Rule], Rule]:
    """Register ``fn`` as the decomposition of IR ops ``names``; raises ``ValueError`` on a duplicate."""

    def deco(fn: Rule) -> Rule:
        for name in names:
            if name in DECOMPOSITIONS:
                raise ValueError(f"IR op {name!r} already has a decomposition rule")
            DECOMPOSITIONS[name] = fn
        return fn

    return deco


@rule("alias")
def _alias(s: Site) -> list[Node] | str:
    """alias(x) = x  (functional graph: aliasing is not observable)."""
    return str(s.x.name)


@rule("view", "squeeze", "unsqueeze")
def _view(s: Site) -> list[Node] | str:
    """view/squeeze/unsqueeze(x) = reshape(x, out.shape)."""
    return [s.node.with_(op="reshape", args=(s.x, list(s.out.shape)), kwargs=())]


@rule("t")
def _t(s: Site) -> list[Node] | str:
    """t(x) = permute(x, [1, 0]); t of a vector is itself."""
    if len(s.out.shape) < 2:
        return str(s.x.name)
    return [s.node.with_(op="permute", args=(s.x, [1, 0]))]


@rule("transpose")
def _transpose(s: Site) -> list[Node] | str:
    """transpose(x, a, b) = permute(x, p) with p = identity, a and b swapped."""
    assert s.src is not None
    rank = len(s.src.shape)
    a, b = (d % rank if rank else 0 for d in s.node.args[1:3])
    perm = list(range(rank))
    perm[a], perm[b] = perm[b], perm[a]
    return [s.node.with_(op="permute", args=(s.x, perm), kwargs=())]


@rule("rsub")
def _rsub(s: Site) -> list[Node] | str:
    """rsub(x, y, alpha) = y - alpha * x = (x * -alpha) + y."""
    n, tmp = s.node, s.fresh()
    alpha = s.kw.get("alpha", n.args[2] if len(n.args) > 2 else 1)
    return [
        Node((tmp,), (s.out,), "mul", (s.x, -alpha), (), n.source),
        n.with_(op="add", args=(Ref(tmp), n.args[1]), kwargs=()),
    ]


@rule("mean")
def _mean(s: Site) -> list[Node] | str:
    """mean(x, dims) = sum(x, dims) / (numel(x) / numel(out))."""
    assert s.src is not None
    n, tmp = s.node, s.fresh()
    count = max(s.src.numel, 1) // max(s.out.numel, 1) if s.out.numel else 1
    return [n.with_(op="sum", outs=(tmp,)), Node(n.outs, n.types, "div", (Ref(tmp), float(count)), (), n.source)]


@rule("zeros_like", "ones_like")
def _fill_like(s: Site) -> list[Node] | str:
    """zeros_like(x) = full_like(x, 0); ones_like(x) = full_like(x, 1)."""
    fill = 0 if s.node.op == "zeros_like" else 1
    return [s.node.with_(op="full_like", args=(s.x, fill, *s.node.args[1:]))]


@rule("zeros", "ones")
def _fill(s: Site) -> list[Node] | str:
    """zeros(size) = full(size, 0); ones(size) = full(size, 1)."""
    n = s.node
    fill = 0 if n.op == "zeros" else 1
    kwargs = tuple(kv for kv in n.kwargs if kv[0] == "dtype")
    dtype = dict(kwargs).get("dtype", DType(s.out.dtype))
    return [n.with_(op="full", args=(n.args[0], fill), kwargs=(("dtype", dtype),))]
