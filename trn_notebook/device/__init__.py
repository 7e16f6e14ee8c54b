"""The simulated ``neuron`` device: a real PrivateUse1 backend with placement, clocks and memory."""

from .clocks import clocks
from .config import DeviceConfig, get_config, override, set_config
from .eager.dispatch import NeuronFallbackWarning
from .memory.allocator import OutOfDeviceMemory
from .memory.runtime import allocator, get_chip, host_view, set_chip, set_memory_capacity, wrap
from .ops.policy import policy, policy_table, set_op_category
from .placement import placement_log
from .registration import DeviceRegistrationError, is_registered, register, self_test

__all__ = [
    "DeviceConfig",
    "DeviceRegistrationError",
    "NeuronFallbackWarning",
    "OutOfDeviceMemory",
    "allocator",
    "clocks",
    "get_chip",
    "get_config",
    "host_view",
    "is_registered",
    "override",
    "placement_log",
    "policy",
    "policy_table",
    "register",
    "self_test",
    "set_chip",
    "set_config",
    "set_memory_capacity",
    "set_op_category",
    "wrap",
]
