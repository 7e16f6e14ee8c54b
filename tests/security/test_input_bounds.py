"""Inputs that can be huge are bounded before they are read or parsed, with the limit in the error:
traces (plain and .gz), notebooks and their cells, JSON nesting. And bad ones are clear errors."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trn_notebook import limits
from trn_notebook.migration import portcheck
from trn_notebook.migration.portcheck import PortCheckError, port_check
from trn_notebook.profiling import traceio
from trn_notebook.profiling.summary import why_slow
from trn_notebook.profiling.traceio import TraceFormatError

MiB = 1 << 20


def _gz_bomb(path, members: int) -> None:
    """A .gz of ``members`` members of 1 MiB of zeros each (about 1 KiB per member on disk)."""
    member = gzip.compress(b"\0" * MiB, compresslevel=9)
    with path.open("wb") as fh:
        for _ in range(members):
            fh.write(member)


def test_why_slow_on_a_gzip_bomb_stops_at_the_limit(tmp_path):
    # Probe: why_slow on a 3 MB .json.gz expanding to 3 GiB decompressed all of it (the kernel was killed).
    bomb = tmp_path / "trace.json.gz"
    _gz_bomb(bomb, 3000)
    assert bomb.stat().st_size < 4 * MiB
    with pytest.raises(
        TraceFormatError, match=r"expands to more than that: over the 268,435,456-byte limit.*MAX_TRACE"
    ):
        why_slow(bomb)  # the message says it stopped at the limit (no wall-time assertion: machines are shared)


def test_why_slow_on_an_oversized_trace_is_refused_unread(tmp_path):
    # Probe: a 500 MB trace was read whole. A sparse file: nothing is written to disk.
    big = tmp_path / "trace.json"
    with big.open("wb") as fh:
        fh.truncate(500 * MiB)
    with pytest.raises(TraceFormatError, match=r"is 524,288,000 bytes: over the 268,435,456-byte limit"):
        why_slow(big)


def test_deep_or_bomb_json_traces_are_refused_before_parsing(tmp_path, monkeypatch):
    # Probe (Low): why_slow on 200k-deep JSON raised a raw RecursionError.
    deep = tmp_path / "deep.json"
    deep.write_bytes(b"[" * 200_000 + b"]" * 200_000)
    with pytest.raises(TraceFormatError, match="nested 200,000 levels deep, over the limit of 64"):
        why_slow(deep)
    monkeypatch.setattr(traceio, "MAX_TRACE_VALUES", 1000)
    wide = tmp_path / "wide.json"
    wide.write_bytes(b'{"traceEvents": [' + b"[]," * 5000 + b"[]]}")
    with pytest.raises(TraceFormatError, match="JSON values, over the limit of 1,000"):
        why_slow(wide)


def test_json_shape_ignores_brackets_inside_strings():
    raw = json.dumps({"a": ["[[[", "{,:}", 'q"uote\\'], "b": {"c": 1}}).encode()
    values, depth = limits.json_shape(raw)
    assert depth == 2 and values >= 6


def test_gunzip_reads_multi_member_files_and_refuses_truncated_ones(tmp_path):
    path = tmp_path / "x.json.gz"
    path.write_bytes(gzip.compress(b'{"a": ') + gzip.compress(b"1}"))
    assert limits.read_limited(path, 100, "trace", "") == b'{"a": 1}'
    path.write_bytes(gzip.compress(b"x" * 1000)[:-12])
    with pytest.raises((EOFError, zlib.error)):
        limits.read_limited(path, 10_000, "trace", "")


def _notebook(path, cells) -> None:
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))


def test_port_check_refuses_a_huge_cell_with_the_limit(tmp_path):
    # Probe: port_check on a notebook with a 108 MiB cell (ast.parse of it was OOM-killed).
    nb = tmp_path / "big.ipynb"
    _notebook(nb, [{"cell_type": "code", "source": "x = 1\n" * (1 << 20), "metadata": {}}])  # 6 MiB
    with pytest.raises(PortCheckError, match=r"cell 0 has 6,291,456 characters, over the 4,194,304-character limit"):
        port_check(nb)


def test_port_check_refuses_an_oversized_file_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(portcheck, "MAX_FILE_BYTES", 1024)
    nb = tmp_path / "big.ipynb"
    _notebook(nb, [{"cell_type": "code", "source": "x = 1\n" * 1000, "metadata": {}}])
    with pytest.raises(PortCheckError, match="over the 1,024-byte limit"):
        port_check(nb)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"\xff\xfe{\x00", "not UTF-8"),
        (b"[1, 2]", "no 'cells' list"),
        (b'{"cells": [1, 2]}', "cell 0 of the notebook is not an object"),
        (b'{"cells": [{"cell_type": "code", "source": "x", "metadata": []}]}', None),
        (b"[" * 100_000, "nested"),
    ],
    ids=["not-utf8", "list", "cells-not-objects", "metadata-not-a-dict", "deep"],
)
def test_port_check_on_a_malformed_notebook_is_a_clear_error(tmp_path, content, match):
    # Probe (Low): non-UTF-8 / malformed notebooks gave raw UnicodeDecodeError / AttributeError.
    nb = tmp_path / "bad.ipynb"
    nb.write_bytes(content)
    if match is None:
        assert port_check(nb).findings == []
        return
    with pytest.raises(PortCheckError, match=match):
        port_check(nb)


def _depth(value) -> int:
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    return 0 if children is None else 1 + max((_depth(c) for c in children), default=0)


def _count(value) -> int:
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return 1 + sum(_count(c) for c in children)


_TEXT = st.text(alphabet=st.sampled_from('ab"\\[]{},: \n\u00e9'), max_size=8)
_JSON = st.recursive(
    st.none() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=_JSON, chunk=st.integers(1, 17), indent=st.sampled_from([None, 1]))
def test_json_shape_gives_the_true_depth_and_bounds_the_values_at_any_chunk_boundary(value, chunk, indent):
    # The chunked scan carries "inside a string" and backslash runs across chunks: cut them anywhere.
    raw = json.dumps(value, indent=indent, ensure_ascii=False).encode()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(limits, "_SCAN_CHUNK", chunk)
        values, depth = limits.json_shape(raw)
    assert depth == _depth(value)
    assert values >= _count(value)
