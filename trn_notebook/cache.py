"""The compile cache as a user sees it: entries, clearing, warm-up, and shareable bundles.

A **bundle** is one JSON file holding compiled graphs as IR text plus their metadata, the torch
and compiler versions, and a sha256 over the rest. It is data only (never code) and is how a
warmed cache is handed to other users or machines (a class of 30 laptops): :func:`export` writes
one from your authenticated entries; :func:`import_` reads one **only after you choose to trust
it** (``trust=True``), refuses it whole on a bad checksum, another torch/compiler version or any
entry that does not parse and run on fake tensors, and re-signs the accepted entries with your own
key into your own cache. See docs/SECURITY.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .compiler import cache as _cache
from .compiler import trust as _trust
from .compiler.buckets import BucketedCallable
from .compiler.text import parse_graph
from .compiler.warmup import WarmupSummary
from .limits import LimitError, check_json_shape, read_limited

BUNDLE_FORMAT = "trn-notebook-cache-bundle"
BUNDLE_VERSION = 1
MAX_BUNDLE_BYTES = 256 << 20
"""The largest bundle file read (checked before reading)."""
MAX_BUNDLE_VALUES = 4_000_000
"""The most JSON values a bundle may hold (counted before parsing: a "JSON bomb" is refused unparsed)."""
MAX_BUNDLE_DEPTH = 16
MAX_BUNDLE_ENTRIES = 4096
"""The most entries one bundle may carry (each is checked on fake tensors, ~12 ms)."""
_RAISE_HINT = (
    "if you trust this bundle, raise the limit (trn_notebook.cache.MAX_BUNDLE_BYTES / MAX_BUNDLE_VALUES / "
    "MAX_BUNDLE_ENTRIES) or ask its sender for smaller bundles"
)
_SHA_FIELD = re.compile(rb'"sha256":\s*"([0-9a-f]{64})"')
_META_KEYS = ("graph_name", "model_name", "kind", "input_signature")

cache_dir = _cache.cache_dir
cache_entries = _cache.cache_entries
clear = _cache.clear_cache
CacheDirError = _cache.CacheDirError


class BundleError(ValueError):
    """A bundle was refused as a whole (the message says why); nothing was imported."""


@dataclass(frozen=True)
class BundleSummary:
    """What an export wrote or an import accepted."""

    path: str
    entries: int
    bytes: int
    sha256: str
    already_present: int = 0

    def __str__(self) -> str:
        extra = f" ({self.already_present} already in your cache)" if self.already_present else ""
        return f"{self.entries} entries, {self.bytes} bytes, sha256 {self.sha256} — {self.path}{extra}"


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def export(path: str | Path, keys: list[str] | None = None) -> BundleSummary:
    """Write your authenticated cache entries (all, or ``keys``) to a bundle at ``path``.

    Raises ``CacheDirError`` when your cache directory is not usable and ``ValueError`` when
    there is nothing to export or a requested key is missing.
    """
    d = _cache.usable_dir(create=False)
    wanted = None if keys is None else set(keys)
    entries = []
    for e in _cache.cache_entries():
        if (wanted is not None and e["key"] not in wanted) or not e["authenticated"]:
            continue
        key = e["key"]
        record = _cache.header(_trust.read_regular(d / f"{key}.json", _trust.MAX_META_BYTES), key)
        text = _trust.read_regular(d / f"{key}.ir", _trust.MAX_ENTRY_BYTES).decode("utf-8")
        try:
            _cache.check_record(record, text)
        except ValueError:
            continue  # an entry of another build: it would be refused on import anyway
        entries.append({"key": key, "meta": {k: record.get(k) for k in _META_KEYS}, "ir": text})
    if wanted is not None and {x["key"] for x in entries} != wanted:
        raise ValueError(f"not in your cache (or not authenticated): {sorted(wanted - {x['key'] for x in entries})}")
    if not entries:
        raise ValueError(f"no authenticated entries to export in {d}; compile (or warm up) first")
    body = {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "torch_version": torch.__version__,
        "compiler_version": _cache.COMPILER_VERSION,
        "created": time.time(),
        "entries": sorted(entries, key=lambda x: x["key"]),
    }
    sha = _digest(body)
    data = json.dumps({**body, "sha256": sha}, indent=1, sort_keys=True).encode()
    path = Path(path).expanduser()
    _cache._atomic_write(path, data)
    os.chmod(path, 0o644)  # a file we just created, meant to be shared read-only
    return BundleSummary(str(path), len(entries), len(data), sha)


def _read_raw(path: Path) -> bytes:
    try:
        return read_limited(path, MAX_BUNDLE_BYTES, "cache bundle", _RAISE_HINT)
    except LimitError as exc:
        raise BundleError(f"{exc}; nothing was imported") from None
    except ValueError as exc:  # not a regular file
        raise BundleError(str(exc)) from None


def _declared_sha(raw: bytes) -> str:
    """The bundle's top-level ``sha256`` field found without parsing (the last one: keys are sorted)."""
    found = _SHA_FIELD.findall(raw[-4096:]) or _SHA_FIELD.findall(raw)
    return found[-1].decode() if found else "(none declared)"


