"""The ``neuron`` process-group backend: PyTorch's gloo moving the bytes of simulated device memory.

``dist.init_process_group("neuron")`` (or ``init_device_mesh("neuron", ...)``) builds a regular
``ProcessGroup`` whose ``cpu`` and ``neuron`` backends are both ``ProcessGroupGloo``. Every collective
on neuron tensors reaches PyTorch's ``c10d::*`` operators with the PrivateUse1 key; the kernels
registered here replace each neuron tensor by its CPU alias (:func:`host_view`, the same bytes)
and call the very same operator again, which gloo executes. Results land in device memory in place,
async ``Work`` objects are gloo's own. Each collective is charged to the modeled device clock on the
communication queue (:mod:`.commmodel`) and logged in :data:`comm_log`.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from .. import locks as _locks
from .. import state as _state
from ..device.clocks import clocks
from ..device.memory.runtime import host_view
from ..device.numerics.policy import integer_from_fp32, integer_to_fp32, no_integer_datapath, warn_integer_fp32
from ..device.numerics.policy import numerics as _numerics
from ..device.registration import is_registered
from ..device.streams import note_collective_end
from .commmodel import collective_seconds
from .ledger import comm_log

BACKEND = "neuron"
_lock = _locks.make("backend_registration", "distributed backend registration")
_registered = False
_lib: torch.library.Library | None = None
_extra_libs: list[torch.library.Library] = []

# c10d op -> (collective kind for the cost model, index of the async_op argument; None: the op has
# none — send/recv return a Work the caller waits on)
_OPS: dict[str, tuple[str, int | None]] = {
    "allreduce_": ("all_reduce", 4),
    "allreduce_coalesced_": ("all_reduce", 3),
    "broadcast_": ("broadcast", 4),
    "reduce_": ("reduce", 5),
    "allgather_": ("all_gather", 3),
    "_allgather_base_": ("all_gather", 3),
    "allgather_coalesced_": ("all_gather", 3),
    "allgather_into_tensor_coalesced_": ("all_gather", 3),
    "reduce_scatter_": ("reduce_scatter", 4),
    "_reduce_scatter_base_": ("reduce_scatter", 4),
    "reduce_scatter_tensor_coalesced_": ("reduce_scatter", 4),
    "alltoall_": ("all_to_all", 3),
    "alltoall_base_": ("all_to_all", 5),
    "gather_": ("gather", 4),
    "scatter_": ("scatter", 4),
    "barrier": ("barrier", 3),
    "monitored_barrier_": ("barrier", None),
    "send": ("send", None),
    "recv_": ("recv", None),
    "recv_any_source_": ("recv", None),
}


def _create_gloo(store: Any, rank: int, world_size: int, timeout: timedelta) -> Any:
    """Backend factory for ``dist.Backend.register_backend``: one gloo backend per device type."""
    from torch.distributed import ProcessGroupGloo

    return ProcessGroupGloo(store, rank, world_size, timeout)


def _to_host(value: Any, seen: dict[int, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        if value.device.type != "neuron":
            return value
        host = host_view(value)
        seen[id(host)] = value
        return host
    if isinstance(value, list):
        return [_to_host(v, seen) for v in value]
    return value


def _to_device(value: Any, seen: dict[int, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return seen.get(id(value), value)
    if isinstance(value, (list, tuple)):
        out = [_to_device(v, seen) for v in value]
        return out if isinstance(value, list) else tuple(out)
    return value


def _payload_bytes(kind: str, args: tuple[Any, ...]) -> int:
    """Bytes the cost model charges: the larger of the tensors given and received by this rank."""

    def total(v: Any) -> int:
        if isinstance(v, torch.Tensor):
            return v.numel() * v.element_size()
        if isinstance(v, (list, tuple)):
            return sum(total(x) for x in v)
        return 0

    if kind == "barrier":
        return 0
    tensors = [a for a in args[:2] if isinstance(a, (torch.Tensor, list))]
    return max((total(t) for t in tensors), default=0)


def _group(args: tuple[Any, ...]) -> Any:
    for a in args:
        if isinstance(a, torch.ScriptObject):
            try:
                return dist.ProcessGroup.unbox(a)
            except (RuntimeError, TypeError):
                continue
        if isinstance(a, dist.ProcessGroup):
            return a
    return None


def _checked_size(group: Any) -> int:
    """The group's size; raises ``RuntimeError`` if the group has no backend for neuron tensors."""
    if group is None:
        return 1
    try:
        group._get_backend(torch.device(BACKEND))
    except RuntimeError:
        raise RuntimeError(
            f"this process group has no backend for neuron tensors (it was created for "
            f"{group.name()!r}): use dist.init_process_group('neuron') (or 'cpu:gloo,neuron:neuron'), or move "
            "the tensors to the CPU for a gloo-only group"
        ) from None
    return int(group.size())


