"""Tile operators as NKI writes them (issue 34 item 6): ``a + b`` is ``nl.add(a, b)``, and so on.

Each operator runs the ``nl`` function of its name (same instruction, same modeled cost), so the results
equal PyTorch's and the kernel report counts the same instructions; misuse gets an ``NkiError`` naming
the function to call instead.
"""

from __future__ import annotations

import operator

import pytest
import torch

import trn_notebook.nki as nki
import trn_notebook.nki.language as nl


@nki.jit
def tutorial_add(a_input, b_input):
    """NKI's first tutorial, in its operator style."""
    a_tile = nl.load(a_input)
    b_tile = nl.load(b_input)
    c_tile = a_tile + b_tile
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    nl.store(c_output, c_tile)
    return c_output


@nki.jit
def with_function(a_input, b_input):
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    nl.store(c_output, nl.add(nl.load(a_input), nl.load(b_input)))
    return c_output


def test_the_tutorial_add_with_plus_equals_torch_and_costs_what_nl_add_costs():
    a, b = torch.randn(128, 512), torch.randn(128, 512)
    torch.testing.assert_close(tutorial_add(a, b), a + b)
    ops = tutorial_add.last_report
    torch.testing.assert_close(with_function(a, b), a + b)
    fn = with_function.last_report
    assert ops.instructions == fn.instructions and ops.modeled_s == pytest.approx(fn.modeled_s)


def _binary_kernel(op, scalar=None, reverse=False):
    @nki.jit
    def kernel(a_input, b_input):
        a, b = nl.load(a_input), nl.load(b_input)
        c = op(a, b) if scalar is None else op(scalar, a) if reverse else op(a, scalar)
        out = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.shared_hbm)
        nl.store(out, c)
        return out

    return kernel


FLOAT_OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.lt, operator.ge, operator.gt]


@pytest.mark.parametrize("op", FLOAT_OPS, ids=lambda f: f.__name__)
def test_arithmetic_operators_equal_torch(op):
    a, b = torch.randn(128, 64), torch.rand(128, 64) + 0.5
    got = _binary_kernel(op)(a, b)
    torch.testing.assert_close(got, op(a, b).to(got.dtype), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv], ids=lambda f: f.__name__)
@pytest.mark.parametrize("reverse", [False, True], ids=["tile-op-scalar", "scalar-op-tile"])
def test_scalar_operands_on_either_side(op, reverse):
    a = torch.rand(128, 32) + 0.5
    got = _binary_kernel(op, 3.0, reverse)(a, a)
    torch.testing.assert_close(got, op(3.0, a) if reverse else op(a, 3.0), rtol=1e-5, atol=1e-6)


def test_integer_operators_and_negation():
    a = torch.randint(0, 1000, (128, 16), dtype=torch.int32)
    b = torch.randint(1, 7, (128, 16), dtype=torch.int32)
    for op in (operator.and_, operator.or_, operator.xor, operator.mod):
        torch.testing.assert_close(_binary_kernel(op)(a, b), op(a, b), msg=op.__name__)

    @nki.jit
    def neg(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, -nl.load(x))
        return out

    x = torch.randn(128, 8)
    torch.testing.assert_close(neg(x), -x)


def test_misuse_names_the_nl_function():
    @nki.jit
    def on_hbm(a, b):
        return a + b  # HBM tensors, never loaded

    with pytest.raises(nki.NkiError, match=r"nl\.add: .* is in HBM; load it into SBUF first"):
        on_hbm(torch.zeros(4, 4), torch.zeros(4, 4))

    @nki.jit
    def at(a, b):
        return nl.load(a) @ nl.load(b)

    with pytest.raises(nki.NkiError, match=r"nl\.matmul"):
        at(torch.zeros(4, 4), torch.zeros(4, 4))

    @nki.jit
    def branch(a):
        if nl.load(a) > 0:
            return a
        return a

    with pytest.raises(nki.NkiError, match="no truth value"):
        branch(torch.zeros(4, 4))
