"""Profiling on the simulated ``neuron`` device through ``torch.profiler`` (simulated device lanes).

``torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])`` records
as usual; the exported trace gains a ``neuron:0 (modeled)`` process and ``prof.key_averages()``
modeled device times (see :mod:`.adapter`). :func:`profile_table` is the op table as a DataFrame,
:func:`.summary.why_slow` the "why is it slow" analysis of a (saved) trace.

:class:`NeuronConfig` / :class:`ProfileMode` mirror TorchNeuron's names. They are **simulated**:
nothing here reads hardware counters; every device time is the simulator's cost model.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from . import adapter
from .adapter import install, session_of, uninstall

if TYPE_CHECKING:
    import pandas as pd


class ProfileMode(enum.Enum):
    """What a profile collects (TorchNeuron's names; here all simulated)."""

    DEVICE = "device"  # device lanes: eager ops, compiled graphs and their kernels
    RUNTIME = "runtime"  # runtime lanes: transfers, syncs, fallbacks, compile, host dispatch
    HOST_MEMORY = "host_memory"  # the HBM counter track (simulated device memory)
    CPU_UTIL = "cpu_util"  # accepted for compatibility; CPU activity is Kineto's own CPU events


@dataclass(frozen=True)
class NeuronConfig:
    """Neuron-specific profile options (simulated): which :class:`ProfileMode` lanes to produce."""

    modes: tuple[ProfileMode, ...] = field(default=(ProfileMode.DEVICE, ProfileMode.RUNTIME, ProfileMode.HOST_MEMORY))

    def __post_init__(self) -> None:
        modes = tuple(self.modes)
        for m in modes:
            if not isinstance(m, ProfileMode):
                raise TypeError(f"NeuronConfig.modes takes ProfileMode values, got {m!r}")
        object.__setattr__(self, "modes", modes)


def profile_table(prof: Any) -> pd.DataFrame:
    """Per-op table of a finished ``torch.profiler`` profile with modeled device columns.

    Columns: ``op``, ``calls``, ``cpu_total_ms`` / ``self_cpu_ms`` (wall, Kineto), ``device_ms`` /
    ``self_device_ms`` (modeled neuron time), ``device_launches`` (modeled device launches the op
    issued: an eager kernel or a compiled graph each count one), ``simulator_kernel`` (True for the
    simulator's inner CPU kernels — already inside their parent's time). Sorted by device time.
    Raises ``ValueError`` if ``prof`` is not a stopped ``torch.profiler.profile``.
    """
    import pandas as pd

    if not hasattr(prof, "key_averages"):
        raise ValueError(f"profile_table() takes a torch.profiler.profile object, got {type(prof).__name__}")
    try:
        averages = prof.key_averages()
    except (AssertionError, RuntimeError) as exc:
        raise ValueError(f"the profile has no results yet (stop it first: leave the `with` block): {exc}") from exc
    launches: dict[str, int] = {}
    for fe in prof.events():
        if fe.device_type == torch.autograd.DeviceType.CPU and fe.kernels:
            launches[fe.key] = launches.get(fe.key, 0) + len(fe.kernels)
    rows = []
    for a in averages:
        if a.device_type != torch.autograd.DeviceType.CPU:
            continue
        rows.append(
            (
                a.key,
                a.count,
                a.cpu_time_total / 1e3,
                a.self_cpu_time_total / 1e3,
                a.device_time_total / 1e3,
                a.self_device_time_total / 1e3,
                launches.get(a.key, 0),
                a.key.startswith("[neuron sim] "),
            )
        )
    cols = ["op", "calls", "cpu_total_ms", "self_cpu_ms", "device_ms", "self_device_ms", "device_launches",
            "simulator_kernel"]  # fmt: skip
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["self_device_ms", "self_cpu_ms"], ascending=False, ignore_index=True)


from .memory import dump_snapshot_json, fragmentation, install_memory_namespace, load_snapshot_json  # noqa: E402
from .run import NoDeviceActivity, ProfileResult, profile  # noqa: E402
from .summary import Summary, why_slow  # noqa: E402
from .traceio import TraceFormatError, load_trace, validate_chrome_trace  # noqa: E402

__all__ = [
    "NeuronConfig",
    "NoDeviceActivity",
    "ProfileMode",
    "ProfileResult",
    "Summary",
    "TraceFormatError",
    "adapter",
    "dump_snapshot_json",
    "fragmentation",
    "install",
    "install_memory_namespace",
    "load_snapshot_json",
    "load_trace",
    "profile",
    "profile_table",
    "session_of",
    "uninstall",
    "validate_chrome_trace",
    "why_slow",
]
