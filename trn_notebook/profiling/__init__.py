"""Profiling on the simulated ``neuron`` device through ``torch.profiler`` (simulated device lanes).

``torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])`` records
as usual; the exported trace gains a ``neuron:0 (modeled)`` process and ``prof.key_averages()``
modeled device times (see :mod:`.adapter`). :func:`profile_table` is the op table as a DataFrame,
:func:`.summary.why_slow` the "why is it slow" analysis of a (saved) trace.

:class:`NeuronConfig` / :class:`ProfileMode` mirror TorchNeuron's names. They are **simulated**:
nothing here reads hardware counters; every device time is the simulator's cost model.
"""

from __future__ import annotations

from . import adapter
from .adapter import install, session_of, uninstall
from .config import NeuronConfig, ProfileMode
from .memory import dump_snapshot_json, fragmentation, install_memory_namespace, load_snapshot_json
from .run import NoDeviceActivity, ProfileResult, profile
from .summary import Summary, why_slow
from .table import profile_table
from .traceio import TraceFormatError, load_trace, validate_chrome_trace

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
