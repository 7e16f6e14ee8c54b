"""Issue 27 item 2: compiled graphs raise the eager ScalarE valid-range warning (trainium only, once per site)."""

from __future__ import annotations

import inspect
import warnings

import torch

import trn_notebook
from trn_notebook.compiler.aten_decompositions import trace
from trn_notebook.compiler.lower import lower
from trn_notebook.compiler.passes import run_passes
from trn_notebook.compiler.text import parse_graph, print_graph
from trn_notebook.device.numerics.policy import NeuronNumericsWarning

N = "neuron"
LINE = inspect.currentframe().f_lineno + 4  # type: ignore[union-attr]  # the rsqrt line below


def norm(x: torch.Tensor) -> torch.Tensor:
    return torch.rsqrt(x) * 2.0 + torch.log(x + 1.0)


def _numerics_warnings(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in caught if issubclass(w.category, NeuronNumericsWarning)]


def test_compiled_out_of_range_rsqrt_warns_like_eager_once_per_site(fresh_compiler) -> None:
    x = torch.tensor([0.0, 1.0, 4.0]).to(N)
    compiled = torch.compile(norm, backend="neuron")
    with trn_notebook.numerics("trainium"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = compiled(x).cpu()
        compiled(x)  # the same graph, the same site: warned once
        compiled(torch.tensor([1.0, 2.0, 3.0]).to(N))  # in range: no warning
    msgs = _numerics_warnings(caught)
    assert len(msgs) == 1, [str(m.message) for m in msgs]
    text = str(msgs[0].message)
    assert "aten::rsqrt" in text and "[2^-87, 2^97]" in text and "1 of 3 inputs" in text
    assert msgs[0].filename == __file__ and msgs[0].lineno == LINE
    assert torch.equal(first, norm(x.cpu()))  # the CPU value is kept, as in eager
    with trn_notebook.numerics("trainium"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eager = norm(x)  # the same site, warned again under the new scope (each scope re-warns)
    assert [str(m.message) for m in _numerics_warnings(caught)] == [text]
    assert torch.equal(eager.cpu(), first)


def test_exact_mode_graphs_carry_no_check_and_never_warn(fresh_compiler) -> None:
    gm = trace(norm, torch.rand(8))
    exact, _ = run_passes(lower(gm, "norm"))
    assert "numerics_check" not in print_graph(exact)
    with trn_notebook.numerics("trainium"):
        checked, _ = run_passes(lower(gm, "norm"))
    text = print_graph(checked)
    assert text.count("numerics_check") == 2  # rsqrt and log; mul and add have no documented range
    assert print_graph(parse_graph(text)) == text  # survives the compile cache's text form
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.compile(norm, backend="neuron")(torch.zeros(3).to(N))
