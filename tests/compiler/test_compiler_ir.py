"""The compiler's IR: golden text, strict parsing, and every pass preserving results (property test)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trn_notebook.compiler.aten_decompositions import trace
from trn_notebook.compiler.codegen import run_graph
from trn_notebook.compiler.ir import IRError
from trn_notebook.compiler.lower import lower
from trn_notebook.compiler.passes import PASSES, run_passes
from trn_notebook.compiler.schedule import build_schedule
from trn_notebook.compiler.text import parse_graph, print_graph
from trn_notebook.compiler.verify import verify

GOLDEN = Path(__file__).parent / "golden"


def small_fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.relu(x @ w.t()) * 2.0 + 1.0
    return torch.softmax(y, -1) + y.mean()


def lowered(fn, *args):
    gm = trace(fn, *args)
    for node in gm.graph.nodes:  # golden text must not depend on where the tests live
        node.meta.pop("stack_trace", None)
    return lower(gm, fn.__name__)


def test_golden_ir_text_of_a_small_function_is_stable():
    g, history = run_passes(lowered(small_fn, torch.randn(4, 8), torch.randn(6, 8)), keep=True)
    text = "# lowered\n" + print_graph(history[0][1]) + "# planned\n" + print_graph(g)
    golden = (GOLDEN / "small_fn.ir").read_text()
    assert text == golden


def test_printed_ir_parses_back_to_the_same_graph():
    g, _ = run_passes(lowered(small_fn, torch.randn(4, 8), torch.randn(6, 8)))
    assert parse_graph(print_graph(g)) == g


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.replace("= softmax(", "= evil_op("), "unknown op"),
        (lambda t: t.replace("(%v", "(%nowhere", 1), "before it is defined"),
        (lambda t: t.rsplit("}", 1)[0], "truncated"),
        (lambda t: t.replace("f32[4,6]", "f32[4,x]", 1), "bad tensor type"),
        (lambda t: t.replace("= softmax(", "= softmax(__import__('os'), "), "unknown word"),
    ],
)
def test_parser_rejects_anything_the_printer_would_not_write(mutate, message):
    g, _ = run_passes(lowered(small_fn, torch.randn(4, 8), torch.randn(6, 8)))
    with pytest.raises(IRError, match=message):
        parse_graph(mutate(print_graph(g)))


def test_schedule_fuses_a_pointwise_chain_into_one_kernel_and_models_less_device_time_than_eager():
    g, _ = run_passes(lowered(lambda x: torch.relu(x * 2 + 1).sum(-1), torch.randn(64, 64)))
    sched = build_schedule(g)
    assert sched.fused_kernels == 1
    assert [k.ops for k in sched.kernels if k.engine != "none"] == [("mul", "add", "relu", "sum")]
    assert sched.device_s < sched.eager_device_s


# -- property: run(pass(ir)) == run(ir) for every pass -------------------------------------------
UNARY = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "neg": torch.neg,
    "sigmoid": torch.sigmoid,
    "exp": lambda a: torch.exp(a.clamp(-3, 3)),
    "t2": lambda a: a.t().t(),
    "rsub": lambda a: 1 - a,
    "mean": lambda a: a - a.mean(dim=-1, keepdim=True),
    "amax": lambda a: a.amax(dim=0, keepdim=True) * a,
    "f64": lambda a: a.double().sin().float(),
    "view": lambda a: a.reshape(-1).reshape(a.shape),
}
BINARY = {"add": torch.add, "mul": torch.mul, "sub": torch.sub, "maximum": torch.maximum}

programs = st.lists(
    st.one_of(
        st.tuples(st.just("u"), st.sampled_from(sorted(UNARY)), st.integers(0, 7)),
        st.tuples(st.just("b"), st.sampled_from(sorted(BINARY)), st.integers(0, 7), st.integers(0, 7)),
    ),
    min_size=1,
    max_size=10,
)


def build(program):
    def fn(x, y):
        pool = [x, y]
        for step in program:
            if step[0] == "u":
                pool.append(UNARY[step[1]](pool[step[2] % len(pool)]))
            else:
                pool.append(BINARY[step[1]](pool[step[2] % len(pool)], pool[step[3] % len(pool)]))
        dead = pool[-1] * 3  # never returned: DCE removes it
        del dead
        twice = pool[-1] + pool[0]  # computed twice: CSE merges them
        return pool[-1], twice, pool[-1] + pool[0]

    return fn


@settings(max_examples=40, deadline=None)
@given(program=programs, rows=st.integers(1, 5), cols=st.integers(1, 5), seed=st.integers(0, 1000))
def test_every_pass_preserves_results(program, rows, cols, seed):
    g0 = torch.Generator().manual_seed(seed)
    args = [torch.randn(rows, cols, generator=g0), torch.randn(rows, cols, generator=g0)]
    graph = lower(trace(build(program), *args), "prop")
    expected = run_graph(graph, args, check_types=True)
    for name, p in PASSES:
        graph = p(graph)
        verify(graph)
        got = run_graph(graph, args, check_types=True)
        for e, r in zip(expected, got):
            torch.testing.assert_close(r, e, rtol=1e-5, atol=1e-5, msg=f"pass {name} changed a result")
        assert parse_graph(print_graph(graph)) == graph
