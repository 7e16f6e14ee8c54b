"""Typed configuration of the compiler, read once from the environment (override in tests).

| variable | field |
|---|---|
| ``TORCH_NEURONX_NEFF_CACHE_DIR`` | ``cache_dir`` (default: the per-user cache dir, created 0700) |
| ``TORCH_NEURONX_DISABLE_NEFF_CACHE=1`` | ``disable_cache`` |
| ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION`` | ``disable_fallback_execution`` (default 1: a failed compile raises) |
| ``TRN_NOTEBOOK_CACHE_KEY_FILE`` | ``key_file`` (default: ``<user config dir>/trn-notebook/cache-hmac.key``) |
| ``TORCH_NEURONX_DEBUG_DIR`` | ``debug_dir`` |
| ``TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1`` | ``preserve_artifacts`` (write artifacts to ``debug_dir``) |
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass

from .. import state as _state


def _flag(env: dict[str, str], name: str, default: bool) -> bool:
    """A boolean variable read as the device's are: 1/0, true/false, yes/no, on/off; anything else (``maybe``)
    warns (a ``ConfigWarning`` naming the variable) and keeps the default, never taken as on (issue 31)."""
    from ..device.config import _flag as device_flag

    return device_flag(env, name, default)


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
    def from_env(cls, env: dict[str, str] | None = None) -> CompilerConfig:
        """Build a config from environment variables (``os.environ`` by default)."""
        env = dict(os.environ if env is None else env)
        return cls(
            cache_dir=env.get("TORCH_NEURONX_NEFF_CACHE_DIR") or None,
            disable_cache=_flag(env, "TORCH_NEURONX_DISABLE_NEFF_CACHE", False),
            key_file=env.get("TRN_NOTEBOOK_CACHE_KEY_FILE") or None,
            disable_fallback_execution=_flag(env, "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", True),
            debug_dir=env.get("TORCH_NEURONX_DEBUG_DIR") or None,
            preserve_artifacts=_flag(env, "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", False),
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
