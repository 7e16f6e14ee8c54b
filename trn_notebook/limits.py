"""Bounded reading of files that can be huge or hostile (bundles, traces, notebooks), before they are parsed.

* :func:`read_limited` reads a regular file (never a FIFO or device, never blocking) of at most
  ``max_bytes``; a ``.gz`` file is decompressed as a stream and stops at ``max_bytes`` of output
  (a 3 MB file that expands to 3 GiB is refused after ``max_bytes``, not held in memory).
* :func:`json_shape` counts the values and the nesting depth of JSON text without building it
  (a chunked numpy scan that skips strings, in a few MiB whatever the size), so a "JSON bomb"
  (millions of ``[]``, or 200,000 nested lists) is refused before ``json.loads`` turns it into
  gigabytes of Python objects or a ``RecursionError``.

Both raise :class:`LimitError` (a ``ValueError``) naming the limit and how to raise it.
"""

from __future__ import annotations

import os
import stat
import zlib
from pathlib import Path

import numpy as np
import numpy.typing as npt

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
    if not stat.S_ISREG(os.stat(p).st_mode):  # a FIFO or device is refused before it is opened
        raise ValueError(f"{p} is not a regular file (a FIFO, device or directory); pass the {what} file itself")
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{p} is not a regular file; pass the {what} file itself")
        if p.suffix != ".gz":
            if st.st_size > max_bytes:
                raise LimitError(_too_big(p, what, f"is {st.st_size:,} bytes", max_bytes, raise_hint))
            # read what fstat saw (+1 to notice growth), never a max_bytes buffer: read(n) allocates n up front
            data = fh.read(st.st_size + 1)
            if len(data) > max_bytes:
                raise LimitError(
                    _too_big(p, what, f"grew to over {max_bytes:,} bytes while read", max_bytes, raise_hint)
                )
            return data
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


_SCAN_CHUNK = 1 << 18  # bytes per step of json_shape: bounds its temporaries to a few MiB
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


def json_shape(raw: bytes) -> tuple[int, int]:
    """``(values, depth)`` of JSON text ``raw`` without parsing it: an upper bound on the number of values
    ``json.loads`` would create (containers + separators + 1) and the deepest nesting of ``[``/``{``.

    A chunked byte scan: quotes not escaped by an odd run of backslashes toggle "inside a string", and
    only brackets and separators outside strings count. Memory stays a few MiB whatever the size of ``raw``
    (no copy of it, no per-byte array of it), and it costs a fraction of ``json.loads``.
    """
    values, depth, deepest = 1, 0, 0
    in_string, backslashes = 0, 0  # carried from one chunk to the next
    view = memoryview(raw)
    for start in range(0, len(raw), _SCAN_CHUNK):
        b: npt.NDArray[np.uint8] = np.frombuffer(view[start : start + _SCAN_CHUNK], dtype=np.uint8)
        quotes = b == _QUOTE
        slash = b == _BACKSLASH
        if backslashes or slash.any():  # escapes only matter where there are backslashes
            position: npt.NDArray[np.int32] = np.arange(len(b), dtype=np.int32)
            last_other = np.where(slash, np.int32(-1), position)
            np.maximum.accumulate(last_other, out=last_other)
            run = position - last_other  # backslashes ending at each byte (inclusive)
            run[last_other < 0] += backslashes  # a run that began in the previous chunk
            quotes[0] &= backslashes % 2 == 0
            quotes[1:] &= (run[:-1] % 2) == 0
            backslashes = int(run[-1]) if slash[-1] else 0
        if in_string or quotes.any():
            toggles: np.ndarray = np.cumsum(quotes, dtype=np.int32)
            outside = ((toggles + in_string) & 1) == 0
            in_string = (in_string + int(toggles[-1])) & 1
            b = np.where(outside, b, np.uint8(0))  # bytes inside strings count as nothing
        opens = (b == ord("[")) | (b == ord("{"))
        closes = (b == ord("]")) | (b == ord("}"))
        values += int(np.count_nonzero(opens)) + int(np.count_nonzero((b == ord(",")) | (b == ord(":"))))
        level: np.ndarray = np.cumsum(opens.view(np.int8) - closes.view(np.int8), dtype=np.int32)
        deepest = max(deepest, depth + int(level.max(initial=0)))
        depth += int(level[-1])
    return values, deepest


def check_json_shape(raw: bytes, where: str, max_values: int, max_depth: int, raise_hint: str) -> None:
    """Raise :class:`LimitError` if ``raw`` holds more than ``max_values`` JSON values or nests deeper than
    ``max_depth`` (see :func:`json_shape`)."""
    values, depth = json_shape(raw)
    if depth > max_depth:
        raise LimitError(f"{where} is nested {depth:,} levels deep, over the limit of {max_depth}; {raise_hint}")
    if values > max_values:
        raise LimitError(f"{where} holds about {values:,} JSON values, over the limit of {max_values:,}; {raise_hint}")
