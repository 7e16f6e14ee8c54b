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
