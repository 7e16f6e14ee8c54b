"""Shareable cache bundles and warm-up (issue 19 item 3), held to the cache's trust rules (issue 14).

* a bundle made by one user and imported by another after ``trust=True`` serves disk hits with
  correct results in the importer's own cache, signed with the importer's key;
* without ``trust=True``, with a bad checksum, from another torch/compiler version, or with one
  bad entry, the bundle is refused whole and nothing is imported;
* ``warmup`` compiles every bucket once; afterwards calls of any length compile nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

import trn_notebook
from trn_notebook import cache as user_cache
from trn_notebook.compiler import backend, bucketed, compile_log, trust
from trn_notebook.compiler.config import override

X = torch.arange(4.0)


def f(x: torch.Tensor) -> torch.Tensor:
    return 3 * x + 1


def compile_f() -> dict:
    torch._dynamo.reset()
    backend.clear_memory_cache()
    compile_log.reset()
    out = trn_notebook.compile(f)(X)
    torch.testing.assert_close(out, f(X))
    return compile_log.snapshot()[0]


@pytest.fixture
def bundle(tmp_path, sec_cache) -> Path:
    compile_f()
    summary = user_cache.export(tmp_path / "class.trncache")
    assert summary.entries == 1 and len(summary.sha256) == 64
    return Path(summary.path)


@pytest.fixture
def other_user(tmp_path):
    """Another user's cache directory and key (not created yet)."""
    trust._keys.clear()
    with override(cache_dir=str(tmp_path / "student-cache"), key_file=str(tmp_path / "student.key")):
        yield tmp_path / "student-cache"
    trust._keys.clear()


def rewrite(path: Path, change, rehash: bool = True) -> None:
    data = json.loads(path.read_text())
    change(data)
    if rehash:
        body = {k: v for k, v in data.items() if k != "sha256"}
        data["sha256"] = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    path.write_text(json.dumps(data))


def test_a_trusted_bundle_serves_disk_hits_in_another_users_cache(bundle, other_user):
    summary = user_cache.import_(bundle, trust=True)
    assert summary.entries == 1 and summary.already_present == 0
    assert compile_f()["cache_result"] == "disk hit"  # correct values checked inside
    (entry,) = user_cache.cache_entries()
    assert entry["authenticated"] and entry["graph_name"] == "f_inference_0"
    assert json.loads(bundle.read_text())["sha256"] == summary.sha256  # the bundle was only read


def test_import_needs_an_explicit_choice_to_trust(bundle, other_user):
    sha = json.loads(bundle.read_text())["sha256"]
    with pytest.raises(user_cache.BundleError, match=f"means trusting.*{sha}.*trust=True"):
        user_cache.import_(bundle)
    assert not other_user.exists()


@pytest.mark.parametrize(
    ("change", "rehash", "match"),
    [
        (lambda b: b["entries"][0].update(ir=b["entries"][0]["ir"].replace(", 3)", ", -100)")), False, "checksum"),
        (lambda b: b.update(torch_version="2.1.0"), True, r"made with torch 2\.1\.0 .*this is torch 2\.13"),
        (lambda b: b.update(compiler_version="trn-notebook-neuron-0.0.1"), True, "compiler trn-notebook-neuron-0.0.1"),
        (lambda b: b["entries"][0].update(ir="graph g(%a: f32[1]) {\n  return (%nope)\n}\n"), True, "entry 0"),
        (lambda b: b["entries"][0].update(key="../../etc/passwd"), True, "entry 0"),
    ],
    ids=["bad-checksum", "other-torch", "other-compiler", "broken-entry", "path-key"],
)
def test_a_bad_bundle_is_refused_whole(bundle, other_user, change, rehash, match):
    rewrite(bundle, change, rehash)
    with pytest.raises(user_cache.BundleError, match=match):
        user_cache.import_(bundle, trust=True)
    assert not other_user.exists() or user_cache.cache_entries() == []
    assert compile_f()["cache_result"] == "miss"


def test_warmup_compiles_every_bucket_then_nothing_compiles(sec_cache):
    def head(input_ids: torch.Tensor) -> torch.Tensor:
        return (input_ids.float() * 2).sin() + 1  # position-wise: padding does not change real positions

    torch._dynamo.reset()
    compile_log.reset()
    runner = bucketed(head, dims={"input_ids": 1}, policy="pow2:4-64")
    with pytest.raises(ValueError, match="needs example inputs"):
        user_cache.warmup(runner, progress=False)
    summary = user_cache.warmup(runner, torch.ones(1, 5, dtype=torch.long), progress=False)
    assert summary.buckets == (4, 8, 16, 32, 64) and summary.graphs == 5
    assert summary.results == {"miss": 5} and summary.cache_bytes > 0 and summary.compile_s > 0
    before = len(compile_log.snapshot())
    for n in (1, 3, 7, 20, 33, 64):
        x = torch.randint(0, 9, (1, n))
        torch.testing.assert_close(runner(x), head(x))
    assert len(compile_log.snapshot()) == before  # 0 compiles in the timed loop
    with pytest.raises(TypeError, match="needs a bucketed callable"):
        user_cache.warmup(head)
