"""Shareable cache bundles and warm-up (issue 19 item 3), held to the cache's trust rules (issue 14).

* a bundle made by one user and imported by another after ``trust=True`` serves disk hits with
  correct results in the importer's own cache, signed with the importer's key;
* without ``trust=True``, with a bad checksum, from another torch/compiler version, or with one
  bad entry, the bundle is refused whole and nothing is imported;
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.security.probe import compile_f
from trn_notebook import cache as user_cache
from trn_notebook.compiler import trust
from trn_notebook.compiler.config import override


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
    assert compile_f().cache_result == "disk hit"  # correct values checked inside
    (entry,) = user_cache.cache_entries()
    assert entry["authenticated"] and re.fullmatch(r"\w+_inference_\d+", entry["graph_name"])
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
        (
            lambda b: b.update(torch_version="2.1.0", compiler_version="trn-notebook-neuron-0.0.1"),
            True,
            r"made with torch 2\.1\.0 and compiler trn-notebook-neuron-0\.0\.1; this is torch 2\.13",
        ),
        (lambda b: b["entries"][0].update(ir="graph g(%a: f32[1]) {\n  return (%nope)\n}\n"), True, "entry 0"),
        (lambda b: b["entries"][0].update(key="../../etc/passwd"), True, "entry 0"),
    ],
    ids=["bad-checksum", "other-versions", "broken-entry", "path-key"],
)
def test_a_bad_bundle_is_refused_whole(bundle, other_user, change, rehash, match):
    rewrite(bundle, change, rehash)
    with pytest.raises(user_cache.BundleError, match=match):
        user_cache.import_(bundle, trust=True)
    assert not other_user.exists() or user_cache.cache_entries() == []
    assert compile_f().cache_result == "miss"


def _softmax_kernel_op():
    import torch

    from trn_notebook.nki import nki_op
    from trn_notebook.nki.kernels import softmax_kernel

    if not hasattr(torch.ops.bundletest, "softmax"):
        nki_op("bundletest::softmax")(softmax_kernel)
    return torch.ops.bundletest.softmax


def _compile_kernel_graph() -> str:
    """Compile a function calling a custom tile kernel into the cache; its graph name."""
    import torch

    import trn_notebook
    from trn_notebook.compiler import compile_log

    op = _softmax_kernel_op()

    def with_kernel(x):
        return op(x) * 2

    x = torch.randn(128, 64)
    with torch.no_grad():
        out = trn_notebook.compile(with_kernel)(x.to("neuron"))
    torch.testing.assert_close(out.cpu(), torch.softmax(x, -1) * 2, rtol=1e-5, atol=1e-5)
    return compile_log.snapshot()[-1].graph_name


def test_a_graph_calling_a_custom_kernel_is_left_out_with_a_warning_and_the_rest_imports(
    tmp_path, sec_cache, other_user
):
    # Issue 34 item 5: export() included an nki_op graph silently, and import_ then refused the whole bundle
    # in a fresh process ("kernel_call: no kernel 'demo::add' is registered ... nothing was imported").
    with override(cache_dir=str(sec_cache), key_file=str(tmp_path / "config" / "cache-hmac.key")):
        compile_f()
        graph = _compile_kernel_graph()
        assert len(user_cache.cache_entries()) == 2
        with pytest.warns(user_cache.BundleWarning, match=rf"graph '{graph}' is left out.*bundletest::softmax"):
            summary = user_cache.export(tmp_path / "class.trncache")
        kernel_ir = next(
            (sec_cache / f"{e['key']}.ir").read_text() for e in user_cache.cache_entries() if e["graph_name"] == graph
        )
    assert summary.entries == 1 and summary.left_out == (graph,) and graph in str(summary)
    assert "kernel_call" not in Path(summary.path).read_text()
    assert user_cache.import_(summary.path, trust=True).entries == 1
    assert compile_f().cache_result == "disk hit"

    # a bundle that carries such a graph anyway (made before this rule): that entry is skipped by name
    def add_kernel_entry(b):
        b["entries"].append({"key": "0" * 32, "meta": {"graph_name": graph}, "ir": kernel_ir})

    rewrite(Path(summary.path), add_kernel_entry)
    trust._keys.clear()
    with override(cache_dir=str(tmp_path / "third"), key_file=str(tmp_path / "third.key")):
        with pytest.warns(user_cache.BundleWarning, match=rf"graph '{graph}' is not imported.*bundletest::softmax"):
            again = user_cache.import_(summary.path, trust=True)
        assert again.entries == 1 and again.left_out == (graph,)
        assert [e["graph_name"] for e in user_cache.cache_entries()] != [graph]


def _two_entries_second_with_nan(b) -> None:
    first = b["entries"][0]
    second = json.loads(json.dumps(first))
    second["key"] = "f" * 32
    second["meta"]["graph_name"] = float("nan")
    b["entries"].append(second)


def test_an_import_is_all_or_nothing_when_a_later_entry_cannot_be_written(bundle, other_user):
    # Probe (low): a 2-entry bundle whose second entry's metadata held a NaN raised "Out of range float
    # values are not JSON compliant" after writing the first entry's files.
    rewrite(bundle, _two_entries_second_with_nan)
    with pytest.raises(user_cache.BundleError, match=r"entry 1 has unusable metadata.*nothing was imported"):
        user_cache.import_(bundle, trust=True)
    assert not other_user.exists() or sorted(p.name for p in other_user.iterdir() if not p.name.startswith(".")) == []
    assert compile_f().cache_result == "miss"
