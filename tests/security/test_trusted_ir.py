"""A trusted bundle is data: its IR runs only our op set, never an arbitrary registered op with unchecked
geometry, and never replaces a graph you compiled yourself. Bundles are bounded before they are parsed."""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from pathlib import Path

import pytest
import torch

from tests.security.probe import X, compile_f, f
from trn_notebook import cache as user_cache
from trn_notebook.compiler import ops, trust
from trn_notebook.compiler.config import override


@pytest.fixture
def bundle(tmp_path, sec_cache) -> Path:
    compile_f()
    return Path(user_cache.export(tmp_path / "class.trncache").path)


@pytest.fixture
def other_user(tmp_path):
    trust._keys.clear()
    with override(cache_dir=str(tmp_path / "student-cache"), key_file=str(tmp_path / "student.key")):
        yield tmp_path / "student-cache"
    trust._keys.clear()


def _with_ir(path: Path, body: str) -> None:
    """Replace the bundle's one entry's IR body (keeping its signature line) and re-checksum it: a trusted sender."""
    data = json.loads(path.read_text())
    entry = data["entries"][0]
    head = entry["ir"].split("\n", 1)[0]
    entry["ir"] = f"{head}\n{body}\n}}\n"
    rest = {k: v for k, v in data.items() if k != "sha256"}
    data["sha256"] = hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    path.write_text(json.dumps(data))


READ_BEYOND = """  %v0: f32[65536] = custom_call('inductor._reinterpret_tensor.default', %arg0_1, [65536], [1], 0)
  return (%v0)"""
WRITE_BEYOND = """  %v0: f32[4] = custom_call('inductor._mm_plus_mm.default', %arg0_1, %arg0_1, %arg0_1, %arg0_1, %arg0_1)
  return (%v0)"""
AS_STRIDED_BEYOND = """  %v0: f32[65536] = as_strided(%arg0_1, [65536], [1], 0)
  return (%v0)"""


@pytest.mark.parametrize("body", [READ_BEYOND, WRITE_BEYOND, AS_STRIDED_BEYOND], ids=["reinterpret", "mm", "strided"])
def test_trusted_ir_cannot_reach_memory_outside_its_tensors(bundle, other_user, body):
    # Probe: a trusted bundle read 65,536 floats of host memory past a 4-float input (inductor._reinterpret_tensor)
    # and segfaulted the kernel (inductor._mm_plus_mm with an out-of-bounds output).
    _with_ir(bundle, body)
    with pytest.raises(user_cache.BundleError, match="entry 0 is unusable"):
        user_cache.import_(bundle, trust=True)
    assert compile_f().cache_result == "miss"  # compiled here, correct (checked inside)


@pytest.mark.parametrize("name", ["inductor._reinterpret_tensor.default", "aten.add.Tensor", "quantized.add.default"])
def test_custom_call_names_only_user_namespaces(name):
    with pytest.raises(KeyError, match="namespace|own IR ops"):
        ops.resolve_custom_op(name)


def test_a_trusted_bundle_never_replaces_a_graph_you_compiled(bundle, sec_cache):
    # Probe: a bundle carrying another IR for a key the user already compiled silently changed what f returned.
    _with_ir(bundle, "  %v0: f32[4] = mul(%arg0_1, 5)\n  return (%v0)")
    summary = user_cache.import_(bundle, trust=True)
    assert summary.already_present == 1 and summary.entries == 0
    assert compile_f().cache_result == "disk hit"
    torch.testing.assert_close(user_cache_f(), f(X))


def user_cache_f() -> torch.Tensor:
    import trn_notebook
    from trn_notebook.compiler import backend

    torch._dynamo.reset()
    backend.clear_memory_cache()
    return trn_notebook.compile(f)(X)


def test_an_untrusted_bomb_is_not_parsed(tmp_path, sec_cache):
    # Probe: a 120 MB JSON bomb with the default trust=False was parsed (OOM-killed in a 2 GiB limit).
    path = tmp_path / "bomb.trncache"
    n = 4_000_000
    path.write_bytes(b'{"format": "trn-notebook-cache-bundle", "entries": [' + b"[]," * n + b'[]], "sha256": "0"}')
    tracemalloc.start()
    try:
        with pytest.raises(user_cache.BundleError, match="trust=True"):
            user_cache.import_(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # read and hashed, never turned into 4 million lists (parsed, they alone would take over 200 MB)
    assert peak < 3 * path.stat().st_size, f"{peak:,} bytes allocated for a {path.stat().st_size:,}-byte bundle"


def test_a_trusted_bomb_is_refused_by_its_shape_before_parsing(tmp_path, sec_cache):
    path = tmp_path / "bomb.trncache"
    path.write_bytes(b'{"format": "trn-notebook-cache-bundle", "entries": [' + b"[]," * 4_000_000 + b"[]]}")
    with pytest.raises(user_cache.BundleError, match=r"JSON values.*limit"):
        user_cache.import_(path, trust=True)
    deep = tmp_path / "deep.trncache"
    deep.write_bytes(b'{"entries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    with pytest.raises(user_cache.BundleError, match="nested"):
        user_cache.import_(deep, trust=True)
