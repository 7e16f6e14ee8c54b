"""The op registry: one record per op, read by placement, dispatch, cost model, autocast and compiler."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trn_notebook.device import placement_log
from trn_notebook.device.ops.op_table import RECORDS
from trn_notebook.device.ops.policy import registry
from trn_notebook.device.ops.registry import OpRecord, OpRegistry, matmul_flops, op

N = "neuron"


def test_every_op_is_written_once_and_every_ir_op_has_one_defining_record():
    keys = [r.key for r in RECORDS]
    assert len(keys) == len(set(keys))
    with pytest.raises(ValueError, match="registered twice"):
        OpRegistry([op("mm"), op("mm")])
    defining: dict[str, list[str]] = {}
    for r in RECORDS:
        if r.kind is not None:
            for _, ir_name in r.lower:
                defining.setdefault(ir_name, []).append(r.key)
    assert all(len(set(v)) == 1 for v in defining.values()), defining
    from trn_notebook.compiler import ops as ir_ops

    assert set(ir_ops.OPS) - ir_ops.IR_ONLY == set(defining)


def test_non_core_ir_ops_are_exactly_the_decomposition_table():
    from trn_notebook.compiler.decompositions import DECOMPOSITIONS
    from trn_notebook.compiler.ops import OPS

    assert {name for name, d in OPS.items() if not d.core} == set(DECOMPOSITIONS)


def test_eager_and_compiled_cost_read_the_same_record(fresh_compiler):
    from trn_notebook.compiler.ops import OPS
    from trn_notebook.device import costmodel

    a, b = torch.ones(8, 32), torch.ones(32, 16)
    eager = costmodel.estimate_flops("mm", [a, b], [a @ b])
    assert eager == matmul_flops([(8, 32), (32, 16)], 8 * 16) == 2 * 8 * 16 * 32
    assert OPS["mm"].flops is registry.get("mm").flops


def test_can_run_here_checker_names_dtype_and_layout():
    mm = registry.rule("mm")
    assert mm.can_run(torch.float32) is None
    assert "complex64" in mm.can_run(torch.complex64)
    assert "contiguous" in mm.can_run(torch.float32, torch.channels_last)


def test_adding_an_op_is_one_record_that_dispatch_reads(fresh_device):
    """A record restricted to float32 makes bfloat16 calls fall back, with no other edit."""
    original = registry.get("exp")
    assert original is not None
    narrowed = dataclasses.replace(original, dtypes=frozenset({torch.float32}))
    registry.register(narrowed, replace=True)
    try:
        x = torch.ones(3, dtype=torch.bfloat16, device=N)
        with pytest.warns(UserWarning):
            y = x.exp()
        assert placement_log.snapshot()["exp"].category == "cpu_fallback"
        torch.testing.assert_close(y.cpu(), torch.ones(3, dtype=torch.bfloat16).exp())
        torch.ones(3, device=N).exp()
        assert placement_log.snapshot()["exp"].category == "native"
    finally:
        registry.register(original, replace=True)


def test_a_new_record_without_category_derives_it_from_tags():
    reg = OpRegistry([OpRecord("sin")])
    assert reg.rule("sin", torch.ops.aten.sin.default).category == "native"
    assert reg.rule("frobnicate").category == "cpu_fallback"
    assert reg.rule("view", torch.ops.aten.view.default).category == "host_only"


def test_autocast_classes_come_from_records():
    lower = {r.name for r in RECORDS if r.autocast == "lower"}
    assert {"mm", "linear", "conv2d"} <= lower
    with torch.autocast("neuron", dtype=torch.bfloat16):
        a = torch.ones(4, 4, device=N)
        assert (a @ a).dtype == torch.bfloat16
        assert torch.softmax(a, -1).dtype == torch.float32


def test_host_cost_of_a_fallback_is_a_field_of_its_record():
    from trn_notebook.device import costmodel
    from trn_notebook.device.ops.registry import cubic_flops, sort_flops

    assert registry.get("sort").host_flops is sort_flops and registry.get("linalg_qr").host_flops is cubic_flops
    assert registry.rule("argsort").host_flops is sort_flops  # a composite's record: category still from tags
    x, m = torch.empty(4, 8), torch.empty(3, 5, 5)
    assert costmodel.host_flops("sort", [x], [x]) == 32 * 3.0  # n·log2(8) per row
    assert costmodel.host_flops("linalg_inv_ex", [m], [m]) == 2.0 * 3 * 5 * 5 * 5
    assert costmodel.host_flops("add", [x, x], [x]) == 64.0  # no host cost function: the device estimate
    assert not hasattr(costmodel, "_SORTS") and not hasattr(costmodel, "_CUBIC")
