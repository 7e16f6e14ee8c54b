"""The persistent compile cache: hits across processes, safe writes, corrupt entries recovered, data only."""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest
import torch

import trn_notebook
from trn_notebook.compiler import backend, compile_log
from trn_notebook.compiler import disk_cache as cache
from trn_notebook.compiler.config import override
from trn_notebook.compiler.disk_cache import CacheCorruptWarning

MODULE_SRC = textwrap.dedent(
    """
    import torch

    def block(x, w):
        return torch.softmax(torch.relu(x @ w) * 0.5, -1).sum(0)
    """
)


@pytest.fixture
def cache_dir(tmp_path, fresh_device):
    torch._dynamo.reset()
    backend.clear_memory_cache()
    compile_log.reset()
    cache._reported.clear()
    d = tmp_path / "neff"
    with override(cache_dir=str(d), disable_cache=False):
        yield d
    torch._dynamo.reset()


def block(x, w):
    return torch.softmax(torch.relu(x @ w) * 0.5, -1).sum(0)


ARGS = (torch.randn(4, 8), torch.randn(8, 8))


def compile_again():
    """A fresh compile of ``block`` in this process that must consult the disk (memory cache cleared)."""
    torch._dynamo.reset()
    backend.clear_memory_cache()
    compile_log.reset()
    out = trn_notebook.compile(block)(*ARGS)
    torch.testing.assert_close(out, block(*ARGS))
    return compile_log.snapshot()[0]


def test_entry_is_json_plus_ir_text_with_a_checksum_in_a_private_directory(cache_dir):
    rec = compile_again()
    assert rec.cache_result == "miss"
    meta = json.loads((cache_dir / f"{rec.graph_id}.json").read_text())
    ir = (cache_dir / f"{rec.graph_id}.ir").read_text()
    assert meta["key"] == rec.graph_id and len(meta["ir_sha256"]) == 64
    assert ir.startswith("graph block_inference_0(") and "softmax(" in ir
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert compile_again().cache_result == "disk hit"
    (entry,) = cache.cache_entries()
    assert entry["key"] == rec.graph_id and entry["graph_name"] == "block_inference_0"
    assert cache.clear_cache() == 1 and cache.cache_entries() == []


def test_memory_hit_when_the_same_graph_compiles_twice_in_a_process(cache_dir):
    trn_notebook.compile(block)(*ARGS)
    torch._dynamo.reset()
    trn_notebook.compile(block)(*ARGS)
    assert [r.cache_result for r in compile_log.snapshot()] == ["miss", "memory hit"]


def test_disk_hit_skips_lowering_and_passes(cache_dir):
    compile_again()
    rec = compile_again()
    assert rec.cache_result == "disk hit"
    assert rec.stage_us["passes"] == 0.0 and rec.stage_us["cache_write"] == 0.0


INTEGER_GRAPHS = {  # torch gives int64 here; the 32-bit IR must say what the op really produces
    "cumsum": lambda mask, x: (mask.cumsum(-1) - 1) * 2 + x.shape[-1],  # Llama's position ids
    "sum": lambda mask, x: mask.sum(-1) + 1,
    "prod": lambda mask, x: mask.prod(-1) + 1,
    "bool_sum": lambda mask, x: (x > 0).sum(-1) + 1,
    "argmax": lambda mask, x: x.argmax(-1) + 1,  # greedy decoding
    "topk": lambda mask, x: x.topk(2, -1).indices + mask[:, :2],
    "sort": lambda mask, x: x.sort(-1).indices * 2,
    "max_dim": lambda mask, x: x.max(-1).indices + 1,
    # an int64 tensor indexed / gathered: the result has its (32-bit) dtype, only the index operand is widened
    "index_of_int64": lambda mask, x: mask[:, (mask[0] - 1)[:3]] * 3,  # the tiny Llama's causal mask
    "gather_of_int64": lambda mask, x: mask.gather(1, mask * 0) + 1,
    "index_select_of_int64": lambda mask, x: mask.index_select(1, mask[0] * 2 - 2) + 1,
}


@pytest.mark.parametrize("name", sorted(INTEGER_GRAPHS))
def test_a_graph_making_int64_loads_back_from_the_disk(cache_dir, name):
    """A disk hit checks the graph produces what its IR declares: a sum/cumsum/prod of integers says dtype=i32,
    an index output (argmax, topk, sort) stays int64 and is cast down after the op. Each was discarded as
    unusable on every load (so recompiled every time) before."""
    fn = INTEGER_GRAPHS[name]
    mask = torch.ones(1, 6, dtype=torch.long)
    x = torch.randn(1, 6)

    def once() -> str:
        torch._dynamo.reset()
        backend.clear_memory_cache()
        compile_log.reset()
        out = trn_notebook.compile(fn)(mask.to("neuron"), x.to("neuron"))
        torch.testing.assert_close(out.cpu(), fn(mask, x))
        return compile_log.snapshot()[0].cache_result

    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheCorruptWarning)
        warnings.filterwarnings("ignore", message=".*computes 64-bit inputs")
        assert once() == "miss"
        assert once() == "disk hit"


