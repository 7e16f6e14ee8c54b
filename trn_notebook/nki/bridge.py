"""``nki_op``: a kernel as a ``torch.library.custom_op`` that runs on ``neuron`` tensors and compiles.

``@trn_notebook.nki_op("mylib::rmsnorm", mutates_args=())`` (TorchNeuron's signature) wraps a
``@nki.jit`` kernel: the op's implementation simulates the kernel on the tensors' host bytes,
returns ``neuron`` tensors, and charges its modeled time (plus one eager launch) to the device clock
and to the placement log under the category ``custom_kernel``. The fake implementation takes output
shapes from a shape-only run of the kernel, so ``torch.compile(fullgraph=True, backend="neuron")``
traces it; the neuron compiler lowers it to one ``kernel_call`` node (see ``compiler/kernel_call.py``).
Autograd is passed through: give ``backward=`` (and ``setup_context=``) or call
``op.register_autograd`` later, exactly as with ``torch.library``.
"""

from __future__ import annotations

import hashlib
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .. import state as _state
from ..device import costmodel as device_costmodel
from ..device.clocks import clocks
from ..device.memory.runtime import host_view, wrap
from ..device.placement import placement_log
from .jit import Kernel, as_kernel

CATEGORY = "custom_kernel"
LIST = -1
"""``outputs=LIST``: the op returns ``Tensor[]``, as many tensors as the kernel returns (``nki.jit`` under compile)."""
_TYPES = {bool: "bool", int: "int", float: "float", str: "str"}
_registered: dict[str, tuple[str, Any]] = {}  # op name -> (kernel version, op): torch.library keeps them too
_state.register("nki_ops", _state.Globals(__name__, "_registered"), reset=False)  # ops outlive reset()


def _schema(fn: Callable[..., Any], mutates: tuple[str, ...], outputs: int, types: dict[str, str] | None = None) -> str:
    """``(Tensor a, Tensor(a0!) b, float eps=1e-06) -> Tensor`` from the kernel's signature.

    Parameters without a default are tensors unless ``types`` names another schema type for them.
    """
    params = []
    for i, p in enumerate(inspect.signature(fn).parameters.values()):
        if p.default is inspect.Parameter.empty:
            given = (types or {}).get(p.name, "Tensor")
            alias = f"(a{i}!)" if p.name in mutates and given == "Tensor" else ""
            params.append(f"{given}{alias} {p.name}")
        else:
            kind = _TYPES.get(type(p.default))
            if kind is None:
                raise TypeError(
                    f"nki_op: parameter {p.name!r} has a default of type {type(p.default).__name__}; use int/float/bool/str"
                )
            params.append(f"{kind} {p.name}={p.default!r}")
    unknown = set(mutates) - {p.split()[-1] for p in params if p.startswith("Tensor")}
    if unknown:
        raise ValueError(f"nki_op: mutates_args names {sorted(unknown)} that are not tensor parameters of the kernel")
    if outputs == LIST:
        ret = "Tensor[]"
    else:
        ret = "()" if outputs == 0 else "Tensor" if outputs == 1 else "(" + ", ".join(["Tensor"] * outputs) + ")"
    return f"({', '.join(params)}) -> {ret}"


def _version(fn: Callable[..., Any]) -> str:
    code = fn.__code__
    h = hashlib.sha256(code.co_code + repr(code.co_consts).encode() + repr(code.co_names).encode())
    return h.hexdigest()[:12]


def check_op_name(name: str) -> None:
    """Raise ``ValueError`` unless ``name`` is ``"namespace::op"`` in a user namespace (not
    :data:`~trn_notebook.compiler.namespaces.RESERVED_NAMESPACES` nor starting with ``_``)."""
    from ..compiler.namespaces import is_user_namespace

    if not isinstance(name, str):
        raise TypeError(f"nki_op name must be a string 'namespace::op_name', got {type(name).__name__}")
    ns, sep, op = name.partition("::")
    if not name.isascii():
        raise ValueError(
            f"nki_op name {name!r} has non-ASCII characters; operator names are ASCII identifiers "
            "'namespace::op_name' (e.g. 'mylib::softmax')"
        )
    if not sep or not ns.isidentifier() or not op.split(".")[0].isidentifier():
        raise ValueError(f"nki_op name must be 'namespace::op_name' (e.g. 'mylib::softmax'), got {name!r}")
    if not is_user_namespace(ns):
        raise ValueError(
            f"nki_op({name!r}): the namespace {ns!r} belongs to PyTorch or trn-notebook; a kernel may not replace "
            f"or add operators there. Use your own namespace, e.g. 'mylib::{op}'"
        )


