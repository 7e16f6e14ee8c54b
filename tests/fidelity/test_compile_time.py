"""The modeled Neuron compile time: instruction counts, the record it is read from, where it is shown."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.compiler import compile_time as ct
from trn_notebook.display.format import COMPILE_MEASURED_LABEL, COMPILE_MODELED_LABEL, fmt_compile


def test_a_matmul_issues_one_instruction_per_tile_and_a_decode_matmul_still_tiles_its_weights():
    m, k, n = 2048, 4096, 4096
    flops, nbytes = 2.0 * m * k * n, 2.0 * (m * k + k * n + m * n)
    assert ct.kernel_instructions(flops, nbytes) == pytest.approx(m / 128 * k / 128 * n / 512)
    decode = ct.kernel_instructions(2.0 * k * n, 2.0 * (k + k * n + n))
    assert decode == pytest.approx((k + k * n + n) / (128 * 512))  # weights bound, not FLOPs
    assert ct.kernel_instructions(flops, nbytes, tp=8) == pytest.approx(m / 128 * k / 128 * n / 512 / 8)
    assert ct.kernel_instructions(10.0, 10.0) == 1.0  # every kernel is at least one instruction
    with pytest.raises(ValueError):
        ct.kernel_instructions(-1.0, 0.0)
    with pytest.raises(ValueError):
        ct.kernel_instructions(1.0, 1.0, tp=0)


def test_the_modeled_time_is_a_fixed_part_per_graph_plus_a_part_per_instruction():
    assert ct.modeled_compile_s(1e6, 2) == pytest.approx(
        2 * ct.NEURON_COMPILE_FIXED_S + 1e6 * ct.NEURON_COMPILE_S_PER_INSTRUCTION
    )
    assert ct.record_compile_s({"graph_name": "g"}) is None  # hardware metrics carry no count
    assert ct.record_compile_s({"neuron_instructions": 10.0}) == pytest.approx(ct.modeled_compile_s(10.0, 1))
    assert ct.records_compile_s([{}, {"neuron_instructions": 2.0}]) == pytest.approx(ct.modeled_compile_s(2.0, 1))
    assert ct.records_compile_s([{"neuron_instructions": 1.0}] * 3) == pytest.approx(ct.modeled_compile_s(3.0, 3))
    assert ct.records_compile_s([{}]) is None
    with pytest.raises(ValueError):
        ct.modeled_compile_s(1.0, -1)


def test_a_one_op_graph_costs_seconds_inside_the_published_range_of_small_graphs():
    # Issue 58: a few-instruction graph modeled at 1.3 ms taught the bucket tuner the wrong trade-off.
    low, high = ct.SMALL_GRAPH_RANGE_S
    one_op = ct.modeled_compile_s(1.0, 1)
    assert one_op >= 5.0 and low <= one_op <= high


def test_two_rows_determine_the_two_constants_and_rows_that_cannot_are_refused():
    fixed, rate = ct.fit_two_rows((1, 18_810, 20.0), (2, 611_521, 234.0))
    assert fixed + 18_810 * rate == pytest.approx(20.0) and 2 * fixed + 611_521 * rate == pytest.approx(234.0)
    assert fixed == pytest.approx(ct.NEURON_COMPILE_FIXED_S, abs=0.05)  # the committed constants are this fit
    assert rate == pytest.approx(ct.NEURON_COMPILE_S_PER_INSTRUCTION, rel=0.01)
    with pytest.raises(ValueError, match="same instructions per graph"):
        ct.fit_two_rows((1, 100, 10.0), (2, 200, 30.0))
    with pytest.raises(ValueError, match="negative"):
        ct.fit_two_rows((1, 100, 50.0), (1, 200, 10.0))


def test_fmt_compile_labels_both_figures_and_shows_missing_as_na():
    text = fmt_compile(1.25, 234.0)
    assert text == f"{COMPILE_MEASURED_LABEL} 1.250 s · {COMPILE_MODELED_LABEL} 3.9 min"
    assert fmt_compile(0.5, None).endswith(f"{COMPILE_MODELED_LABEL} n/a")


@pytest.mark.slow  # a real compile through dynamo: 3.5-4.6 s at load 8
def test_a_compiled_graph_records_its_instructions_and_every_compile_view_shows_both_figures(fresh_compiler):
    from trn_notebook.compiler import compile_log, explain
    from trn_notebook.compiler.buckets import WarmupSummary
    from trn_notebook.migration.render import report

    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256)).to("neuron")
    f = torch.compile(m, backend="neuron")
    f(torch.randn(256, 256, device="neuron"))
    rec = compile_log.snapshot()[-1]
    n = rec.extra["neuron_instructions"]
    assert n >= 2 * 256 * 256 * 512 * 2 / ct.TILE_FLOPS  # both matmuls' tiles at least
    summary = compile_log.compile_log.summary()
    assert summary.modeled_neuron_s == pytest.approx(ct.records_compile_s(r for r in compile_log.snapshot()))
    assert COMPILE_MODELED_LABEL in explain(f).stages["schedule"]
    assert COMPILE_MODELED_LABEL in str(WarmupSummary("m", "p", (1,), 1, modeled_neuron_s=summary.modeled_neuron_s))
    assert COMPILE_MODELED_LABEL in report().rows()[4][1]