def _fp8_matmul(a: torch.Tensor) -> torch.Tensor:
    a8 = a.to(torch.float8_e4m3fn)
    one = torch.ones((), device=a.device)
    return torch._scaled_mm(a8, a8.t(), one, one, out_dtype=torch.bfloat16)


def _varlen(a: torch.Tensor) -> torch.Tensor:
    from torch.nn.attention.varlen import varlen_attn

    qkv = a.reshape(6, 2, 4)
    cu = torch.tensor([0, 2, 6], dtype=torch.int32, device=a.device)
    return varlen_attn(qkv, qkv, qkv, cu, cu, 4, 4)


def _varlen_reference(a: torch.Tensor) -> torch.Tensor:
    """Per-sequence SDPA on the CPU (PyTorch has no CPU kernel for varlen_attn itself)."""
    qkv = a.reshape(6, 2, 4).transpose(0, 1)
    parts = [torch.nn.functional.scaled_dot_product_attention(x, x, x) for x in (qkv[:, :2], qkv[:, 2:])]
    return torch.cat(parts, dim=1).transpose(0, 1)


@pytest.mark.parametrize("fn", [_fp8_matmul, _varlen], ids=["scaled_mm_float8", "varlen_attn_uint64_state"])
def test_graphs_with_the_2_34_native_ops_load_back_from_the_disk(cache_dir, fn):
    """FP8 operands (f8e4m3), varlen attention's uint64 RNG state (u64) and their IR ops print, parse and pass the
    disk cache's checks: the second compile is a disk hit with the same values."""
    a = torch.randn(6, 8)

    def once() -> str:
        torch._dynamo.reset()
        backend.clear_memory_cache()
        compile_log.reset()
        out = trn_notebook.compile(fn)(a.to("neuron"))
        want = fn(a) if fn is _fp8_matmul else _varlen_reference(a)
        torch.testing.assert_close(out.cpu().float(), want.float(), rtol=1e-5, atol=1e-5)
        return compile_log.snapshot()[0].cache_result

    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheCorruptWarning)
        assert once() == "miss"
        assert once() == "disk hit"


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda d, k: (d / f"{k}.ir").write_text((d / f"{k}.ir").read_text()[:50]), id="truncated-ir"),
        pytest.param(lambda d, k: (d / f"{k}.json").write_text("{not json"), id="corrupt-json"),
        pytest.param(
            lambda d, k: (d / f"{k}.ir").write_text((d / f"{k}.ir").read_text().replace("0.5", "5.0")),
            id="tampered-constant",
        ),
        pytest.param(lambda d, k: _tamper_with_valid_checksum(d, k), id="unknown-op-with-valid-checksum"),
        pytest.param(lambda d, k: (d / f"{k}.ir").unlink(), id="missing-ir"),
    ],
)
def test_damaged_entry_is_reported_once_discarded_and_recompiled(cache_dir, damage):
    key = compile_again().graph_id
    damage(cache_dir, key)
    with pytest.warns(CacheCorruptWarning, match=f"{key}.*discarded"):
        rec = compile_again()  # asserts the result is still right
    assert rec.cache_result == "miss"
    assert compile_again().cache_result == "disk hit"  # rewritten, valid again


