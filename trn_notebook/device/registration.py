"""Registration of the ``neuron`` PrivateUse1 device (idempotent) and its start-up self-test."""

from __future__ import annotations

import importlib
import logging
import sys
import types
from typing import Any

import torch

from .. import locks as _locks
from .. import state as _state

log = logging.getLogger("trn_notebook.device")

_lock = _locks.make("device_registration", "device registration")
_registered = False
_libs: list[torch.library.Library] = []
# torch.library registrations live as long as the process (torch cannot unregister them)
_state.register("device_registration", _state.Globals(__name__, "_registered", "_libs"), reset=False)

# Every private torch API the device relies on; the self-test checks each one exists.
PRIVATE_APIS = (
    "torch.utils.backend_registration._setup_privateuseone_for_python_backend",
    "torch._C._construct_storage_from_data_pointer",
    "torch._C._acc.create_empty_tensor",
    "torch._C._acc.PrivateUse1Hooks",
    "torch._C._acc.DeviceGuard",
    "torch._C._get_privateuse1_backend_name",
    "torch._tensor_str._str",
    "torch._tensor_str._tensor_str",
)
# Checked when dynamo is loaded (by the compiler, or at registration if already imported).
DYNAMO_APIS = (
    "torch._dynamo.eval_frame.set_code_exec_strategy",
    "torch._dynamo.eval_frame.FrameExecStrategy",
    "torch._dynamo.eval_frame.FrameAction",
    "torch._dynamo.backends.registry._BACKENDS",
    "torch._dynamo.backends.registry._COMPILER_FNS",
    "torch._dynamo.callback.callback_handler",
)
# The torch range pyproject admits (TorchNeuron runs on 2.14) and the version CI tests (constraints/ci.txt).
SUPPORTED_TORCH = ">=2.13,<2.15"
TESTED_TORCH = "2.13.0"


class DeviceRegistrationError(RuntimeError):
    """The installed torch lacks a private API the simulated device needs."""


class NeuronOwnedElsewhere(DeviceRegistrationError):
    """Another package registered PrivateUse1 as ``neuron`` first; it keeps it (TorchNeuron 2.34's rule)."""


def _resolve(path: str) -> Any:
    """The object at a dotted path, importing submodules on the way; raises AttributeError if absent."""
    parts = path.split(".")
    obj: Any = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=2):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                raise AttributeError(path) from None
    return obj


def self_test(apis: tuple[str, ...] | None = None) -> None:
    """Check every private torch API used; raises :class:`DeviceRegistrationError` naming each missing one."""
    missing = []
    for path in PRIVATE_APIS if apis is None else apis:
        try:
            _resolve(path)
        except AttributeError:
            missing.append(path)
    if missing:
        raise DeviceRegistrationError(
            f"trn_notebook's simulator needs private PyTorch APIs missing from torch {torch.__version__}: "
            f"{', '.join(missing)}. trn_notebook supports torch{SUPPORTED_TORCH} and is tested with "
            f"{TESTED_TORCH}; install that with `pip install torch=={TESTED_TORCH}` (or report the missing API)."
        )


def _functional_self_test() -> None:
    """Exercise the device end to end once (alloc, op, view write, copy back, free).

    Skipped when the simulated HBM cannot hold its few bytes (``TRN_NOTEBOOK_HBM_BYTES=1``): registering
    must not fail for a setting; the first allocation of the user raises the out-of-memory error instead."""
    try:
        x = torch.arange(6, dtype=torch.float32).reshape(2, 3).to("neuron")
    except torch.OutOfMemoryError:
        return
    y = (x * 2 + 1)[:, 1]
    y.add_(1)
    got = y.cpu().tolist()
    if got != [4.0, 10.0]:
        raise DeviceRegistrationError(f"neuron device self-test computed {got}, expected [4.0, 10.0]")
    from .clocks import clocks
    from .placement import placement_log

    placement_log.reset()  # the self-test's ops are not the user's: their first source line would stick
    clocks.reset()


def _patch_printing() -> None:
    import torch._tensor_str as ts

    from .eager.dispatch import flags, record_sync
    from .memory.runtime import host_view

    original = ts._str
    if getattr(original, "_trn_notebook", False):
        return

    def _str(self: torch.Tensor, *, tensor_contents: str | None = None) -> str:
        # Only real device tensors: fake/functional tensors (compile-time tracing) have no bytes to read.
        if (
            tensor_contents is None
            and type(self) in (torch.Tensor, torch.nn.Parameter)
            and self.device.type == "neuron"
            and self.layout == torch.strided
        ):
            record_sync("print / repr")
            flags.formatting += 1
            try:
                host = host_view(self.detach())
                with torch.no_grad():
                    tensor_contents = ts._tensor_str(host, len("tensor("))
                return original(self, tensor_contents=tensor_contents)
            finally:
                flags.formatting -= 1
        return original(self, tensor_contents=tensor_contents)

    _str._trn_notebook = True  # type: ignore[attr-defined]
    ts._str = _str


def _patch_storage_constructor() -> None:
    """``torch.UntypedStorage(n, device="neuron")`` would segfault (no C++ allocator): build it ourselves."""
    from .eager.kernels import neuron_storage

    cls = torch.UntypedStorage
    if getattr(cls.__new__, "_trn_notebook", False):
        return
    original_new = cls.__new__

    def __new__(klass, *args, device=None, **kwargs):
        if device is not None and torch.device(device).type == "neuron":
            if len(args) == 1 and isinstance(args[0], int) and not kwargs:
                return neuron_storage(args[0])
            if not args and not kwargs:
                return neuron_storage(0)
            raise TypeError("torch.UntypedStorage(..., device='neuron') takes only a size in bytes")
        return (
            original_new(klass, *args, device=device, **kwargs)
            if device is not None
            else original_new(klass, *args, **kwargs)
        )

    __new__._trn_notebook = True  # type: ignore[attr-defined]
    cls.__new__ = staticmethod(__new__)  # type: ignore[method-assign,assignment]


