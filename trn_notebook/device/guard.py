"""Python device guard and hooks for the ``neuron`` PrivateUse1 backend."""

from __future__ import annotations

import torch

from . import module


class NeuronHooks(torch._C._acc.PrivateUse1Hooks):
    """What PyTorch asks a backend about itself."""

    def is_available(self) -> bool:
        return True

    def has_primary_context(self, dev_id: int) -> bool:
        return True

    def is_built(self) -> bool:
        return True


class NeuronDeviceGuard(torch._C._acc.DeviceGuard):
    """Device guard: reports the current device and switches it (one simulated memory pool)."""

    def type_(self) -> torch._C._autograd.DeviceType:
        return torch._C._autograd.DeviceType.PrivateUse1

    def getDevice(self) -> int:
        return module.current_device()

    def exchangeDevice(self, device: int) -> int:
        prev = module.current_device()
        if device != prev:
            module.set_device(device)
        return prev

    def setDevice(self, device: int) -> None:
        module.set_device(device)

    def deviceCount(self) -> int:
        return module.device_count()
