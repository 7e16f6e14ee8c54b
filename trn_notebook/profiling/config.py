"""What a profile collects: TorchNeuron's profile modes and its ``NeuronConfig`` (simulated lanes)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


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
