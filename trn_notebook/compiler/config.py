"""Typed configuration of the compiler, read once from the environment (override in tests).

The variables (``TORCH_NEURONX_NEFF_CACHE_DIR``, ``TORCH_NEURONX_DISABLE_NEFF_CACHE``,
``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION``, ``TRN_NOTEBOOK_CACHE_KEY_FILE``, ``TORCH_NEURONX_DEBUG_DIR``,
``TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS``) are described once, in ``trn_notebook/envvars.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from .. import envvars
from .. import state as _state


def _path(name: str, env: Mapping[str, str] | None) -> str | None:
    found = envvars.path(name, env)
    return None if found is None else str(found)


@dataclass(frozen=True)
class CompilerConfig:
    """Every switch of the compiler; immutable, replaced as a whole by :func:`override`."""

    cache_dir: str | None = None
    disable_cache: bool = False
    key_file: str | None = None
    disable_fallback_execution: bool = True
    debug_dir: str | None = None
    preserve_artifacts: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CompilerConfig:
        """Build a config from environment variables (``os.environ`` by default)."""
        flag = envvars.flag
        return cls(
            cache_dir=_path("TORCH_NEURONX_NEFF_CACHE_DIR", env),
            disable_cache=flag("TORCH_NEURONX_DISABLE_NEFF_CACHE", env),
            key_file=_path("TRN_NOTEBOOK_CACHE_KEY_FILE", env),
            disable_fallback_execution=flag("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", env),
            debug_dir=_path("TORCH_NEURONX_DEBUG_DIR", env),
            preserve_artifacts=flag("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", env),
        )


_current = CompilerConfig.from_env()
_state.register("compiler_config", _state.Globals(__name__, "_current"), reset=False)  # settings survive


def get_config() -> CompilerConfig:
    """The configuration in force."""
    return _current


def reload_config() -> CompilerConfig:
    """Re-read the environment (after changing ``os.environ`` in a running session)."""
    global _current
    _current = CompilerConfig.from_env()
    return _current


@contextlib.contextmanager
def override(**changes: object) -> Iterator[CompilerConfig]:
    """Temporarily change fields; raises ``TypeError`` on an unknown field."""
    global _current
    valid = {f.name for f in dataclasses.fields(CompilerConfig)}
    unknown = set(changes) - valid
    if unknown:
        raise TypeError(f"unknown compiler config field(s) {sorted(unknown)}; valid: {sorted(valid)}")
    previous = _current
    _current = dataclasses.replace(_current, **changes)  # type: ignore[arg-type]
    try:
        yield _current
    finally:
        _current = previous