def _tamper_with_valid_checksum(d: Path, key: str) -> None:
    import hashlib

    text = (d / f"{key}.ir").read_text().replace("= relu(", "= system(")
    meta = json.loads((d / f"{key}.json").read_text())
    meta["ir_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (d / f"{key}.ir").write_text(text)
    (d / f"{key}.json").write_text(json.dumps(meta))


def test_failed_compiles_are_never_cached(cache_dir):
    def bad(x):
        return torch.cummax(x, 0)[0]  # refused while the policy marks it unsupported

    trn_notebook.set_op_category("cummax", "unsupported", "for this test")
    try:
        with pytest.warns(UserWarning, match="eagerly"):
            trn_notebook.compile(bad, options={"fallback_execution": True})(torch.ones(3))
    finally:
        trn_notebook.device.policy.clear("cummax")
    assert cache.cache_entries() == []


def test_disabled_cache_writes_nothing(cache_dir):
    with override(disable_cache=True):
        assert compile_again().cache_result == "miss"
        assert compile_again().cache_result == "miss"
    assert not cache_dir.exists() or not any(cache_dir.iterdir())


def test_concurrent_writers_of_one_key_leave_one_valid_entry(cache_dir):
    rec = compile_again()
    graph, _meta = cache.load(rec.graph_id)
    errors = []

    def writer():
        try:
            for _ in range(20):
                cache.store(rec.graph_id, graph, {"graph_name": "w"})
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert cache.load(rec.graph_id)[0] == graph
    files = sorted(p.suffix for p in cache_dir.iterdir() if p.name != ".trn-notebook-cache")
    assert files == [".ir", ".json"]  # no temp files left


def test_cache_modules_never_unpickle_or_execute_stored_data():
    pkg = Path(trn_notebook.compiler.__file__).parent
    for name in ("disk_cache.py", "text.py", "codegen.py"):
        tree = ast.parse((pkg / name).read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not imported & {"pickle", "marshal", "shelve", "dill", "cloudpickle"}, name
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & {"eval", "exec", "compile", "__import__"}, name
        attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert "load" not in attrs or name == "disk_cache.py"  # disk_cache.py's load is json.loads of text


CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import torch, trn_notebook
    from trn_notebook.compiler import compile_log
    from blockmod import block
    torch.manual_seed(0)
    out = trn_notebook.compile(block)(torch.randn(4, 8), torch.randn(8, 8))
    rec = compile_log.snapshot()[0]
    print(json.dumps({"result": rec.cache_result, "key": rec.graph_id, "sum": float(out.sum())}))
    """
)


def run_child(tmp_path: Path, cache: Path) -> dict:
    env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=str(cache))
    env.pop("TORCH_NEURONX_DISABLE_NEFF_CACHE", None)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_second_process_hits_the_disk_cache(tmp_path):
    (tmp_path / "blockmod.py").write_text(MODULE_SRC)
    cache = tmp_path / "shared-cache"
    first = run_child(tmp_path, cache)
    second = run_child(tmp_path, cache)
    assert (first["result"], second["result"]) == ("miss", "disk hit")
    assert first["key"] == second["key"] and first["sum"] == pytest.approx(second["sum"])


@pytest.mark.slow
def test_two_processes_compiling_the_same_graph_at_once_both_succeed(tmp_path):
    (tmp_path / "blockmod.py").write_text(MODULE_SRC)
    cache = tmp_path / "shared-cache"
    env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=str(cache))
    procs = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0]["key"] == outs[1]["key"]
    assert run_child(tmp_path, cache)["result"] == "disk hit"


def test_default_cache_dir_is_per_user_and_created_private(tmp_path, monkeypatch, cache_dir):
    import platformdirs

    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda app: str(tmp_path / "home-cache" / app))
    with override(cache_dir=None):
        assert cache.cache_dir() == tmp_path / "home-cache" / "trn-notebook" / "neff_cache"
        assert compile_again().cache_result == "miss"
        assert stat.S_IMODE(cache.cache_dir().stat().st_mode) == 0o700


def test_a_world_writable_cache_dir_of_ours_is_refused_and_left_as_it_is(cache_dir):
    cache_dir.mkdir(parents=True)
    os.chmod(cache_dir, 0o1777)
    with pytest.warns(cache.CacheUntrustedWarning, match="writable by other users.*never changes the permissions"):
        assert compile_again().cache_result == "miss"
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o1777 and list(cache_dir.iterdir()) == []


def test_cache_results_are_counted_once_by_one_rule(cache_dir):
    from trn_notebook import facts
    from trn_notebook.compiler.compile_log import CompileSummary, cache_hit
    from trn_notebook.facts.status import status_payload
    from trn_notebook.session.compiled import CompileReport

    compile_again()  # a miss, stored
    torch._dynamo.reset()
    backend.clear_memory_cache()
    trn_notebook.compile(block)(*ARGS)  # from the disk
    trn_notebook.compile(block)(*ARGS)  # a new callable: dynamo traces again, the planned graph is in memory
    records = compile_log.snapshot()
    assert [r.cache_result for r in records] == ["miss", "disk hit", "memory hit"]
    assert [cache_hit(r.cache_result) for r in records] == [False, True, True] == [r.is_hit for r in records]
    summary = facts.current().compile_summary()
    assert summary == CompileSummary.of(records) and summary.by_result == {"miss": 1, "memory hit": 1, "disk hit": 1}
    assert (summary.hits, summary.misses, summary.known) == (2, 1, True)
    payload = status_payload()  # the status bar reads the same count
    assert (payload["cache_hits"], payload["cache_misses"]) == (2, 1)
    report = CompileReport("c", (), (), list(records), False, 0.0, 0.0, None)
    assert report.cache_result == "miss ×1, memory hit ×1, disk hit ×1"
    hardware = [{"graph_name": "g", "compile_s": 1.5}]  # TorchNeuron's metrics do not say hit or miss
    assert CompileSummary.of(hardware).known is False and cache_hit(None) is None
