"""The model-level cost model: the shapes-only walk against analytic FLOPs/bytes, and the step budget."""

from __future__ import annotations

import pytest
import torch

from trn_notebook.compiler import compile_time
from trn_notebook.device import costmodel
from trn_notebook.fidelity import Layout, step_budget, walk
from trn_notebook.fidelity.fit import ALL_FITTED, FITTED, HELD_OUT, NOT_FITTABLE, split
from trn_notebook.fidelity.ledger import ROWS
from trn_notebook.fidelity.model import chip_of, host_sampling_s, kernels_budget, tp_collectives_s
from trn_notebook.fidelity.walk import ATTENTION, MATMUL

D, F, T = 256, 512, 64


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(D, F, bias=False, dtype=torch.bfloat16)
        self.down = torch.nn.Linear(F, D, bias=False, dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = x.view(1, T, 4, D // 4).transpose(1, 2)
        a = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
        return self.down(torch.relu(self.up(a.transpose(1, 2).reshape(T, D))))


_CACHE: dict[str, list] = {}


def _ops():
    """The tiny block's ops, walked once per session (the first FakeTensorMode use is slow)."""
    if "fwd" not in _CACHE:

        def run(model, count):
            with count("fwd"):
                model(torch.zeros(T, D, dtype=torch.bfloat16))

        _CACHE.update(walk(_Block, run))
    return _CACHE["fwd"]


@pytest.mark.slow
def test_walk_counts_matmul_flops_weights_and_attention():
    ops = _ops()
    mm = [o for o in ops if o.kind == MATMUL]
    assert sum(o.flops for o in mm) == 2 * (2 * T * D * F)  # two projections
    assert sum(o.weight_bytes for o in mm) == 2 * D * F * 2  # each weight read once (bf16)
    att = [o for o in ops if o.kind == ATTENTION]
    assert len(att) == 1 and att[0].flops == 4 * T * T * D / 2  # causal halves Q·Kᵀ and P·V
    assert att[0].kv_bytes == 2 * T * D * 2
    assert all(o.bytes == 0 for o in ops if o.kind not in (MATMUL, ATTENTION))  # fused: no HBM of their own


@pytest.mark.slow
def test_step_budget_uses_the_device_cost_function_and_names_its_parts():
    ops = _ops()
    chip = chip_of("trn2")
    b = kernels_budget(ops, chip, 1, kv_heads=4)
    expected = 0.0
    for o in ops:
        if o.kind in (MATMUL, ATTENTION):
            expected += max(costmodel.kernel_terms(chip, o.flops, o.bytes, o.dtype))
        else:  # fused into a neighbour: FLOPs only
            expected += costmodel.kernel_terms(chip, o.flops, 0.0, o.dtype)[0]
    assert b.compute_s + b.reads_s == pytest.approx(expected, rel=1e-3)
    one = step_budget(ops, Layout(tp=1), layers=1, hidden=D, kv_heads=4, tokens=T, vocab=1000, batch=1)
    eight = step_budget(ops, Layout(tp=8), layers=1, hidden=D, kv_heads=4, tokens=T, vocab=1000, batch=1)
    assert one.collectives_s == 0 and eight.collectives_s > 0
    assert eight.compute_s + eight.reads_s < one.compute_s + one.reads_s
    host = step_budget(
        ops, Layout(tp=1, sampling="host"), layers=1, hidden=D, kv_heads=4, tokens=T, vocab=1000, batch=1
    )
    assert host.host_s - one.host_s == pytest.approx(host_sampling_s(1, 1000))
    assert one.total_s == pytest.approx(one.compute_s + one.reads_s + one.host_s + one.launch_s)
    with pytest.raises(ValueError, match="serving stack"):
        step_budget(ops, Layout(stack="tgi"), layers=1, hidden=D, kv_heads=4, tokens=T, vocab=1, batch=1)


def test_collectives_use_the_alpha_beta_model_with_the_in_graph_floor():
    c = costmodel.get_cost_constants()
    small = tp_collectives_s(10, 16_384, 8, chip_of("trn2"))
    big = tp_collectives_s(10, 64 << 20, 8, chip_of("trn2"))
    assert small > 20 * c.collective_in_graph_s  # two per layer, each at least the in-graph floor
    assert big > small  # the β term grows with the bytes


def test_efficiencies_reach_the_eager_roofline():
    chip = chip_of("trn2")
    peak, bandwidth = costmodel.roofline_rates(chip, torch.bfloat16)
    c = costmodel.get_cost_constants()
    assert peak == pytest.approx(chip.device_peak_flops(torch.bfloat16) * c.compute_efficiency)
    assert bandwidth == pytest.approx(chip.device_hbm_bandwidth * c.memory_efficiency)


def test_ledger_rows_fit_split_and_constants():
    fit_rows, held = split()
    assert {r.id for r in held} == set(HELD_OUT) and len(held) >= 3
    assert not {r.id for r in fit_rows} & set(HELD_OUT)
    assert all(hasattr(costmodel.get_cost_constants(), n) for n in FITTED)
    names = [name for name, _, _ in ALL_FITTED]
    assert len(names) <= 5 and set(FITTED) <= set(names)  # three of the cost model + two of the compile model
    for name in ("NEURON_COMPILE_FIXED_S", "NEURON_COMPILE_S_PER_INSTRUCTION"):
        assert hasattr(compile_time, name) and name in names
    assert "serving_step_s" not in names and "vllm_step_s" not in names  # both derived from R6, not fitted
    keys = {(r.id, r.metric, r.note) for r in ROWS}
    assert set(NOT_FITTABLE) <= keys
    assert {"R1", "R3", "R6", "R11", "R12", "R13", "R17"} <= {r.id for r in ROWS}
    assert sum(1 for r in ROWS if r.id == "R11" and r.metric == "TPOT") == 5
    assert sum(1 for r in ROWS if r.id == "R13" and r.metric == "TTFT") == 3