def _read_bundle(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        check_json_shape(raw, f"bundle {path}", MAX_BUNDLE_VALUES, MAX_BUNDLE_DEPTH, _RAISE_HINT)
    except LimitError as exc:
        raise BundleError(f"{exc}; nothing was imported") from None
    try:
        bundle = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BundleError(f"{path} is not a trn-notebook cache bundle (not JSON: {exc})") from None
    if not isinstance(bundle, dict) or bundle.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"{path} is not a trn-notebook cache bundle")
    return bundle


def import_(path: str | Path, *, trust: bool = False) -> BundleSummary:
    """Import the bundle at ``path`` into your cache after you chose to trust it (``trust=True``).

    The bundle is only read, and bounded before it is parsed (:data:`MAX_BUNDLE_BYTES`,
    :data:`MAX_BUNDLE_VALUES`, :data:`MAX_BUNDLE_ENTRIES`); without ``trust=True`` it is not parsed
    at all. An entry whose key you already have a valid entry for is kept as yours (counted in
    ``already_present``, not in ``entries``). Raises ``BundleError`` (nothing imported) without
    ``trust=True`` (the message gives the bundle's sha256 to compare with the sender's), over a
    limit, on a bad checksum, a bundle of another torch or compiler version (both named), or any
    entry that fails to parse or run (ops outside our op set, results outside their storage);
    ``CacheDirError`` when your cache directory is not usable.
    """
    path = Path(path).expanduser()
    raw = _read_raw(path)
    if not trust:  # refused before parsing: an untrusted file is never turned into Python objects
        raise BundleError(
            f"importing {path} means trusting whoever made it: its graphs will run as if you compiled them. "
            f"If its sha256 {_declared_sha(raw)} (declared in the file, checked on import) matches what the sender "
            "published, call import_(path, trust=True)"
        )
    bundle = _read_bundle(path, raw)
    body = {k: v for k, v in bundle.items() if k != "sha256"}
    sha = _digest(body)
    if bundle.get("sha256") != sha:
        raise BundleError(f"bundle {path} fails its checksum (altered or truncated); nothing was imported")
    mine = {"torch": torch.__version__, "compiler": _cache.COMPILER_VERSION}
    theirs = {"torch": bundle.get("torch_version"), "compiler": bundle.get("compiler_version")}
    if theirs != mine:
        raise BundleError(
            f"bundle {path} was made with torch {theirs['torch']} and compiler {theirs['compiler']}; this is torch "
            f"{mine['torch']} and compiler {mine['compiler']}; nothing was imported (compile here and export anew)"
        )
    entries = bundle.get("entries")
    if bundle.get("version") != BUNDLE_VERSION or not isinstance(entries, list) or not entries:
        raise BundleError(f"bundle {path} has no entries of version {BUNDLE_VERSION}")
    if len(entries) > MAX_BUNDLE_ENTRIES:
        raise BundleError(
            f"bundle {path} has {len(entries):,} entries, over the limit of {MAX_BUNDLE_ENTRIES:,}; {_RAISE_HINT}"
        )
    checked = []
    for i, e in enumerate(entries):
        try:
            key, meta, text = e["key"], e["meta"], e["ir"]
            if not (isinstance(key, str) and _cache.KEY_RE.fullmatch(key) and isinstance(text, str)):
                raise ValueError("bad key or IR")
            if not isinstance(meta, dict):
                raise ValueError("bad metadata")
            _cache.check_runs(parse_graph(text))
        except Exception as exc:
            raise BundleError(f"bundle {path}: entry {i} is unusable ({exc}); nothing was imported") from None
        checked.append((key, {k: meta.get(k) for k in _META_KEYS}, text))
    d = _cache.usable_dir(create=True)
    present = written = 0
    for key, meta, text in checked:
        if _cache.load(key) is not None:  # your own valid entry is kept: a bundle never replaces it
            present += 1
            continue
        _cache.write_entry(d, key, text, {**meta, "imported_from": sha})
        written += 1
    return BundleSummary(str(path), written, len(raw), sha, present)


def warmup(target: BucketedCallable, *args: Any, progress: bool = True, **kwargs: Any) -> WarmupSummary:
    """Compile every bucket of ``target`` (a ``bucketed(...)`` callable) now; the ``%trn warmup`` entry point.

    Raises ``TypeError`` for another kind of target and ``ValueError`` without example inputs
    or an earlier call.
    """
    if not isinstance(target, BucketedCallable):
        raise TypeError(
            f"warm-up needs a bucketed callable (trn_notebook.bucketed(model, dims=..., policy=...)), "
            f"got {type(target).__name__}"
        )
    return target.warmup(*args, progress=progress, **kwargs)


__all__ = [
    "BundleError",
    "BundleSummary",
    "CacheDirError",
    "WarmupSummary",
    "cache_dir",
    "cache_entries",
    "clear",
    "export",
    "import_",
    "warmup",
]
