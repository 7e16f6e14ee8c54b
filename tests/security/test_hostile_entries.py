"""Cache entries that pass authentication but cannot run, special files, parser limits, and an interrupted compile.

Catalogue (issue 14):
* an entry that parses but cannot run (wrong constant type, wrong arity, declared type wrong,
  20,000-deep nested list) is discarded with a warning and recompiled; the next run hits the
  rewritten entry (Medium 8);
* parsing is linear time: a crafted line costs no more than a benign line of the same length (Medium 8);
* a FIFO or a link to ``/dev/zero`` in place of an entry neither blocks nor reads without end (Low 10);
* an interrupt during a compile leaves garbage collection on (High 3).
"""

from __future__ import annotations

import gc
import json
import os
import threading
import time
from pathlib import Path

import pytest

from tests.security.probe import compile_f
from trn_notebook.compiler import backend
from trn_notebook.compiler import disk_cache as cache
from trn_notebook.compiler.ir import IRError
from trn_notebook.compiler.text import MAX_DEPTH, parse_graph


def resign(d: Path, key: str, text: str) -> None:
    """Rewrite entry ``key`` with ``text``, validly signed by this user (a buggy writer of our own)."""
    record = json.loads((d / f"{key}.json").read_text())
    keep = {k: v for k, v in record.items() if k not in ("hmac", "created", "ir_sha256")}
    (d / f"{key}.ir").write_text(text)
    (d / f"{key}.json").write_text(json.dumps(cache.signed_record(key, text, keep)))


BROKEN = {
    "wrong-constant-type": lambda t: t.replace("mul(%arg0_1, 3)", "mul(%arg0_1, 'three')"),
    "wrong-arity": lambda t: t.replace("mul(%arg0_1, 3)", "mul(%arg0_1)"),
    "wrong-declared-shape": lambda t: t.replace("%v1: f32[4]", "%v1: f32[5]"),
    "deep-nesting": lambda t: t.replace("mul(%arg0_1, 3)", "mul(%arg0_1, " + "[" * 20_000 + "]" * 20_000 + ")"),
}


@pytest.mark.parametrize("damage", list(BROKEN), ids=list(BROKEN))
def test_an_authentic_entry_that_cannot_run_is_discarded_and_recompiled(sec_cache, damage):
    key = compile_f().graph_id
    text = (sec_cache / f"{key}.ir").read_text()
    broken = BROKEN[damage](text)
    assert broken != text
    resign(sec_cache, key, broken)
    with pytest.warns(cache.CacheCorruptWarning, match=f"{key}.*discarded"):
        assert compile_f().cache_result == "miss"
    assert compile_f().cache_result == "disk hit"  # the rewrite serves every later call


def test_nesting_beyond_the_limit_is_an_ir_error_not_a_recursion_error():
    deep = "graph g(%a0: f32[1]) {\n  %v0: f32[1] = reshape(%a0, " + "[" * 20_000 + "]" * 20_000 + ")\n"
    with pytest.raises(IRError, match=f"deeper than {MAX_DEPTH}"):
        parse_graph(deep + "  return (%v0)\n}\n")


def _parse_seconds(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        try:
            parse_graph(text)
        except (IRError, ValueError):
            pass
        best = min(best, time.perf_counter() - t0)
    return best


def test_a_crafted_line_parses_no_slower_than_a_benign_line_of_the_same_length():
    n = 2000
    head, tail = "graph g(%a0: f32[1]) {\n", "\n  return (%v0)\n}\n"
    crafted = "  %v0: f32[1] = relu(" + "%a0 = relu(" * n  # quadratic for a lazy regex
    benign = "  %v0: f32[1] = reshape(%a0, [" + ", ".join(["1"] * (len(crafted) // 3)) + "])"
    ratio = _parse_seconds(head + crafted + tail) / _parse_seconds(head + benign + tail)
    assert ratio < 3, f"crafted line parses {ratio:.1f}x slower than a benign one of the same length"


def _compile_in_thread() -> tuple[threading.Thread, list]:
    result: list = []

    def run() -> None:
        result.append(compile_f())

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout=120)
    return t, result


def test_a_fifo_in_place_of_an_entry_does_not_block_the_compile(sec_cache):
    key = compile_f().graph_id
    for suffix in (".json", ".ir"):
        (sec_cache / f"{key}{suffix}").unlink()
    os.mkfifo(sec_cache / f"{key}.json")
    with pytest.warns(cache.CacheCorruptWarning, match="not a regular file"):
        t, result = _compile_in_thread()
    assert not t.is_alive() and result[0].cache_result == "miss"


def test_a_link_to_dev_zero_is_not_read(sec_cache):
    key = compile_f().graph_id
    (sec_cache / f"{key}.ir").unlink()
    os.symlink("/dev/zero", sec_cache / f"{key}.ir")
    with pytest.warns(cache.CacheCorruptWarning, match="symbolic link"):
        t, result = _compile_in_thread()
    assert not t.is_alive() and result[0].cache_result == "miss"
    assert not (sec_cache / f"{key}.ir").is_symlink()


def test_an_oversized_entry_is_refused_by_size(sec_cache, monkeypatch):
    from trn_notebook.compiler import trust

    compile_f()
    monkeypatch.setattr(trust, "MAX_ENTRY_BYTES", 64)
    with pytest.warns(cache.CacheCorruptWarning, match="above the limit of 64"):
        assert compile_f().cache_result == "miss"


def test_an_interrupt_during_compile_leaves_garbage_collection_on(sec_cache, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(backend, "run_passes", interrupted)
    assert gc.isenabled()
    try:
        with pytest.raises(KeyboardInterrupt):
            compile_f()
        assert gc.isenabled()
    finally:
        gc.enable()