def nki_op(
    name: str,
    *,
    mutates_args: tuple[str, ...] | list[str] | str = (),
    outputs: int = 1,
    backward: Callable[..., Any] | None = None,
    setup_context: Callable[..., Any] | None = None,
    reference: Callable[..., Any] | None = None,
    types: dict[str, str] | None = None,
) -> Callable[[Any], Any]:
    """Decorator: register kernel ``fn`` as custom op ``name`` (``"ns::op"``); returns the op.

    Gradients: ``backward``/``setup_context`` go to ``register_autograd`` unchanged; or give
    ``reference`` (a PyTorch function computing the same thing) and the backward is the vector-Jacobian
    product of the reference, so a model using the kernel trains.

    ``outputs``: how many tensors the kernel returns (0, 1, n), or :data:`LIST` for ``Tensor[]``;
    ``types``: schema types (``"float"``, ``"int"``...) of parameters without defaults that are not tensors.
    Raises ``ValueError`` for a name outside a user namespace (``aten::add``, ``prims::…``: a kernel
    may not replace or join PyTorch's own operators), ``ValueError``/``TypeError`` for a malformed
    name or signature (from ``torch.library``).
    """
    check_op_name(name)
    if isinstance(outputs, bool) or not isinstance(outputs, int) or (outputs < 0 and outputs != LIST):
        raise ValueError(
            f"nki_op({name!r}, outputs={outputs!r}): outputs is how many tensors the kernel returns (0, 1, 2, ...) "
            "or trn_notebook.nki.bridge.LIST (-1) for a list of any length"
        )
    if not isinstance(mutates_args, str | tuple | list) or not all(isinstance(m, str) for m in mutates_args):
        raise TypeError(
            f"nki_op({name!r}, mutates_args={mutates_args!r}): give the names of the tensor parameters the kernel "
            "writes, as a tuple of strings (() when it writes none)"
        )
    mutates = (mutates_args,) if isinstance(mutates_args, str) else tuple(mutates_args)

    def decorate(kernel: Any) -> Any:
        from .standdown import real_nki

        k: Kernel = as_kernel(kernel)
        schema = _schema(k.fn, mutates, outputs, types)
        version = _version(k.fn)
        if name in _registered:
            known, existing = _registered[name]
            if known == version:
                return existing  # the same kernel again (a notebook cell re-run): the op already stands
            raise ValueError(
                f"nki_op({name!r}) is already registered in this process with a different kernel; PyTorch cannot "
                f"replace an operator while the process runs. Register this version under a new name (e.g. "
                f"'{name}_v2') or restart the kernel"
            )
        if real_nki() is not None:  # the real NKI and torch_neuronx own kernels: register the plain call
            op = torch.library.custom_op(name, lambda *a: kernel(*a), mutates_args=mutates, schema=schema)
            return op

        def run(*args: Any) -> Any:  # the compiled kernel_call: a tensor or a tuple, as the IR node's outputs
            from torch._subclasses.fake_tensor import FakeTensor

            if any(isinstance(a, FakeTensor) for a in args):  # shape propagation (e.g. the cache's check)
                out = _fake(*args)
                return _from_list(out) if outputs == LIST else out
            return _clone_aliases(_counted(k(*args)), args)

        def _counted(out: Any) -> Any:
            got = 0 if out is None else 1 if isinstance(out, torch.Tensor) else len(out)
            if outputs != LIST and got != outputs:
                raise ValueError(
                    f"nki_op({name!r}, outputs={outputs}): the kernel returned {got} tensor(s); set outputs={got} "
                    f"(or return {outputs} tensors from the kernel)"
                )
            return out

        def impl(*args: Any) -> Any:
            if not any(isinstance(a, torch.Tensor) and a.device.type == "neuron" for a in args):
                return _as_list(run(*args)) if outputs == LIST else run(*args)
            t0 = time.perf_counter()
            hosts = [host_view(a) if isinstance(a, torch.Tensor) and a.device.type == "neuron" else a for a in args]
            result = k.run(*hosts)
            outs = _clone_aliases(_counted(result.outputs), hosts)
            outs = (
                tuple(wrap(o) for o in outs) if isinstance(outs, tuple) else (wrap(outs) if outs is not None else None)
            )
            wall = time.perf_counter() - t0
            consts = device_costmodel.get_cost_constants()
            device_s = consts.eager_launch_s + result.report.modeled_s
            clocks.launch(name, device_s, consts.eager_host_dispatch_s, wall, kind="op")
            placement_log.record(name, CATEGORY, wall, device_s)
            return _as_list(outs) if outputs == LIST else outs

        op = torch.library.custom_op(name, impl, mutates_args=mutates, schema=schema)
        specs: dict[Any, Any] = {}

        def output_specs(args: tuple[Any, ...]) -> Any:
            key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else a for a in args)
            if key not in specs:
                from torch._subclasses.fake_tensor import unset_fake_temporarily

                with unset_fake_temporarily():
                    metas = [
                        torch.empty(s, dtype=d, device="meta") if isinstance(a, torch.Tensor) else a
                        for a, (s, d) in _pairs(args, key)
                    ]
                    run_ = k.run(*metas, meta=True)
                outs = run_.outputs
                specs[key] = (
                    None
                    if outs is None
                    else tuple((tuple(o.shape), o.dtype) for o in (outs if isinstance(outs, tuple) else (outs,))),
                    run_.report.modeled_s,
                )
            return specs[key]

        @op.register_fake
        def _fake(*args: Any) -> Any:
            shapes, _ = output_specs(args)
            if shapes is None:
                return None
            device = next(a.device for a in args if isinstance(a, torch.Tensor))
            outs = tuple(torch.empty(s, dtype=d, device=device) for s, d in shapes)
            if outputs == LIST:
                return list(outs)
            return outs[0] if outputs == 1 else outs

        if backward is not None:
            op.register_autograd(backward, setup_context=setup_context)
        elif reference is not None:
            bw, sc = _reference_autograd(reference)
            op.register_autograd(bw, setup_context=sc)
        setattr(op._opoverload, "trn_kernel_call", KernelEntry(name, version, run, output_specs))  # noqa: B010
        op.kernel = k  # type: ignore[attr-defined]
        _registered[name] = (version, op)
        return op

    return decorate


