"""The persistent compile cache: data-only entries (JSON + IR text), authenticated, written atomically.

An entry is two files in the cache directory: ``<key>.ir`` (the planned IR as text) and
``<key>.json`` (metadata, the IR's sha256 and an HMAC of the metadata under this user's key),
each written to a temporary file and renamed into place, the JSON last (it commits the entry).
Loading trusts only what :mod:`.trust` allows (a private directory with our marker, regular
files we own, a valid HMAC), parses the IR strictly within size and depth limits, then checks
that it runs (every op on fake tensors, result types as declared); our codegen rebuilds the
code. Nothing is ever unpickled or executed from the cache. An entry that fails any check is
reported once, deleted (it is ours) and the graph recompiled; a file or directory we may not
trust is refused and left alone. Failed compiles are never written. Deleting (``clear_cache``)
touches only our own entries in a directory carrying our marker.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from .. import state as _state
from ..outfiles import write_all
from . import trust
from .config import get_config
from .ir import Graph
from .text import parse_graph, print_graph

log = logging.getLogger("trn_notebook.compiler")

FORMAT_VERSION = 2


def _source_digest() -> str:
    """Hash of the compiler's own source files: entries from another compiler build never load."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


COMPILER_VERSION = f"trn-notebook-neuron-0.1.0+{_source_digest()}"
KEY_RE = re.compile(r"[0-9a-f]{32}")
_TMP_RE = re.compile(r"\.[0-9a-f]{32}\.(?:json|ir)\.[A-Za-z0-9_]+\.(?:tmp|bak)")  # outfiles' staging names
_reported: set[str] = set()
_state.register("cache_warnings", _state.Globals(__name__, "_reported"))  # warn again after a reset


class CacheCorruptWarning(UserWarning):
    """A cache entry could not be loaded; it was discarded and the graph recompiled."""


class CacheUntrustedWarning(UserWarning):
    """The cache directory, an entry or the key may be written by someone else; it was not used."""


class CacheDirError(ValueError):
    """An operation that would delete or write files was refused for this directory (the message says why)."""


def cache_dir() -> Path:
    """The cache directory in force (created 0700 on first use; may not exist yet)."""
    cfg = get_config()
    if cfg.cache_dir:
        return Path(cfg.cache_dir).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("trn-notebook")) / "neff_cache"


def enabled() -> bool:
    """False when ``TORCH_NEURONX_DISABLE_NEFF_CACHE=1``."""
    return not get_config().disable_cache


def _warn_once(tag: str, message: str, category: type[Warning] = CacheUntrustedWarning) -> None:
    if tag not in _reported:
        _reported.add(tag)
        warnings.warn(message, category, stacklevel=4)


def _only_ours(d: Path) -> bool:
    """True when every file in ``d`` looks like one of our entries (an unmarked cache from before markers)."""
    for p in d.iterdir():
        stem, _, suffix = p.name.partition(".")
        if not (KEY_RE.fullmatch(stem) and suffix in ("json", "ir")) and not _TMP_RE.fullmatch(p.name):
            return False
    return True


def usable_dir(*, create: bool) -> Path:
    """The cache directory if we may use it (created ``0700`` with our marker when ``create``).

    Raises ``CacheDirError`` naming the problem and the fix: a directory another user owns or can
    write (never chmod-ed by us), or one without our marker that holds other files.
    """
    d = cache_dir()
    if create and not d.exists():
        try:
            d.mkdir(parents=True, mode=0o700)
            trust.write_marker(d)
            return d
        except FileExistsError:
            pass  # another process created it: check it like any existing directory
        except OSError as exc:
            raise CacheDirError(f"cannot create the compile cache directory {d}: {exc.strerror or exc}") from exc
    why = trust.dir_problem(d)
    if why:
        raise CacheDirError(
            f"{why}. The compile cache uses only a private directory of yours and never changes the permissions "
            f"of one it did not create; point TORCH_NEURONX_NEFF_CACHE_DIR (or %trn cache --dir) at a new "
            "directory, or run `chmod 700` on this one yourself if it is meant to be private."
        )
    if not trust.has_marker(d):
        if not (create and _only_ours(d)):
            raise CacheDirError(
                f"{d} is not a trn-notebook compile cache (no {trust.MARKER} marker file); nothing in it is read "
                "or deleted. Point TORCH_NEURONX_NEFF_CACHE_DIR at a new or empty directory."
            )
        trust.write_marker(d)
    return d