def _make_kernel(name: str, kind: str, async_index: int | None) -> Any:
    op = getattr(torch.ops.c10d, name).default

    def kernel(*args: Any) -> Any:
        world = _checked_size(_group(args))
        if not _hooked:
            _hook_optimizer_steps()
        seen: dict[int, torch.Tensor] = {}
        host_args = tuple(_to_host(a, seen) for a in args)
        t0 = time.perf_counter()
        stand_ins: list[tuple[torch.Tensor, torch.Tensor]] = []
        if _numerics.active and kind in _REDUCING:  # integers through FP32 (no integer reduction datapath)
            host_args = tuple(_fp32_integers(a, seen, stand_ins) if i < 2 else a for i, a in enumerate(host_args))
            if stand_ins:
                warn_integer_fp32(f"c10d::{name}", stand_ins[0][1].dtype, kind)
        result = op(*host_args)
        if stand_ins:
            _write_back_integers(result, stand_ins)
        _pending[:] = [w for w in _pending if not w.is_completed()]  # Python drops finished work, GIL held
        _pending.extend(_works(result))
        wall = time.perf_counter() - t0
        nbytes = _payload_bytes(kind, args)
        seconds, algorithm, fabric = collective_seconds(kind, nbytes, world)
        # Arguments equal to their default are not passed: async_op defaults to True.
        blocking = async_index is not None and async_index < len(args) and not bool(args[async_index])
        start = clocks.collective(kind, seconds, wall, blocking=blocking)
        note_collective_end(start + seconds)
        comm_log.record(kind, nbytes, world, algorithm, fabric, start, seconds, wall, blocking)
        return _to_device(result, seen)

    kernel.__name__ = f"neuron_{name}"
    return kernel


# The collectives whose reduction runs on the collective compute engine in FP32 (aws-neuron-sdk
# compiler/error-codes/EVRF061.rst L11-16 all-reduce, EVRF063.rst L11-16 reduce-scatter)
_REDUCING = frozenset({"all_reduce", "reduce_scatter"})


def _fp32_integers(
    value: Any, seen: dict[int, torch.Tensor], stand_ins: list[tuple[torch.Tensor, torch.Tensor]]
) -> Any:
    """Integer neuron tensors of a reducing collective replaced by FP32 copies (under ``trainium`` only)."""
    if isinstance(value, torch.Tensor):
        device = seen.get(id(value))
        if device is None or not no_integer_datapath(value.dtype):
            return value
        copy = integer_to_fp32(value)
        seen[id(copy)] = device
        stand_ins.append((copy, value))
        return copy
    if isinstance(value, list):
        return [_fp32_integers(v, seen, stand_ins) for v in value]
    return value