def _reference_autograd(reference: Callable[..., Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``(backward, setup_context)`` computing gradients through ``reference`` (a PyTorch function)."""

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.save_for_backward(*(a for a in inputs if isinstance(a, torch.Tensor)))
        ctx.layout = [isinstance(a, torch.Tensor) for a in inputs]
        ctx.consts = [a for a in inputs if not isinstance(a, torch.Tensor)]

    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        tensors = iter(t.detach().requires_grad_(t.is_floating_point()) for t in ctx.saved_tensors)
        consts = iter(ctx.consts)
        args = [next(tensors) if is_t else next(consts) for is_t in ctx.layout]
        with torch.enable_grad():
            out = reference(*args)
        outs = out if isinstance(out, tuple) else (out,)
        wrt = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        got = iter(torch.autograd.grad(outs, wrt, grads, allow_unused=True))
        return tuple(next(got) if isinstance(a, torch.Tensor) and a.requires_grad else None for a in args)

    return backward, setup_context


def _pairs(args: tuple[Any, ...], key: tuple[Any, ...]) -> list[tuple[Any, Any]]:
    return [(a, kk if isinstance(a, torch.Tensor) else (None, None)) for a, kk in zip(args, key)]


def _as_list(out: Any) -> list[Any]:
    return [] if out is None else list(out) if isinstance(out, tuple) else [out]


def _from_list(outs: list[Any]) -> Any:
    return None if not outs else outs[0] if len(outs) == 1 else tuple(outs)


def _clone_aliases(out: Any, args: Any) -> Any:
    """custom_op outputs may not alias inputs: clone an output that is an (unmutated) input."""
    ids = {id(a) for a in args if isinstance(a, torch.Tensor)}
    if isinstance(out, tuple):
        return tuple(o.clone() if id(o) in ids else o for o in out)
    return out.clone() if isinstance(out, torch.Tensor) and id(out) in ids else out


@dataclass(frozen=True)
class KernelEntry:
    """Attached to the op's OpOverload: how the neuron compiler runs and costs ``kernel_call`` nodes."""

    name: str
    version: str
    runner: Callable[..., Any]
    specs: Callable[[tuple[Any, ...]], Any]

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"

    def run(self, *args: Any) -> Any:
        return self.runner(*args)

    def seconds(self, types: tuple[Any, ...], consts: tuple[Any, ...]) -> float:
        """Modeled kernel time for arguments of these IR types (tensors) and constants (the rest)."""
        from ..compiler.ir import DTYPES

        args: list[Any] = []
        it = iter(consts)
        for t in types:
            args.append(torch.empty(t.shape, dtype=DTYPES[t.dtype], device="meta") if t is not None else next(it, None))
        args.extend(it)
        return self.specs(tuple(args))[1]
