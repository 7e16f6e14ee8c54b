"""The :class:`Backend` protocol: one interface to the facts every view shows, simulator or hardware."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

NOT_MEASURED = "not measured"  # a figure the live backend does not measure (e.g. per-op cost on hardware)
NA = "n/a"  # a fact that does not exist on the live backend

# One op's row in the placement view; host_ms/device_ms/bytes_* are None where not measured.
PLACEMENT_FIELDS = ("category", "calls", "host_ms", "device_ms", "bytes_h2d", "bytes_d2h", "source")


class SimulatorOnlyError(RuntimeError):
    """A simulator-only feature (chip model, cost model, capacity override …) was used on real hardware."""


@runtime_checkable
class Backend(Protocol):
    """What ``api.py``, the report (and, later, magics, widgets and the status bar) read."""

    name: str  # shown to people: "trn_notebook simulator" or "TorchNeuron (torch_neuronx 2.14.0)"
    is_simulator: bool

    def placement(self) -> dict[str, dict[str, Any]]:
        """``aten::op`` → PLACEMENT_FIELDS (None for what is not measured) since the last clear."""
        ...

    def executed_ops(self) -> dict[str, int | None]:
        """``aten::op`` → calls (None when the backend only names the ops)."""
        ...

    def fallback_ops(self) -> list[str]:
        """Sorted ``aten::op`` names that ran through the CPU fallback."""
        ...

    def clear_op_tracking(self) -> None:
        """Forget the placement records."""
        ...

    def memory_stats(self) -> dict[str, int]:
        """``torch.neuron.memory_stats()`` (CUDA-style keys)."""
        ...

    def compile_records(self) -> list[dict[str, Any]]:
        """One dict per compiled graph (``get_dynamo_metrics`` fields at least)."""
        ...

    def cache_dir(self) -> Path | None:
        """The persistent compile (NEFF) cache directory in force, None when disabled."""
        ...

    def device_properties(self) -> dict[str, Any]:
        """``torch.neuron.get_device_properties(0)`` as a dict (``name``, ``total_memory`` …)."""
        ...

    def device_time_s(self) -> float | None:
        """Modeled device seconds so far (simulator), None where device time is not modeled."""
        ...

    def require_simulator(self, feature: str, instead: str) -> None:
        """Raise :class:`SimulatorOnlyError` naming ``feature`` and what to use ``instead`` on hardware."""
        ...


def simulator_only(feature: str, instead: str, backend_name: str) -> SimulatorOnlyError:
    """The error for using ``feature`` on ``backend_name``, with the hardware alternative."""
    return SimulatorOnlyError(
        f"{feature} is simulator-only: it changes or reads the trn_notebook simulator's models, and the live "
        f"backend is {backend_name}. On hardware: {instead}. (trn_notebook.port_check(path) lists every such call.)"
    )
