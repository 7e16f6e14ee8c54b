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
import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .compiler import disk_cache as _cache
from .compiler import trust as _trust
from .compiler.buckets import BucketedCallable, WarmupSummary
from .compiler.text import parse_graph
from .limits import LimitError, check_json_shape, read_limited
from .outfiles import check_writable, write_all, write_atomic

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


class BundleWarning(UserWarning):
    """A graph was left out of a bundle (export) or skipped (import); the message names it and why."""


@dataclass(frozen=True)
class BundleSummary:
    """What an export wrote or an import accepted."""

    path: str
    entries: int
    bytes: int
    sha256: str
    already_present: int = 0
    left_out: tuple[str, ...] = ()
    """Graphs not exported / not imported because they call custom tile kernels (``nki_op``), by graph name."""

    def __str__(self) -> str:
        extra = f" ({self.already_present} already in your cache)" if self.already_present else ""
        if self.left_out:
            extra += f"; left out (custom kernels, not data): {', '.join(self.left_out)}"
        return f"{self.entries} entries, {self.bytes} bytes, sha256 {self.sha256} — {self.path}{extra}"


def _kernels_called(text: str) -> list[str]:
    """The custom tile kernels (``'ns::name'``) an entry's IR calls through ``kernel_call``.

    A kernel is Python code registered with ``nki_op`` in the process that compiled the graph, not
    data a bundle can carry: the importer's process would have no kernel to run.
    """
    found = []
    for node in parse_graph(text).nodes:
        if node.op == "kernel_call" and node.args and isinstance(node.args[0], str):
            name = node.args[0].partition("@")[0]
            if name not in found:
                found.append(name)
    return found


def _leave_out(what: str, graph: str, kernels: list[str]) -> None:
    warnings.warn(
        f"cache bundle: graph {graph!r} {what}: it calls the custom kernel(s) {', '.join(kernels)} "
        "(trn_notebook.nki_op), which are code, not data; whoever uses the bundle compiles that graph "
        "after running the cell that defines the kernel",
        BundleWarning,
        stacklevel=3,
    )


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def export(path: str | Path, keys: list[str] | None = None) -> BundleSummary:
    """Write your authenticated cache entries (all, or ``keys``) to a bundle at ``path``.

    A graph that calls a custom tile kernel (``nki_op``) is left out with a :class:`BundleWarning`
    naming it and its kernels (listed in the summary's ``left_out``): the kernel is Python code that
    a bundle, being data only, cannot carry. Raises ``CacheDirError`` when your cache directory is not
    usable, ``ValueError`` when there is nothing to export or a requested key is missing, and ``OSError``
    (before any work) when ``path`` cannot be written (its folder missing, not yours ...).
    """
    path = check_writable(path, "cache bundle")
    d = _cache.usable_dir(create=False)
    wanted = None if keys is None else set(keys)
    entries = []
    left_out: list[str] = []
    kernel_keys: set[str] = set()
    for e in _cache.cache_entries():
        if (wanted is not None and e["key"] not in wanted) or not e["authenticated"]:
            continue
        key = e["key"]
        record = _cache.header(_trust.read_regular(d / f"{key}.json", _trust.MAX_META_BYTES), key)
        text = _trust.read_regular(d / f"{key}.ir", _trust.MAX_ENTRY_BYTES).decode("utf-8")
        try:
            _cache.check_record(record, text)
            kernels = _kernels_called(text)
        except ValueError:
            continue  # an entry of another build (or op set): it would be refused on import anyway
        if kernels:
            graph = str(record.get("graph_name") or key)
            _leave_out("is left out of the bundle", graph, kernels)
            left_out.append(graph)
            kernel_keys.add(key)
            continue
        entries.append({"key": key, "meta": {k: record.get(k) for k in _META_KEYS}, "ir": text})
    if wanted is not None and {x["key"] for x in entries} | kernel_keys != wanted:
        missing = sorted(wanted - {x["key"] for x in entries} - kernel_keys)
        raise ValueError(f"not in your cache (or not authenticated): {missing}")
    if not entries:
        why = f" (left out: {', '.join(left_out)} call custom kernels)" if left_out else ""
        raise ValueError(f"no authenticated entries to export in {d}{why}; compile (or warm up) first")
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
    write_atomic(path, data, mode=0o644)  # meant to be shared read-only (the umask may narrow it)
    return BundleSummary(str(path), len(entries), len(data), sha, left_out=tuple(left_out))


def _read_raw(path: Path) -> bytes:
    try:
        return read_limited(path, MAX_BUNDLE_BYTES, "cache bundle", _RAISE_HINT)
    except LimitError as exc:
        raise BundleError(f"{exc}; nothing was imported") from None
    except ValueError as exc:  # not a regular file
        raise BundleError(str(exc)) from None
    except OSError as exc:
        raise BundleError(f"cannot read the bundle {path}: {exc.strerror or exc}; nothing was imported") from None


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
    ``already_present``, not in ``entries``). An entry calling a custom tile kernel (``nki_op``; a
    bundle made before such graphs were left out) is skipped with a :class:`BundleWarning` naming it
    (summary ``left_out``), and the rest is imported. Raises ``BundleError`` (nothing imported) without
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
    left_out: list[str] = []
    for i, e in enumerate(entries):
        try:
            key, meta, text = e["key"], e["meta"], e["ir"]
            if not (isinstance(key, str) and _cache.KEY_RE.fullmatch(key) and isinstance(text, str)):
                raise ValueError("bad key or IR")
            if not isinstance(meta, dict):
                raise ValueError("bad metadata")
            kernels = _kernels_called(text)
            if not kernels:
                _cache.check_runs(parse_graph(text))
        except Exception as exc:
            raise BundleError(f"bundle {path}: entry {i} is unusable ({exc}); nothing was imported") from None
        if kernels:
            graph = str(meta.get("graph_name") or key)
            _leave_out("is not imported", graph, kernels)
            left_out.append(graph)
            continue
        checked.append((key, {k: meta.get(k) for k in _META_KEYS}, text))
    if not checked:
        raise BundleError(
            f"bundle {path}: every entry calls a custom kernel ({', '.join(left_out)}); nothing was imported"
        )
    d = _cache.usable_dir(create=True)
    files: list[tuple[str | Path, bytes]] = []
    present = written = 0
    for i, (key, meta, text) in enumerate(checked):
        if _cache.load(key) is not None:  # your own valid entry is kept: a bundle never replaces it
            present += 1
            continue
        try:
            files += _cache.entry_files(d, key, text, {**meta, "imported_from": sha})
        except (ValueError, TypeError) as exc:  # metadata JSON cannot hold (NaN): found before any write
            raise BundleError(f"bundle {path}: entry {i} has unusable metadata ({exc}); nothing was imported") from None
        written += 1
    write_all(files, mode=0o600)  # every entry or none (OSError: nothing was changed)
    return BundleSummary(str(path), written, len(raw), sha, present, tuple(left_out))


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
    "BundleWarning",
    "CacheDirError",
    "WarmupSummary",
    "cache_dir",
    "cache_entries",
    "clear",
    "export",
    "import_",
    "warmup",
]
