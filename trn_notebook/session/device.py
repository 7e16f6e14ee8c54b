"""Choose the default device of the notebook (``%trn device``) and describe it in a card."""

from __future__ import annotations

import torch

from .. import envvars, facts
from ..device import register
from ..device.chips import CHIPS as CHIP_SPECS
from ..device.config import get_config, set_config
from ..device.memory.runtime import get_chip, set_chip
from ..device.numerics.policy import numerics as _numerics
from ..device.numerics.policy import numerics_policy, parse_numerics
from ..display.results import Card, fmt_bytes
from ..facts.base import NA
from ..facts.status import current_device

CHIPS = tuple(sorted(CHIP_SPECS))
RNG_NOTE = (
    "random numbers (torch.randn, rand, randint, dropout masks): on Trainium, TorchNeuron draws them on the "
    "device with an NKI kernel on the GpSimd engine, seeded by torch.neuron.manual_seed (its 'Random number "
    "generation' page); the simulator draws them with the host generator instead, so they count as cpu_fallback "
    "in %trn ops (a host round trip the device does not pay) and the values are CPU's, not the device's. They "
    "raise no warning; any other fallback warns once, naming its cell and line"
)


HARDWARE_OPTIONS = (
    "nothing to set in the notebook: the instance decides the chip and cores (NEURON_LOGICAL_NC_CONFIG), "
    "NEURON_LAUNCH_BLOCKING=1 / TORCH_NEURONX_ENABLE_CONCATENATION=1 set before the kernel starts choose "
    "blocking launches and eager fusion; on hardware the numerics are the hardware's (the compiler's --auto-cast in "
    "NEURON_CC_FLAGS chooses the precision)"
)


class DeviceUnavailableError(RuntimeError):
    """The live hardware backend has not registered a ``neuron`` device type with torch."""


def device_card() -> Card:
    """A card describing the current default device (chip, cores, HBM, mode) or the CPU, and the live backend."""
    device = current_device()
    backend = facts.current()
    if not device.startswith("neuron"):
        return Card(
            f"default device: {device}",
            [("device", device), ("live backend", backend.name)],
            ["new tensors and modules are created on the CPU; `%trn device neuron` switches to the device"],
        )
    if not backend.is_simulator:
        return _hardware_card(device, backend)
    chip, cfg = get_chip(), get_config()
    capacity = backend.memory_snapshot().capacity
    return Card(
        f"default device: {device}",
        [
            ("device", f"{device} ({chip.long_name} NeuronCore)"),
            ("live backend", f"{backend.name} (trn-notebook {_version()}; no Trainium hardware in this process)"),
            ("mirrors", _mirrors()),
            ("chip", f"{chip.name}: {chip.physical_cores} physical cores, {chip.logical_cores} logical cores"),
            ("HBM", f"{fmt_bytes(capacity)} per device ({fmt_bytes(chip.hbm_bytes)} per chip)"),
            ("host memory", _host_row()),
            ("mode", "simulator: device times are modeled by the cost model, never measured on this machine"),
            ("launch blocking", "on (every op is a sync point)" if cfg.launch_blocking else "off (asynchronous)"),
            ("eager fusion", "on" if cfg.eager_fusion else "off"),
            ("numerics", numerics_policy().label()),
        ],
        [
            "new tensors and modules are created on neuron; `%trn device cpu` switches back",
            RNG_NOTE,
        ],
    )


def _version() -> str:
    from .._version import __version__

    return str(__version__)


def _mirrors() -> str:
    from .._version import MIRRORS

    return MIRRORS