def make_key(graph_text: str, input_specs: list[str], options: dict[str, Any]) -> str:
    """Hash of the graph text, input specs, effective options, compiler and torch versions (hex)."""
    h = hashlib.sha256()
    for part in (graph_text, "|".join(input_specs), json.dumps(options, sort_keys=True, default=str),
                 COMPILER_VERSION, torch.__version__, str(FORMAT_VERSION)):  # fmt: skip
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def signed_record(key: str, text: str, meta: dict[str, Any]) -> dict[str, Any]:
    """The JSON metadata of an entry holding IR ``text``, signed with this user's key."""
    record = {
        "format": FORMAT_VERSION,
        "compiler_version": COMPILER_VERSION,
        "torch_version": torch.__version__,
        "created": time.time(),
        **meta,
        "key": key,
        "ir_sha256": hashlib.sha256(text.encode()).hexdigest(),
    }
    record.pop("hmac", None)
    record["hmac"] = trust.sign(record)
    return record


def entry_files(d: Path, key: str, text: str, meta: dict[str, Any]) -> list[tuple[str | Path, bytes]]:
    """The two files of one signed entry in directory ``d``: IR, then the JSON that commits it.

    Raises ``ValueError`` for metadata JSON cannot hold (NaN, infinity, objects), before anything is written.
    """
    record = signed_record(key, text, meta)
    header = json.dumps(record, indent=1, sort_keys=True, allow_nan=False).encode()
    return [(d / f"{key}.ir", text.encode()), (d / f"{key}.json", header)]


def write_entry(d: Path, key: str, text: str, meta: dict[str, Any]) -> Path:
    """Write one signed entry into directory ``d``, both files or neither (``outfiles.write_all``)."""
    write_all(entry_files(d, key, text, meta), mode=0o600)
    return d / f"{key}.json"


def store(key: str, graph: Graph, meta: dict[str, Any]) -> Path | None:
    """Write one entry; returns the JSON path, or None when disabled or refused (warned once)."""
    if not enabled():
        return None
    try:
        d = usable_dir(create=True)
        return write_entry(d, key, print_graph(graph), meta)
    except (trust.UntrustedError, CacheDirError) as exc:
        _warn_once(f"store:{exc}", f"neuron compile cache not used: {exc}")
    except OSError as exc:
        log.warning("could not write neuron compile cache entry %s: %s", key, exc)
    return None


def header(raw: bytes, key: str) -> dict[str, Any]:
    """The metadata of entry ``key`` parsed from ``raw``; raises ``ValueError`` when it is not our header."""
    record = json.loads(raw.decode("utf-8"))
    if not isinstance(record, dict) or record.get("key") != key or not isinstance(record.get("format"), int):
        raise ValueError("not a trn-notebook cache entry header")
    created = record.get("created")
    if not isinstance(created, int | float) or isinstance(created, bool) or not 0 <= created < 1e11:
        raise ValueError(f"bad 'created' field {str(created)[:40]!r}")
    return record


def check_record(record: dict[str, Any], text: str) -> None:
    """Raise ``ValueError`` unless ``record`` matches this compiler, this torch and ``text``."""
    if record.get("format") != FORMAT_VERSION:
        raise ValueError(f"format {record.get('format')!r}, this build reads {FORMAT_VERSION}")
    if record.get("compiler_version") != COMPILER_VERSION or record.get("torch_version") != torch.__version__:
        raise ValueError(
            f"written by compiler {str(record.get('compiler_version'))[:60]} with torch "
            f"{str(record.get('torch_version'))[:30]}; this is {COMPILER_VERSION} with torch {torch.__version__}"
        )
    if hashlib.sha256(text.encode()).hexdigest() != record.get("ir_sha256"):
        raise ValueError("IR checksum mismatch")


