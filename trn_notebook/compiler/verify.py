"""The IR's well-formedness check (SSA form over the op set): above both the IR and the op set, so that
``ir`` does not need ``ops`` (which needs the decompositions, which build IR)."""

from __future__ import annotations

from .ir import Graph, IRError
from .ops import OPS


def verify(graph: Graph) -> None:
    """Check SSA form: every use is defined before, no value defined twice, ops known; raises ``IRError``."""
    defined = {name for name, _ in graph.inputs}
    if len(defined) != len(graph.inputs):
        raise IRError(f"graph {graph.name}: duplicate input names")
    for n in graph.nodes:
        if n.op not in OPS:
            raise IRError(f"graph {graph.name}: unknown op {n.op!r}")
        if len(n.outs) != len(n.types):
            raise IRError(f"graph {graph.name}: {n.op} has {len(n.outs)} results but {len(n.types)} types")
        for r in n.refs():
            if r not in defined:
                raise IRError(f"graph {graph.name}: %{r} used by {n.op} before it is defined")
        for o in n.outs:
            if not o:
                continue
            if o in defined:
                raise IRError(f"graph {graph.name}: %{o} defined twice")
            defined.add(o)
    for out in graph.outputs:
        if out is not None and out.name not in defined:
            raise IRError(f"graph {graph.name}: output %{out.name} is not defined")
