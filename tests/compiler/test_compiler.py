"""End to end: the neuron backend equals eager (forward, backward, training) and reports what it did."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import trn_notebook
from trn_notebook.compiler import compile_log, explain, progress, shape_log
from trn_notebook.compiler.config import override
from trn_notebook.device import clocks, placement_log
from trn_notebook.device import override as device_override

pytestmark = pytest.mark.usefixtures("fresh_compiler")


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 4))


def block() -> nn.Module:
    return nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)


def convnet() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(128, 10)
    )


MODELS = {"mlp": (mlp, (4, 16)), "transformer_block": (block, (2, 8, 32)), "convnet": (convnet, (2, 3, 8, 8))}


def run_eager_and_compiled(make, shape, device):
    torch.manual_seed(0)
    ref_model = make()
    model = make()
    model.load_state_dict(ref_model.state_dict())
    model = model.to(device)
    x = torch.randn(shape)
    ref = ref_model(x)
    ref.square().sum().backward()
    compiled = trn_notebook.compile(model)
    out = compiled(x.to(device))
    out.square().sum().backward()
    grads = [(p.grad.cpu(), q.grad) for p, q in zip(model.parameters(), ref_model.parameters())]
    return out, ref, grads


@pytest.mark.parametrize("device", ["neuron", "cpu"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_compiled_forward_and_backward_equal_eager(name, device):
    make, shape = MODELS[name]
    out, ref, grads = run_eager_and_compiled(make, shape, device)
    assert out.device.type == device
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-5)
    for got, want in grads:
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    kinds = [r.kind for r in compile_log.snapshot()]
    assert kinds == ["forward", "backward"]


def test_attention_is_compiled_to_the_fused_flash_kernel_forward_and_backward():
    out, ref, _ = run_eager_and_compiled(block, (2, 8, 32), "neuron")
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-5)
    passes = explain(compile_log.snapshot()[0].model_name).stages["passes"]
    assert "= sdpa_flash(" in passes and "= sdpa_flash_backward(" in passes and "bmm(" not in passes


def test_three_adamw_steps_on_the_device_match_cpu_eager_to_1e_5():
    torch.manual_seed(0)
    ref = mlp()
    model = mlp()
    model.load_state_dict(ref.state_dict())
    model = model.to("neuron")
    compiled = trn_notebook.compile(model)
    opt_ref = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = [(torch.randn(8, 16), torch.randn(8, 4)) for _ in range(3)]
    for x, y in data:
        for m, o, dev in ((ref, opt_ref, "cpu"), (compiled, opt, "neuron")):
            o.zero_grad()
            loss = nn.functional.mse_loss(m(x.to(dev)), y.to(dev))
            loss.backward()
            o.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-5)
    runs = {r.kind: r.runs for r in compile_log.snapshot()}
    assert runs == {"forward": 3, "backward": 3}


def test_each_graph_is_one_launch_on_the_clocks_and_one_placement_entry():
    compiled = trn_notebook.compile(mlp().to("neuron"))
    x = torch.randn(4, 16, device="neuron")
    compiled(x)  # compile
    before = clocks.snapshot().launches
    compiled(x)
    assert clocks.snapshot().launches - before == 1
    snap = placement_log.snapshot()
    name = "graph:" + compile_log.snapshot()[0].graph_name
    assert snap[name].category == "native" and snap[name].calls == 2
    assert snap[name].device_s == pytest.approx(2 * compile_log.snapshot()[0].modeled_device_s)


def test_compile_log_record_has_the_public_fields_and_counts_runs():
    compiled = trn_notebook.compile(mlp().to("neuron"), options={"model_name": "tiny", "opt_level": 3})
    x = torch.randn(4, 16, device="neuron")
    compiled(x).sum().backward()
    compiled(x)
    fw, bw = compile_log.snapshot()
    assert (fw.graph_name, fw.model_name, fw.kind) == ("tiny_forward_0", "tiny", "forward")
    assert bw.kind == "backward" and bw.graph_name == "tiny_backward_0"
    assert "f32[4,16]" in fw.input_signature and "f32[32,16]" in fw.input_signature
    assert set(fw.stage_us) == {"capture", "aot", "lower", "passes", "codegen", "cache_write"}
    assert fw.cache_result == "miss" and fw.has_collectives is False
    assert fw.effective_options == {"model_name": "effective", "opt_level": "accepted, no effect"}
    assert fw.runs == 2 and bw.runs == 1 and fw.warm_s > 0
    assert fw.compile_s == pytest.approx(sum(fw.stage_us.values()) / 1e6)
    assert len(fw.graph_id) == 32 and fw.ir_node_count > 0 and fw.modeled_peak_bytes > 0
    metrics = torch.neuron.get_dynamo_metrics()
    assert [m["graph_name"] for m in metrics] == ["tiny_forward_0", "tiny_backward_0"]
    assert {"graph_id", "graph_node_count", "has_collectives", "timestamp", "lowering_time_us"} <= set(metrics[0])
    torch.neuron.reset_dynamo_metrics()
    assert torch.neuron.get_dynamo_metrics() == [] and compile_log.snapshot() == []


def layer(x, w, b):
    return torch.relu(x @ w + b).sum()


def test_explain_shows_every_stage_with_shape_typed_values_and_source_lines():
    compiled = trn_notebook.compile(layer)
    w = torch.randn(16, 8, requires_grad=True)
    compiled(torch.randn(4, 16), w, torch.zeros(8, requires_grad=True)).backward()
    ex = explain(compiled)
    assert set(ex.stages) == {"fx", "aten_forward", "aten_backward", "ir", "passes", "schedule"}
    assert "f32[4,16]" in ex.stages["ir"] and "mm(" in ex.stages["ir"]
    assert "threshold_backward" in ex.stages["aten_backward"]
    assert "# after fuse" in ex.stages["passes"] and "# after plan_memory" in ex.stages["passes"]
    assert "TensorE" in ex.stages["schedule"]
    assert "  # " in ex.stages["ir"] and "test_compiler.py:" in ex.stages["ir"]
    assert "<details>" in ex._repr_html_() and "==== schedule ====" in str(ex)


def test_explain_with_example_arguments_compiles_first_and_unknown_callables_raise():
    def f(x):
        return torch.tanh(x) * 2

    ex = explain(f, torch.randn(3))
    assert "tanh" in ex.stages["ir"]
    with pytest.raises(ValueError, match="call the compiled function once"):
        explain(lambda x: x)


def test_progress_listener_sees_each_stage_then_done():
    seen = []

    def listen(stage, elapsed, name):
        seen.append((stage, name))

    progress.add_listener(listen)
    try:
        trn_notebook.compile(mlp())(torch.randn(4, 16))
    finally:
        progress.remove_listener(listen)
    stages = [s for s, _ in seen]
    assert stages[0] == "capture"
    assert stages.index("forward/backward") < stages.index("lower") < stages.index("passes")
    assert stages.index("codegen") < stages.index("cache write") < stages.index("done")
    assert seen[-1][0] == "done" and seen[-1][1].endswith("_forward_0")


def test_debug_dir_gets_the_same_artifacts_as_explain(tmp_path):
    with override(debug_dir=str(tmp_path / "dbg"), preserve_artifacts=True):
        trn_notebook.compile(mlp())(torch.randn(4, 16))
    (graph_dir,) = (tmp_path / "dbg").iterdir()
    names = {p.name for p in graph_dir.iterdir()}
    assert {"fx_graph.py", "ir_lowered.ir", "ir_final.ir", "schedule.txt"} <= names
    assert any(n.startswith("ir_") and n.endswith("_fuse.ir") for n in names)  # numbered in PASSES order


def test_shape_log_counts_signatures_and_dimension_lengths():
    compiled = trn_notebook.compile(lambda x: x * 2)
    for n in (3, 3, 5):
        compiled(torch.randn(2, n))
    (entry,) = shape_log.snapshot().values()
    assert entry.signatures == {"f32[2,3]": 2, "f32[2,5]": 1}
    assert entry.observed["x[1]"] == {3: 2, 5: 1}


def test_float64_inputs_compute_in_32_bits_with_a_warning_and_come_back_as_float64():
    def f(x):
        return (x * 3).sin()

    x = torch.randn(5, dtype=torch.float64)
    compiled = trn_notebook.compile(f)
    with device_override(allow_float64=True), pytest.warns(UserWarning, match="64-bit inputs"):
        out = compiled(x.to("neuron"))
    assert out.dtype == torch.float64
    torch.testing.assert_close(out.cpu(), f(x), rtol=1e-6, atol=1e-6)
    passes = explain(compiled).stages["passes"]
    assert "f64[5]) {" in passes and "= cast(%" in passes and "dtype=f32)" in passes and "dtype=f64)" in passes


def test_int64_token_ids_are_downcast_and_an_embedding_still_matches_eager():
    torch.manual_seed(0)
    emb = nn.Embedding(50, 8)
    ids = torch.randint(0, 50, (2, 6))
    ref = emb(ids)
    with pytest.warns(UserWarning, match="i64"):
        out = trn_notebook.compile(emb.to("neuron"))(ids.to("neuron"))
    torch.testing.assert_close(out.detach().cpu(), ref.detach())


def test_torch_compile_with_backend_neuron_is_explained_by_its_module_name():
    compiled = torch.compile(mlp(), backend="neuron")
    compiled(torch.randn(4, 16)).sum().backward()
    assert [r.model_name for r in compile_log.snapshot()] == ["Sequential", "Sequential"]
    assert "TensorE" in explain(compiled).stages["schedule"]
    assert list(shape_log.snapshot()["Sequential"].signatures) == ["f32[4,16]"]


def test_a_running_graph_reserves_its_planned_scratch_memory_on_the_device():
    from trn_notebook.device.memory.runtime import allocator

    def chain(x):
        return ((x * 2).exp() @ x).relu().sum(0)

    compiled = trn_notebook.compile(chain)
    x = torch.randn(256, 256, device="neuron")
    compiled(x)
    exe_scratch = compile_log.snapshot()[0].modeled_peak_bytes
    torch.neuron.reset_peak_memory_stats()
    base = allocator.counters.allocated
    compiled(x)
    assert allocator.counters.peak_allocated - base >= exe_scratch - 256 * 4 - 1024
    assert allocator.counters.allocated - base < exe_scratch  # released after the launch


@pytest.mark.parametrize("mask_kind", ["bool", "float_grad", "causal"])
def test_compiled_attention_masks_match_cpu(fresh_compiler, mask_kind):
    import torch.nn.functional as F

    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 4, 6, 8) for _ in range(3))
    mask = torch.rand(6, 6) > 0.4 if mask_kind == "bool" else torch.randn(1, 4, 6, 6)
    mask[..., 0] = True if mask_kind == "bool" else mask[..., 0]

    def f(q, k, v, m):
        if mask_kind == "causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    def run(fn, device):
        leaves = [t.detach().to(device).requires_grad_(True) for t in (q, k, v)]
        m = mask.detach().to(device)
        if mask_kind == "float_grad":
            m.requires_grad_(True)
        out = fn(*leaves, m)
        out.sum().backward()
        grads = [t.grad.cpu() for t in leaves] + ([m.grad.cpu()] if m.requires_grad else [])
        return [out.detach().cpu(), *grads]

    ref = run(f, "cpu")
    got = run(torch.compile(f, backend="neuron"), "neuron")
    for r, g in zip(ref, got, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-5)