def _patch_pin_memory() -> None:
    """Pinning host memory for the neuron device is a no-op (DataLoader(pin_memory=True) works)."""
    import torch.utils.data._utils.pin_memory as pm

    original = pm.pin_memory
    if getattr(original, "_trn_notebook", False):
        return

    def pin_memory(data: Any, device: str | None = None) -> Any:
        if device is None or "neuron" in str(device):
            return data
        return original(data, device)

    pin_memory._trn_notebook = True  # type: ignore[attr-defined]
    pm.pin_memory = pin_memory
    import torch.utils.data.dataloader as dl

    if hasattr(dl, "_utils"):
        dl._utils.pin_memory.pin_memory = pin_memory


def _register_autocast(lib_fallback: torch.library.Library) -> None:
    """Autocast on ``neuron``: lower-precision ops cast their inputs, everything else falls through."""
    lib_fallback.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
    lib = torch.library.Library("aten", "IMPL")
    _libs.append(lib)
    from .ops.autocast import register_autocast_kernels

    register_autocast_kernels(lib)


def skip_dynamo_tracing() -> None:
    """Dynamo must not trace our kernels while a compiled function runs (bogus graph breaks).

    Called at registration when ``torch._dynamo`` is already imported, else by the compiler when it
    registers (importing dynamo here would make every ``import torch`` ~1 s slower). Idempotent.
    """
    import torch._dynamo.eval_frame  # noqa: F401 - makes the API paths resolvable

    self_test(DYNAMO_APIS)
    from torch._dynamo.eval_frame import FrameAction, FrameExecStrategy, set_code_exec_strategy

    strategy = FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP)
    for name, mod in list(sys.modules.items()):
        if not name.startswith("trn_notebook.device") or mod is None:
            continue
        for obj in vars(mod).values():
            for fn in _functions_of(obj):
                set_code_exec_strategy(fn.__code__, strategy)


def _functions_of(obj: Any) -> list[types.FunctionType]:
    if isinstance(obj, types.FunctionType) and obj.__module__.startswith("trn_notebook.device"):
        return [obj]
    if isinstance(obj, type) and obj.__module__.startswith("trn_notebook.device"):
        return [v for v in vars(obj).values() if isinstance(v, types.FunctionType)]
    return []


def is_registered() -> bool:
    """True once :func:`register` has run in this process."""
    return _registered


def register() -> None:
    """Register the ``neuron`` device with PyTorch (idempotent); raises if torch lacks an API we use."""
    global _registered
    with _lock:
        if _registered:
            return
        self_test()
        existing = torch._C._get_privateuse1_backend_name()
        if existing not in ("privateuseone", "neuron"):
            raise DeviceRegistrationError(
                f"PrivateUse1 is already registered as {existing!r} by another package; "
                "only one out-of-tree device can own it per process"
            )
        from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

        from . import module as device_module

        owner = getattr(torch, "neuron", None)
        if existing == "neuron" and owner is not None and owner is not device_module:
            # nothing of ours is registered: no fallback, no kernels, no routes on top of another backend
            name = getattr(owner, "__name__", type(owner).__name__)
            raise NeuronOwnedElsewhere(
                f"the neuron device is already registered by {name!r}, imported first; it keeps the device (the "
                "first PrivateUse1 backend imported owns it) and the trn_notebook simulator stands down. To use the "
                "simulator instead, start a new process that imports trn_notebook (or torch, whose backend entry "
                "point loads it) before that package; to keep that backend and never load the simulator, set "
                "TORCH_DEVICE_BACKEND_AUTOLOAD=0"
            )
        from .eager import storage_resize as _storage_resize
        from .eager.dispatch import run_op
        from .eager.host_ops import register_host_composites
        from .eager.kernels import register_kernels
        from .eager.varlen_attention import register_varlen_attention
        from .guard import NeuronDeviceGuard, NeuronHooks
        from .ops.accelerator_ops import register_decompositions
        from .ops.attention import register_attention
        from .ops.flex import refuse_flex_attention_on_neuron

        if existing == "privateuseone":
            _setup_privateuseone_for_python_backend(
                "neuron", backend_module=device_module, hook=NeuronHooks(), device_guard=NeuronDeviceGuard()
            )
        lib_fallback = torch.library.Library("_", "IMPL")
        lib_fallback.fallback(run_op, "PrivateUse1")
        lib = torch.library.Library("aten", "IMPL")
        register_kernels(lib)
        register_attention(lib)
        register_varlen_attention(lib)  # varlen_attn's flash kernels, per sequence (TorchNeuron 2.34: native)
        register_decompositions(lib)  # accelerator-only ops ATen calls on neuron (nn.LSTM's fused cell)
        register_host_composites(lib)
        _libs.extend([lib_fallback, lib])
        _register_autocast(lib_fallback)
        _patch_printing()
        _patch_storage_constructor()
        _patch_pin_memory()
        from .tying import install as keep_parameters_on_conversion

        keep_parameters_on_conversion()
        from . import accelerator_routes

        accelerator_routes.install()  # torch.accelerator(.memory): every function answers for neuron
        _storage_resize.install()  # UntypedStorage.resize_ on neuron (FSDP2 frees/regathers parameters)
        refuse_flex_attention_on_neuron()  # PyTorch refuses the device; we say why and what to use
        if "torch._dynamo" in sys.modules:
            skip_dynamo_tracing()
        _registered = True
        _functional_self_test()
        log.debug("registered the simulated neuron device (torch %s)", torch.__version__)
