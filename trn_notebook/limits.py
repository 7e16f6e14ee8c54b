"""Bounded reading of files that can be huge or hostile (bundles, traces, notebooks), before they are parsed.

* :func:`read_limited` reads a regular file (never a FIFO or device, never blocking) of at most
  ``max_bytes``; a ``.gz`` file is decompressed as a stream and stops at ``max_bytes`` of output
  (a 3 MB file that expands to 3 GiB is refused after ``max_bytes``, not held in memory).
* :func:`json_shape` counts the values and the nesting depth of JSON text without building it
  (strings are skipped by one regular expression, brackets counted with numpy), so a "JSON bomb"
  (millions of ``[]``, or 200,000 nested lists) is refused before ``json.loads`` turns it into
  gigabytes of Python objects or a ``RecursionError``.

Both raise :class:`LimitError` (a ``ValueError``) naming the limit and how to raise it.
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from pathlib import Path

import numpy as np
import numpy.typing as npt

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_CHUNK = 1 << 20


class LimitError(ValueError):
    """An input is larger (or deeper) than a limit; the message names the limit and how to raise it."""


def read_limited(path: str | Path, max_bytes: int, what: str, raise_hint: str) -> bytes:
    """The bytes of ``path`` (decompressed if it ends in ``.gz``), at most ``max_bytes``.

    Raises :class:`LimitError` past ``max_bytes`` (``raise_hint`` says how to allow more),
    ``ValueError`` for a file that is not a regular file, ``OSError`` when it cannot be opened,
    ``zlib.error``/``EOFError`` for a corrupt ``.gz``.
    """
    p = Path(path)
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{p} is not a regular file; pass the {what} file itself")
        if p.suffix != ".gz":
            if st.st_size > max_bytes:
                raise LimitError(_too_big(p, what, f"is {st.st_size:,} bytes", max_bytes, raise_hint))
            return fh.read(max_bytes + 1)
        return _gunzip_limited(fh, p, max_bytes, what, raise_hint)


def _gunzip_limited(fh: object, p: Path, max_bytes: int, what: str, raise_hint: str) -> bytes:
    read = fh.read  # type: ignore[attr-defined]
    out = bytearray()
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = b""
    while True:
        if not pending:
            pending = read(_CHUNK)
            if not pending:
                break
        if inflater.eof:  # the next member of a multi-member .gz
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += inflater.decompress(pending, max_bytes + 1 - len(out))
        if len(out) > max_bytes:
            raise LimitError(_too_big(p, what, "expands to more than that", max_bytes, raise_hint))
        pending = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
    if not inflater.eof:
        raise EOFError(f"{p} is a truncated .gz file")
    return bytes(out)


def _too_big(p: Path, what: str, size: str, max_bytes: int, raise_hint: str) -> str:
    return f"{p} {size}: over the {max_bytes:,}-byte limit for a {what}; {raise_hint}"


def json_shape(raw: bytes) -> tuple[int, int]:
    """``(values, depth)`` of JSON text ``raw`` without parsing it: an upper bound on the number of values
    ``json.loads`` would create (containers + separators + 1) and the deepest nesting of ``[``/``{``."""
    # annotated: numpy 2.5's stubs (what PyPI resolves for the 3.12 job) leave frombuffer's result type open
    stripped: npt.NDArray[np.uint8] = np.frombuffer(_STRING.sub(b"0", raw), dtype=np.uint8)
    opens = (stripped == ord("[")) | (stripped == ord("{"))
    closes = (stripped == ord("]")) | (stripped == ord("}"))
    seps = int(np.count_nonzero((stripped == ord(",")) | (stripped == ord(":"))))
    depth = int(np.cumsum(opens.astype(np.int32) - closes.astype(np.int32)).max(initial=0))
    return int(np.count_nonzero(opens)) + seps + 1, depth


def check_json_shape(raw: bytes, where: str, max_values: int, max_depth: int, raise_hint: str) -> None:
    """Raise :class:`LimitError` if ``raw`` holds more than ``max_values`` JSON values or nests deeper than
    ``max_depth`` (see :func:`json_shape`)."""
    values, depth = json_shape(raw)
    if depth > max_depth:
        raise LimitError(f"{where} is nested {depth:,} levels deep, over the limit of {max_depth}; {raise_hint}")
    if values > max_values:
        raise LimitError(f"{where} holds about {values:,} JSON values, over the limit of {max_values:,}; {raise_hint}")