def _write_back_integers(result: Any, stand_ins: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Wait for the FP32 reduction, then convert each FP32 stand-in back into the caller's integer tensor."""
    for work in _works(result):
        work.wait()
    for copy, host in stand_ins:
        host.copy_(integer_from_fp32(copy, host.dtype))


def _works(result: Any) -> list[Any]:
    """The ``Work`` objects in a c10d op's result (boxed as script objects)."""
    found: list[Any] = []
    for item in result if isinstance(result, (tuple, list)) else (result,):
        if isinstance(item, torch.ScriptObject):
            try:
                found.append(dist.distributed_c10d.Work.unbox(item))
            except (RuntimeError, TypeError, AttributeError):
                continue
        elif isinstance(item, dist.distributed_c10d.Work):
            found.append(item)
    return found


def _register_wait_tensor(lib: torch.library.Library) -> None:
    """``wait_tensor`` of functional collectives (DTensor, TP): the compute queue waits for the collectives.

    The modeled wait is conservative (for every collective issued so far); PyTorch's own kernel then
    waits for the real work.
    """
    name = "_c10d_functional::wait_tensor"
    original = torch._C._dispatch_get_computed_kernel_for_dispatch_key(name, torch._C.DispatchKey.PrivateUse1)
    keyset = torch._C.DispatchKeySet(torch._C.DispatchKey.PrivateUse1)
    funcol = torch.library.Library("_c10d_functional", "IMPL")
    _extra_libs.append(funcol)

    def wait_tensor(tensor: torch.Tensor) -> torch.Tensor:
        clocks.wait_until(clocks.state.comm_free_at_s)
        # Wait for the gloo work issued so far with Work.wait(), which releases the GIL: PyTorch's own
        # kernel (called below) waits in C++ holding it, while gloo's worker thread may need the GIL to
        # free the previous work's CPU views of device memory; under load both then stalled until
        # gloo's 60 s timeout (the FSDP2 full_tensor() hang of issue 34).
        while _pending:
            _pending.pop(0).wait()
        return original.call_boxed(keyset, tensor)

    funcol.impl("wait_tensor", wait_tensor, "PrivateUse1")


def _step_waits_for_collectives(optimizer: Any, args: Any, kwargs: Any) -> None:
    """An optimizer step consumes gradients: on the modeled clock it starts after the collectives in flight.

    DDP waits for its gradient all-reduce in C++ (no Python hook sees it); the step is the first
    compute that needs the result, so this is where the wait becomes visible as exposed communication.
    """
    clocks.wait_until(clocks.state.comm_free_at_s)


_hooked = False
_pending: list[Any] = []  # gloo work issued by our kernels, waited (GIL released) by wait_tensor
# the c10d backend and its torch.library ops: registered once per process
_state.register(
    "c10d_backend", _state.Globals(__name__, "_registered", "_lib", "_extra_libs", "_hooked", "_pending"), reset=False
)


def _hook_optimizer_steps() -> None:
    """Install :func:`_step_waits_for_collectives` at the first collective (torch.optim loads lazily)."""
    global _hooked
    if not _hooked:
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(_step_waits_for_collectives)
        _hooked = True


def register() -> None:
    """Register the ``neuron`` c10d backend and the PrivateUse1 kernels of every ``c10d`` op (idempotent)."""
    global _registered, _lib
    with _lock:
        if _registered or not is_registered():  # the real torch_neuronx owns the device (and its backend)
            return
        if BACKEND not in dist.Backend.backend_list:
            dist.Backend.register_backend(BACKEND, _create_gloo, devices=["cpu", BACKEND])
        else:  # a real backend owns the name: do not replace it
            return
        lib = torch.library.Library("c10d", "IMPL")
        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"(?s).*Overriding a previously registered kernel")
            for name, (kind, async_index) in _OPS.items():
                lib.impl(name, _make_kernel(name, kind, async_index), "PrivateUse1")
            _register_wait_tensor(lib)
        _lib = lib
        _default_group_keeps_cpu()
        _registered = True


def _default_group_keeps_cpu() -> None:
    """``init_process_group()`` with no backend builds ``cpu:gloo,neuron:neuron`` while neuron is the accelerator.

    PyTorch maps an undefined backend to the default backend of the current accelerator only
    (``BackendConfig``: ``{accelerator: default_device_backend_map[accelerator]}``). Without this, a
    CPU-only program (which never touches ``neuron``) loses the ``cpu:gloo`` group it gets when
    trn-notebook is not installed ("No backend type associated with device type cpu"), and collectives on
    neuron tensors, which our kernels re-issue on CPU views, fail the same way. Every other backend
    string, and an undefined one with any other accelerator, keeps PyTorch's own mapping.
    """
    from torch.distributed import distributed_c10d as c10d

    config = c10d.BackendConfig
    original = config.__init__
    if getattr(original, "_trn_notebook", False):
        return

    def __init__(self: Any, backend: Any) -> None:
        if str(backend) == dist.Backend.UNDEFINED and torch._C._get_accelerator().type == BACKEND:
            backend = dist.Backend(f"cpu:{dist.Backend.GLOO},{BACKEND}:{BACKEND}")
        original(self, backend)

    __init__._trn_notebook = True  # type: ignore[attr-defined]
    config.__init__ = __init__  # type: ignore[method-assign]
