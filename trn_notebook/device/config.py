"""Typed configuration of the simulated device, read once from the environment.

Fields are read from the environment variables listed in ``trn_notebook/envvars.py`` (and
``docs/environment.md``, generated from it); those mirror TorchNeuron's where one exists. A malformed
value never raises (it would break every ``import torch`` through the autoload entry point): it warns
(:class:`ConfigWarning`) naming the variable, the value and the accepted forms, and the default is used.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from .. import envvars
from .. import state as _state
from ..envvars import BYTES_FORMS, SMALLEST_HBM, ConfigWarning, parse_bytes

T = TypeVar("T")
__all__ = ["BYTES_FORMS", "ConfigWarning", "DeviceConfig", "get_config", "override", "parse_bytes", "set_config"]


def _chip_setting(env: Mapping[str, str] | None, name: str, default: str) -> str:
    value = envvars.text(name, env)
    if value is None:
        return default
    from .chips import CHIPS, get_chip_spec

    try:
        return get_chip_spec(value).name
    except ValueError:
        envvars.warn_bad(name, value, ", ".join(sorted(CHIPS)), once=env is None)
        return default


@dataclass(frozen=True)
class DeviceConfig:
    """Every switch of the simulator; immutable, replaced as a whole by :func:`override`."""

    chip: str = "trn2"
    hbm_bytes: int | None = None
    launch_blocking: bool = False
    eager_fusion: bool = False
    fusion_max_ops: int = 1024  # TorchNeuron's buffer size limit for adaptive eager execution
    fallback_only_for_unimplemented: bool = False
    strict: bool = False
    allow_float64: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DeviceConfig:
        """Build a config from environment variables (``os.environ`` by default); bad values warn, never raise."""
        flag = envvars.flag
        return cls(
            chip=_chip_setting(env, "TRN_NOTEBOOK_CHIP", "trn2"),
            hbm_bytes=envvars.size("TRN_NOTEBOOK_HBM_BYTES", env, minimum=SMALLEST_HBM),
            launch_blocking=flag("NEURON_LAUNCH_BLOCKING", env),
            eager_fusion=flag("TORCH_NEURONX_ENABLE_CONCATENATION", env),
            fallback_only_for_unimplemented=flag("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", env),
            strict=flag("TRN_NOTEBOOK_STRICT", env),
            allow_float64=flag("TRN_NOTEBOOK_ALLOW_FLOAT64", env),
        )


_current = DeviceConfig.from_env()
_state.register("device_config", _state.Globals(__name__, "_current"), reset=False)  # settings survive


def get_config() -> DeviceConfig:
    """Return the configuration in force."""
    return _current


def replace_fields(obj: T, changes: dict[str, object], what: str) -> T:
    """``dataclasses.replace`` that names the valid fields when one is unknown (raises ``TypeError``)."""
    valid = {f.name for f in dataclasses.fields(obj)}  # type: ignore[arg-type]
    unknown = set(changes) - valid
    if unknown:
        raise TypeError(f"unknown {what} {sorted(unknown)}; valid: {sorted(valid)}")
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]


def set_config(**changes: object) -> DeviceConfig:
    """Replace fields of the configuration in force; raises ``TypeError`` on an unknown field."""
    global _current
    _current = replace_fields(_current, changes, "device config field(s)")
    return _current


@contextlib.contextmanager
def override(**changes: object) -> Iterator[DeviceConfig]:
    """Temporarily change configuration fields (tests, magics); restores the previous config on exit."""
    global _current
    previous = _current
    try:
        yield set_config(**changes)
    finally:
        _current = previous
