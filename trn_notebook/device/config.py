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
| ``TRN_NOTEBOOK_HBM_BYTES=N`` | ``hbm_bytes`` | override the simulated device memory capacity (ours) |
| ``TRN_NOTEBOOK_ALLOW_FLOAT64=1`` | ``allow_float64`` | run float64 on the device instead of raising (ours) |
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


def _flag(env: dict[str, str], name: str, default: bool = False) -> bool:
    value = env.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() not in {"0", "false", "no", "off"}


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
        """Build a config from environment variables (``os.environ`` by default)."""
        env = dict(os.environ if env is None else env)
        hbm = env.get("TRN_NOTEBOOK_HBM_BYTES")
        return cls(
            chip=env.get("TRN_NOTEBOOK_CHIP", "trn2") or "trn2",
            hbm_bytes=int(hbm) if hbm else None,
            launch_blocking=_flag(env, "NEURON_LAUNCH_BLOCKING"),
            eager_fusion=_flag(env, "TORCH_NEURONX_ENABLE_CONCATENATION"),
            fallback_only_for_unimplemented=_flag(env, "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"),
            strict=_flag(env, "TRN_NOTEBOOK_STRICT"),
            allow_float64=_flag(env, "TRN_NOTEBOOK_ALLOW_FLOAT64"),
        )


_current = DeviceConfig.from_env()


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
