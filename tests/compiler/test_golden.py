"""Golden IR, one file per pass family: the graph before and after the family's passes, as text.

Each file under ``tests/compiler/golden/`` shows what one family does to a function written to
exercise it; the test also runs both graphs and compares their results with CPU PyTorch, so a golden
file can only change with the compiler's output, never hide a wrong answer. Regenerate after an
intended change with ``TRN_UPDATE_GOLDEN=1 pytest tests/compiler/test_golden.py`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from trn_notebook.compiler.aten_decompositions import trace
from trn_notebook.compiler.codegen import run_graph
from trn_notebook.compiler.lower import lower
from trn_notebook.compiler.passes import PASSES
from trn_notebook.compiler.schedule import build_schedule
from trn_notebook.compiler.text import print_graph

GOLDEN = Path(__file__).parent / "golden"


def decompositions(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # torch's Core ATen decompositions (while tracing): transpose/t -> permute, rsub -> sub, zeros_like -> full_like;
    # ours (the decompose pass): view/unsqueeze -> reshape, mean -> sum/div
    a = x.transpose(0, 1).t().reshape(2, 12).unsqueeze(0)
    return (1.0 - a.mean(-1, keepdim=True)) + torch.zeros_like(a) + y.view(1, 2, 12)


def cleanup(x: torch.Tensor) -> torch.Tensor:
    # cse: the same exp twice; dce: an unused branch
    _unused = x.sin() * 3
    return x.exp() + x.exp()


def legalize(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    # legalize_dtypes: int64 indices computed in 32 bits; legalize_layout: a strided view feeding a kernel
    return x.t().contiguous()[idx] * 2


def fusion(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # reorder + fuse: a pointwise chain after a matmul, a reduction consuming a pointwise chain
    h = torch.relu(x @ w) * 0.5 + 1.0
    return torch.softmax(h.tanh(), -1).sum(0)


def memory(x: torch.Tensor) -> torch.Tensor:
    # plan_memory: intermediates reuse the arena once their last reader ran
    a = (x @ x).relu()
    b = (a @ x).sigmoid()
    c = (b @ x).tanh()
    return c + a.sum()


CASES = {
    "decompose": (decompositions, ("decompose",), lambda: (torch.randn(4, 6), torch.randn(2, 12))),
    "cleanup": (cleanup, ("dce", "cse"), lambda: (torch.randn(5),)),
    "legalize": (legalize, ("legalize_dtypes", "legalize_layout"), lambda: (torch.randn(3, 4), torch.tensor([0, 2]))),
    "fusion": (fusion, ("reorder", "fuse"), lambda: (torch.randn(4, 8), torch.randn(8, 6))),
    "memory": (memory, ("plan_memory",), lambda: (torch.randn(8, 8),)),
}


def _lowered(fn, args):
    gm = trace(fn, *args)
    for node in gm.graph.nodes:  # golden text must not depend on where the tests live
        node.meta.pop("stack_trace", None)
    return lower(gm, fn.__name__)


def _around(g, family):
    """The graph just before the family's first pass and just after its last (passes run in PASSES order)."""
    before = after = None
    for name, p in PASSES:
        if name == family[0]:
            before = g
        g = p(g)
        if name == family[-1]:
            after = g
    assert before is not None and after is not None
    return before, after, g


def _check(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.ir"
    if os.environ.get("TRN_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden file {path.name}; run with TRN_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"{path.name} changed; if intended, regenerate with TRN_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_ir_of_each_pass_family(name):
    fn, family, make_args = CASES[name]
    torch.manual_seed(0)
    args = make_args()
    before, after, planned = _around(_lowered(fn, args), family)
    text = f"# {name}: before {', '.join(family)}\n{print_graph(before)}# after\n{print_graph(after)}"
    if name == "memory":
        text += "# schedule\n" + build_schedule(planned).text() + "\n"
    _check(name, text)
    expected = fn(*args)
    for g in (before, after, planned):
        (got,) = run_graph(g, list(args))
        torch.testing.assert_close(got, expected)
