"""The compiled OpInfo sweep: the ops issue 28 found refused ("no lowering for") now compile, fwd and bwd."""

from __future__ import annotations

import pytest


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "nn.functional.hardswish",
        "linalg.vector_norm",
        "slice_scatter",
        "as_strided_scatter",
        "nn.functional.interpolate.nearest",
    ],
)
def test_ops_torch_decomposes_compile_forward_and_backward_against_cpu(name: str) -> None:
    from trn_notebook.compat.compiled import run_compiled_op

    r = run_compiled_op(name, quick=True)
    assert r.forward.total == 1 and r.forward.passed == 1, r.forward.first_error
    assert r.backward.total == 1 and r.backward.passed == 1, r.backward.first_error


def test_compiled_summary_counts_entries_passing_eagerly_only() -> None:
    from trn_notebook.compat.compiled import CompiledResult
    from trn_notebook.compat.compiled_table import compiled_markdown, summarize_compiled
    from trn_notebook.compat.sweep import Tally

    ok = CompiledResult("a", Tally(2, 2), Tally(1, 1))
    bad = CompiledResult("b", Tally(1, 2, "LoweringError: the neuron compiler has no lowering for aten.x.default"))
    s = summarize_compiled([ok, bad, CompiledResult("c")])
    assert s.forward_entries == (1, 2) and s.backward_entries == (1, 1)
    assert s.reasons == (("forward: b: no lowering for aten.x.default", 1),)
    assert "| `b` | 1/2 | n/a |" in compiled_markdown([ok, bad], "cmd")


def test_channels_last_request_is_refused_with_torchneurons_documented_reason() -> None:
    import torch

    x = torch.randn(2, 3, 4, 4, device="neuron")
    with pytest.raises(RuntimeError, match="TorchNeuron rejects channels_last.*Drop memory_format"):
        x.contiguous(memory_format=torch.channels_last)
    moved = torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last).to("neuron")  # a move converts
    assert moved.is_contiguous()


@pytest.mark.slow  # one OpInfo entry compiled forward and backward in this process
def test_compat_cli_runs_the_compiled_sweep_and_writes_its_section(tmp_path, capsys, fresh_compiler) -> None:
    from trn_notebook.compat.__main__ import main

    out = tmp_path / "compiled.md"
    assert main(["--compiled", "--quick", "--ops", "polar", "--in-process", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "compiled forward:  1/1 entries = 100.00%" in printed
    assert "| `polar` | 1/1 |" in out.read_text()


def test_quick_compiled_sweep_passes_with_its_host_calls_and_refusal_counted_apart(fresh_compiler) -> None:
    from trn_notebook.compat.api import compiled_sweep
    from trn_notebook.compat.compiled_table import summarize_compiled

    results = compiled_sweep(quick=True, isolated=False)
    s = summarize_compiled(results)
    assert s.forward_entries[0] == s.forward_entries[1] >= 5, s.reasons
    assert s.backward_entries[0] == s.backward_entries[1] >= 3, s.reasons
    by_op = {r.op: r for r in results}
    assert by_op["linalg.inv"].host_calls == ["_linalg_check_errors", "linalg_inv_ex"]
    assert by_op["fft.rfft"].host_calls == ["_fft_r2c"] and by_op["cummax"].host_calls == ["cummax"]
    assert by_op["add"].host_calls == [] and by_op["special.i0e"].host_calls == []  # native, inside the graph
    assert by_op["nonzero"].refused == 1 and by_op["nonzero"].forward.total == 0  # refused, not counted
    assert s.refused == 1 and s.host_call_entries == 3


def test_compiled_section_is_spliced_into_the_eager_document_and_replaced_in_place() -> None:
    from trn_notebook.compat.compiled import CompiledResult
    from trn_notebook.compat.compiled_table import BEGIN, END, compiled_markdown, section_of, splice
    from trn_notebook.compat.sweep import Tally

    eager = "# Operator compatibility\n\n| op |\n"
    first = splice(eager, compiled_markdown([CompiledResult("a", Tally(1, 1), host_calls=["_fft_r2c"])], "cmd"))
    assert first.startswith(eager) and first.count(BEGIN) == 1 and first.rstrip().endswith(END)
    assert "| `a` | 1/1 | n/a | _fft_r2c |" in first and "`_fft_r2c`: 1" in first
    second = splice(first, compiled_markdown([CompiledResult("b", Tally(0, 1, "mismatch: x"))], "cmd"))
    assert second.startswith(eager) and second.count(BEGIN) == 1
    assert "`a`" not in second and "forward: b: mismatch vs CPU" in section_of(second)
