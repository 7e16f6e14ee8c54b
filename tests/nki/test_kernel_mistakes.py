"""A kernel's mistakes end in an NkiError / ValueError / TypeError that names the kernel or the argument, and
the session goes on. Probe (low): a kernel returning an int gave ``TypeError: 'int' object is not iterable``
from inside the simulator; unbounded recursion a bare RecursionError; ``nki_op`` edge cases were not all
refused, and registering a name twice said nothing."""

from __future__ import annotations

import pytest
import torch

from trn_notebook import nki
from trn_notebook.nki import language as nl
from trn_notebook.nki.bridge import nki_op


def _copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))
    return out


def _with_list_default(x, sizes=[1, 2]):  # noqa: B006 - the mistake under test
    return _copy(x)


def _forever(x):
    return _forever(x)


def test_a_kernel_returning_an_int_is_an_nki_error_naming_the_kernel():
    @nki.jit
    def three(x):
        return 3

    with pytest.raises(nki.NkiError, match=r"kernel three returned int 3; a kernel returns an HBM tensor"):
        three(torch.ones(4, 4))
    torch.testing.assert_close(nki.jit(_copy)(torch.ones(4, 4)), torch.ones(4, 4))


def test_unbounded_recursion_is_an_nki_error_naming_the_kernel():
    with pytest.raises(nki.NkiError, match=r"kernel _forever recursed without end") as err:
        nki.jit(_forever)(torch.ones(4, 4))
    assert err.value.__cause__ is None and err.value.__suppress_context__
    torch.testing.assert_close(nki.jit(_copy)(torch.ones(4, 4)), torch.ones(4, 4))


@pytest.mark.parametrize(
    ("name", "kwargs", "kernel", "error", "match"),
    [
        ("", {}, _copy, ValueError, r"must be 'namespace::op_name'.*got ''"),
        ("mylib::söftmax", {}, _copy, ValueError, r"non-ASCII characters"),
        ("mÿlib::softmax", {}, _copy, ValueError, r"non-ASCII characters"),
        (3, {}, _copy, TypeError, r"must be a string"),
        ("mylib::ld", {}, _with_list_default, TypeError, r"parameter 'sizes' has a default of type list"),
        ("mylib::mu", {"mutates_args": ("y",)}, _copy, ValueError, r"mutates_args names \['y'\]"),
        ("mylib::mu2", {"mutates_args": (1,)}, _copy, TypeError, r"mutates_args=\(1,\)"),
        ("mylib::om", {"outputs": -2}, _copy, ValueError, r"outputs=-2\): outputs is how many tensors"),
        ("mylib::os", {"outputs": "2"}, _copy, ValueError, r"outputs='2'\)"),
        ("mylib::ob", {"outputs": True}, _copy, ValueError, r"outputs=True\)"),
    ],
    ids=[
        "empty",
        "non-ascii-op",
        "non-ascii-ns",
        "not-a-string",
        "list-default",
        "unknown-mutates",
        "mutates-not-names",
        "outputs-negative",
        "outputs-str",
        "outputs-bool",
    ],
)
def test_nki_op_refuses_a_bad_registration_naming_the_argument(name, kwargs, kernel, error, match):
    with pytest.raises(error, match=match):
        nki_op(name, **kwargs)(kernel)


def test_registering_a_name_twice_returns_the_same_op_for_the_same_kernel_and_refuses_another():
    first = nki_op("trn_test_twice::copy")(_copy)
    assert nki_op("trn_test_twice::copy")(_copy) is first  # a cell re-run
    with pytest.raises(ValueError, match=r"already registered in this process with a different kernel.*_v2"):
        nki_op("trn_test_twice::copy")(_forever)
    torch.testing.assert_close(first(torch.ones(4, 4)), torch.ones(4, 4))


@pytest.mark.parametrize("device", ["cpu", "neuron"])
def test_outputs_that_do_not_match_the_kernel_name_the_argument(device):
    op = nki_op(f"trn_test_outputs::copy_{device}", outputs=2)(_copy)
    with pytest.raises(ValueError, match=r"outputs=2\): the kernel returned 1 tensor\(s\); set outputs=1"):
        op(torch.ones(4, 4, device=device))
    assert torch.ones(2, device=device).sum().item() == 2.0
