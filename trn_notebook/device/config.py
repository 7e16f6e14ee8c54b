"""Typed configuration of the simulated device, read once from the environment.

Environment variables mirror TorchNeuron's where one exists (see shared/reference/torchneuron.md):

| variable | field | meaning |
|---|---|---|
| ``NEURON_LAUNCH_BLOCKING=1`` | ``launch_blocking`` | every op is a sync point |
| ``TORCH_NEURONX_ENABLE_CONCATENATION=1`` | ``eager_fusion`` | adaptive eager fusion of queued native ops |
| ``TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1`` | ``fallback_only_for_unimplemented`` |
|   an op with a native kernel that cannot run here (dtype/layout) raises instead of falling back |
| ``TRN_NOTEBOOK_STRICT=1`` | ``strict`` | any CPU fallback raises (ours) |
| ``TRN_NOTEBOOK_CHIP=trn2|trn3`` | ``chip`` | chip model (ours) |
| ``TRN_NOTEBOOK_HBM_BYTES=N`` | ``hbm_bytes`` | override the simulated device memory capacity: bytes, or with a |
|   binary unit ``K``/``M``/``G``/``T`` (``KiB`` … ``TiB`` too), e.g. ``4G`` (ours) |
| ``TRN_NOTEBOOK_ALLOW_FLOAT64=1`` | ``allow_float64`` | run float64 on the device instead of raising (ours) |

A malformed value never raises (it would break every ``import torch`` through the autoload entry
point): it warns (:class:`ConfigWarning`) naming the variable, the value and the accepted forms,
and the default is used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from .. import state as _state

T = TypeVar("T")


class ConfigWarning(UserWarning):
    """An environment variable of the simulator has a value it does not accept; the default is used."""


_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_BYTES_RE = re.compile(r"(\d{1,20})\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
BYTES_FORMS = "a positive number of bytes, optionally with a binary unit: 25769803776, 24G, 512MiB, 1T"


def _bad(name: str, value: str, forms: str) -> None:
    message = f"{name}={value!r} is not valid; accepted: {forms}. Using the default instead."
    try:
        warnings.warn(message, ConfigWarning, stacklevel=4)
    except Warning:  # warnings are errors (-W error, pytest's filterwarnings=error)
        from .autoload import torch_is_importing

        if not torch_is_importing():
            raise
        import logging  # `import torch` must not fail because of us: say it on stderr instead

        logging.getLogger("trn_notebook.device").warning("%s", message)


def parse_bytes(text: str) -> int:
    """``'24G'``/``'512MiB'``/``'1024'`` as bytes; raises ``ValueError`` naming the accepted forms."""
    m = _BYTES_RE.fullmatch(text.strip())
    value = int(m.group(1)) * _UNITS[m.group(2).lower()] if m else 0
    if value <= 0:
        raise ValueError(f"{text!r} is not a size; use {BYTES_FORMS}")
    return value


def _bytes_setting(env: dict[str, str], name: str) -> int | None:
    value = env.get(name)
    if value is None or value.strip() == "":
        return None
    try:
        return parse_bytes(value)
    except ValueError:
        _bad(name, value, BYTES_FORMS)
        return None


def _chip_setting(env: dict[str, str], name: str, default: str) -> str:
    value = env.get(name)
    if value is None or value.strip() == "":
        return default
    from .chips import CHIPS, get_chip_spec

    try:
        return get_chip_spec(value).name
    except ValueError:
        _bad(name, value, ", ".join(sorted(CHIPS)))
        return default


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _flag(env: dict[str, str], name: str, default: bool = False) -> bool:
    """A boolean variable: 1/true/yes/on or 0/false/no/off (any case); anything else (``maybe``) warns and
    uses the default instead of being taken as on."""
    value = env.get(name)
    if value is None or value.strip() == "":
        return default
    word = value.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    _bad(name, value, "1/0, true/false, yes/no, on/off")
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
    def from_env(cls, env: dict[str, str] | None = None) -> DeviceConfig:
        """Build a config from environment variables (``os.environ`` by default); bad values warn, never raise."""
        env = dict(os.environ if env is None else env)
        return cls(
            chip=_chip_setting(env, "TRN_NOTEBOOK_CHIP", "trn2"),
            hbm_bytes=_bytes_setting(env, "TRN_NOTEBOOK_HBM_BYTES"),
            launch_blocking=_flag(env, "NEURON_LAUNCH_BLOCKING"),
            eager_fusion=_flag(env, "TORCH_NEURONX_ENABLE_CONCATENATION"),
            fallback_only_for_unimplemented=_flag(env, "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"),
            strict=_flag(env, "TRN_NOTEBOOK_STRICT"),
            allow_float64=_flag(env, "TRN_NOTEBOOK_ALLOW_FLOAT64"),
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