def check_runs(graph: Graph) -> None:
    """Run every op of ``graph`` on fake tensors; raises when an op fails or a result differs from its type.

    Catches what parses but cannot run (a wrong constant type, a wrong number of arguments, a
    result of another shape or dtype than declared) and any result reaching outside its storage
    (:class:`.geometry.StorageSizes`). The random-number state is left as it was.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    from .codegen import Program
    from .geometry import StorageSizes

    program = Program(graph)
    state = torch.random.get_rng_state()
    try:
        with FakeTensorMode():
            env: list[Any] = [torch.empty(t.shape, dtype=t.torch_dtype) for _, t in graph.inputs]
            storages = StorageSizes()
            storages.note(env)
            env.extend([None] * (program.n_slots - len(env)))
            slot = len(graph.inputs)
            for (step, _frees), node in zip(program.plan, graph.nodes):
                step(env)
                for name, t in zip(node.outs, node.types):
                    if not name:
                        continue
                    v = env[slot]
                    slot += 1
                    storages.check(v, node.op)
                    if t is None:
                        continue
                    if not isinstance(v, torch.Tensor) or tuple(v.shape) != t.shape or v.dtype != t.torch_dtype:
                        got = f"{v.dtype} {tuple(v.shape)}" if isinstance(v, torch.Tensor) else type(v).__name__
                        raise ValueError(f"{node.op} produced {got}, the IR declares {t}")
    finally:
        torch.random.set_rng_state(state)


def load(key: str) -> tuple[Graph, dict[str, Any]] | None:
    """The entry for ``key`` as (parsed graph, metadata), or None when absent, disabled, refused or corrupt."""
    if not enabled() or not KEY_RE.fullmatch(key):
        return None
    d = cache_dir()
    jpath = d / f"{key}.json"
    if not os.path.lexists(jpath):
        return None
    try:
        usable_dir(create=False)
        record = header(trust.read_regular(jpath, trust.MAX_META_BYTES), key)
        if not trust.verify(record):
            raise ValueError("its HMAC does not verify under your key (not written by you, or altered)")
        text = trust.read_regular(d / f"{key}.ir", trust.MAX_ENTRY_BYTES).decode("utf-8")
        check_record(record, text)
        graph = parse_graph(text)
        check_runs(graph)
    except (trust.UntrustedError, CacheDirError) as exc:
        _warn_once(f"load:{d}:{exc}", f"neuron compile cache entry {key} was not used: {exc}")
        return None
    except FileNotFoundError:
        _discard(d, key, "IR file missing")
        return None
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # anything read from disk may fail in any way: recompile
        _discard(d, key, f"{type(exc).__name__}: {str(exc)[:200]}")
        return None
    return graph, record


def _discard(d: Path, key: str, reason: str) -> None:
    reason = " ".join(reason.split())
    _warn_once(
        f"discard:{key}",
        f"neuron compile cache entry {key} in {d} is unusable ({reason}); it was discarded and the graph is "
        "being recompiled",
        CacheCorruptWarning,
    )
    for suffix in (".json", ".ir"):
        try:
            (d / f"{key}{suffix}").unlink()
        except OSError:
            pass


def _our_entries(d: Path) -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for jpath in d.glob("*.json"):
        if not KEY_RE.fullmatch(jpath.stem):
            continue
        try:
            found.append((jpath, header(trust.read_regular(jpath, trust.MAX_META_BYTES), jpath.stem)))
        except (OSError, ValueError):
            continue
    return found


def cache_entries() -> list[dict[str, Any]]:
    """Our entries in the cache directory (key, graph name, size, created, authenticated …), newest first."""
    try:
        d = usable_dir(create=False)
    except CacheDirError:
        return []
    out: list[dict[str, Any]] = []
    for jpath, record in _our_entries(d):
        ir = jpath.with_suffix(".ir")
        try:
            size = jpath.lstat().st_size + (ir.lstat().st_size if os.path.lexists(ir) else 0)
            authentic = trust.verify(record)
        except (OSError, ValueError):
            size, authentic = 0, False
        sig = record.get("input_signature", [])
        out.append(
            {
                "key": jpath.stem,
                "graph_name": str(record.get("graph_name", "")),
                "model_name": str(record.get("model_name", "")),
                "kind": str(record.get("kind", "")),
                "input_signature": [str(s) for s in sig] if isinstance(sig, list) else [],
                "created": float(record["created"]),
                "bytes": size,
                "authenticated": authentic,
                "path": str(jpath),
            }
        )
    out.sort(key=lambda r: r["created"], reverse=True)
    return out


def clear_cache() -> int:
    """Delete our entries (name pattern + valid header) and our stray temporary files; returns entries removed.

    Raises ``CacheDirError`` for a directory without our marker or one another user can write
    (nothing is deleted there). Files that could not be deleted are not counted.
    """
    d = cache_dir()
    if not d.exists() or (d.is_dir() and not d.is_symlink() and not any(d.iterdir())):
        return 0  # nothing there, so nothing of ours to delete (an empty directory needs no marker)
    d = usable_dir(create=False)
    removed = 0
    for jpath, _record in _our_entries(d):
        try:
            jpath.unlink()
        except OSError as exc:
            log.warning("could not delete cache entry %s: %s", jpath, exc)
            continue
        removed += 1
        try:
            jpath.with_suffix(".ir").unlink()
        except OSError:
            pass
    for p in list(d.iterdir()):
        orphan_ir = p.suffix == ".ir" and KEY_RE.fullmatch(p.stem) and not os.path.lexists(p.with_suffix(".json"))
        if orphan_ir or _TMP_RE.fullmatch(p.name):
            try:
                if orphan_ir and not trust.read_regular(p, trust.MAX_ENTRY_BYTES).startswith(b"graph "):
                    continue
                p.unlink()
            except (OSError, ValueError):
                pass
    return removed