def _hardware_card(device: str, backend: facts.Backend) -> Card:
    """The device card on real hardware: TorchNeuron's device properties; simulator rows say n/a."""
    props = backend.device_properties()
    total = props.get("total_memory")
    cores = props.get("logical_core_count", props.get("multi_processor_count", NA))
    blocking = envvars.flag("NEURON_LAUNCH_BLOCKING")
    return Card(
        f"default device: {device}",
        [
            ("device", f"{device} ({props.get('name', NA)})"),
            ("live backend", f"{backend.name} on Trainium hardware"),
            ("logical cores", str(cores)),
            ("HBM", fmt_bytes(total) if isinstance(total, int) else NA),
            ("mode", "hardware: device times are measured (torch.profiler), not modeled; the cost model is n/a"),
            ("launch blocking", "on (NEURON_LAUNCH_BLOCKING=1)" if blocking else "off (asynchronous)"),
            ("chip model, capacity override", "simulator-only (n/a on hardware)"),
        ],
        ["new tensors and modules are created on neuron; `%trn device cpu` switches back", RNG_NOTE],
    )


def _host_row() -> str:
    """The host guard: the simulated HBM is host memory, refused (simulated OOM) before the host runs out."""
    from ..device.memory import hostmem

    avail = hostmem.available_bytes()
    if avail is None:
        return "unknown on this platform (no guard): keep the simulated capacity below the machine's memory"
    return (
        f"{fmt_bytes(avail)} available now; the simulated HBM lives in it, so allocations are refused (simulated OOM) "
        f"while {fmt_bytes(hostmem.RESERVE)} are still free"
    )


def use_device(
    name: str,
    *,
    chip: str | None = None,
    cores: int | None = None,
    blocking: bool | None = None,
    fusion: bool | None = None,
    numerics: str | None = None,
) -> Card:
    """Make ``"neuron"`` or ``"cpu"`` the default device for new tensors and return its card.

    For ``"neuron"``: registers the device if needed, selects the chip model / logical cores when
    given, and sets launch blocking, eager fusion and the numerics policy (``"trainium,autocast=matmult"``,
    see :func:`~trn_notebook.device.numerics.policy.parse_numerics`) when given (``None`` keeps the current value).
    Raises ``ValueError`` for an unknown device, chip or numerics spec, or a core count out of range.
    """
    if name == "cpu":
        if any(v is not None for v in (chip, cores, blocking, fusion, numerics)):
            raise ValueError("--chip, --cores, --blocking, --fusion and --numerics apply to the neuron device only")
        torch.set_default_device("cpu")
        return device_card()
    if name != "neuron":
        raise ValueError(f"unknown device {name!r}; valid devices: neuron, cpu")
    backend = facts.current()
    if not backend.is_simulator:
        return _use_hardware(backend, chip=chip, cores=cores, blocking=blocking, fusion=fusion, numerics=numerics)
    register()
    policy = parse_numerics(numerics) if numerics is not None else None  # validate before changing anything
    if chip is not None or cores is not None:
        set_chip(chip or get_chip().name, cores=cores)
    changes: dict[str, object] = {}
    if blocking is not None:
        changes["launch_blocking"] = blocking
    if fusion is not None:
        changes["eager_fusion"] = fusion
    if changes:
        set_config(**changes)
    if policy is not None:
        _numerics.set(policy)
    torch.set_default_device(torch.device("neuron", 0))  # with an index: get_default_device() then allocates nothing
    return device_card()


def _use_hardware(
    backend: facts.Backend,
    *,
    chip: str | None,
    cores: int | None,
    blocking: bool | None,
    fusion: bool | None,
    numerics: str | None = None,
) -> Card:
    """``neuron:0`` of TorchNeuron as the default device.

    Raises ``SimulatorOnlyError`` for the simulator's options, :class:`DeviceUnavailableError` when torch has no
    ``neuron`` device type.
    """
    options = (("chip", chip), ("cores", cores), ("blocking", blocking), ("fusion", fusion), ("numerics", numerics))
    given = [f"--{n}" for n, v in options if v is not None]
    if given:
        backend.require_simulator(f"%trn device neuron {' '.join(given)}", HARDWARE_OPTIONS)
    try:
        device = torch.device("neuron", 0)
    except RuntimeError as exc:
        raise DeviceUnavailableError(
            f"the live backend is {backend.name}, but torch has no 'neuron' device type ({exc}); "
            "torch_neuronx registers it when it is imported: `import torch_neuronx`, or reinstall torch-neuronx"
        ) from None
    torch.set_default_device(device)
    return device_card()
