"""%%trn dryrun and %trn plan: the cell runs shape-only and shows DryRun's own rendering; bad input is a UsageError."""

from __future__ import annotations

import pytest

from trn_notebook.device.placement import placement_log

pytestmark = pytest.mark.usefixtures("clean")


@pytest.mark.slow  # the first dry run of the process pays its imports
def test_dryrun_cell_runs_shape_only_and_shows_the_dry_figures(ip, capsys) -> None:
    before = dict(placement_log.snapshot())
    result = ip.run_cell("%%trn dryrun --capacity 64MiB\nx = torch.randn(256, 256, device='neuron')\ny = x @ x\n")
    assert result.success
    out = capsys.readouterr().out
    assert out.startswith("DRY RUN") and "modeled" in out and "64.00 MiB" in out
    assert ip.user_ns["_trn_dryrun"].placement["aten::mm"].calls == 1
    assert ip.user_ns["y"].device.type == "neuron" and dict(placement_log.snapshot()) == before


@pytest.mark.slow
def test_dryrun_cell_over_capacity_says_it_does_not_fit(ip, capsys) -> None:
    cell = "z = torch.empty(4 << 20, dtype=torch.uint8, device='neuron')\nafter = z.sum()\n"
    result = ip.run_cell("%%trn dryrun --capacity 1MiB\n" + cell)
    assert result.success  # the default: over capacity is a finding, the cell runs to its end
    out = capsys.readouterr().out
    assert (
        "DOES NOT FIT" in out and "first over capacity in phase default at cell [" in out and "line 2" in out
    )  # the line as the cell shows it, under %%trn
    assert (
        "holds on ≥ 5 logical cores = ≥ 2 chips of trn2" in out
    )  # 4 MiB + the sum and ip.user_ns["after"].device.type == "neuron"
    result = ip.run_cell("%%trn dryrun --capacity 1MiB --strict\n" + cell)
    assert not result.success  # --strict: the cell's OutOfMemoryError propagates, the figures are shown first
    assert "DOES NOT FIT" in capsys.readouterr().out
    assert ip.run_cell("w = torch.ones(2)").success  # the session is usable


def test_bad_arguments_are_usage_errors(ip) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="not a size"):
        ip.run_cell_magic("trn", "dryrun --capacity lots", "pass")
    with pytest.raises(UsageError, match="not a name in the notebook"):
        ip.run_line_magic("trn", "plan no_such_config")
    ip.user_ns["cfg_for_plan"] = object()
    with pytest.raises(UsageError, match="transformers config or a model factory"):
        ip.run_line_magic("trn", "plan cfg_for_plan --layouts fsdp2")
    with pytest.raises(UsageError, match="bad layout"):
        ip.user_ns["factory_for_plan"] = lambda: None
        ip.run_line_magic("trn", "plan factory_for_plan --layouts ep2")


def test_plan_magic_takes_the_training_options(ip) -> None:
    from transformers import LlamaConfig

    ip.user_ns["tiny_cfg"] = LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip
    result = ip.run_line_magic(
        "trn", "plan tiny_cfg --layouts dp2+zero1 --batch 2 --seq 16 --global-batch 8 --master-weights --chip trn1 "
        "--execution graph"
    )  # fmt: skip
    row = result.table.loc["dp2+zero1"]
    assert row["microbatches"] == 2 and result.chip == "trn1" and result.execution == "graph"
    assert "global batch 8" in result.text()
