"""The decomposition table: one rule per non-core IR op, rewriting it into core ops.

Only what PyTorch's own tables do not provide lives here: AOT Autograd has already applied torch's
Core ATen decompositions (:mod:`.aten_decompositions`: ``t``/``transpose`` → ``permute``, ``rsub`` →
``sub``, ``zeros``/``ones(_like)`` → ``full(_like)`` …), so these rules only canonicalise Core ATen
ops inside the IR — views to ``reshape``, ``mean`` to ``sum``/``div``, ``alias`` to its input.

A rule receives the node's :class:`Site` and returns the replacement nodes, or the name of an
existing value when the node is an alias of it. Each rule's algebra is in its docstring. An IR op is
*core* exactly when it has no rule here (``compiler/ops.py`` reads this table); adding a
decomposition is one decorated function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .ir import Node, Ref, TensorType


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


@rule("mean")
def _mean(s: Site) -> list[Node] | str:
    """mean(x, dims) = sum(x, dims) / (numel(x) / numel(out))."""
    assert s.src is not None
    n, tmp = s.node, s.fresh()
    count = max(s.src.numel, 1) // max(s.out.numel, 1) if s.out.numel else 1
    return [n.with_(op="sum", outs=(tmp,)), Node(n.outs, n.types, "div", (Ref(tmp), float(count)), (), n.source)]
