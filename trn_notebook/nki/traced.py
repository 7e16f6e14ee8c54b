"""``@nki.jit`` and ``nki.simulate``: a kernel that runs simulated eagerly and, called inside
``torch.compile``, as the same kernel in one ``kernel_call`` launch.

Dynamo cannot trace the simulator (it reads tensors' host bytes), so under compilation
:meth:`JitKernel.__call__` calls a custom op instead: the kernel registered
once with :func:`~.bridge.nki_op` as ``trn_nki_jit::<name>_<code hash>`` returning ``Tensor[]``. The
registration runs eagerly at trace time (``torch._dynamo.assume_constant_result``), so the graph
holds one call of the op and the neuron compiler lowers it to one ``kernel_call`` node. What the
automatic route cannot express (arguments other than tensors and bool/int/float/str, a launch grid
chosen inside the compiled code) gets an error naming ``trn_notebook.nki_op``. Outputs carry no
gradient, as in eager; ``nki_op(reference=...)`` / ``backward=`` give one.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import torch

from .bridge import LIST, _version, nki_op
from .errors import NkiError
from .jit import Kernel

NAMESPACE = "trn_nki_jit"
_OPS: dict[str, Any] = {}

USE_NKI_OP = (
    "Or register the kernel as a custom op yourself and call the op inside the compiled code: "
    "op = trn_notebook.nki_op('mylib::{name}', outputs=N)({name}); op(x, ...)"
)


def _refuse(kernel: Kernel, why: str) -> NkiError:
    name = getattr(getattr(kernel, "fn", None), "__name__", "kernel")
    return NkiError(f"@nki.jit kernel {name!r} called inside torch.compile: {why}. " + USE_NKI_OP.format(name=name))


@torch._dynamo.assume_constant_result
def op_for(kernel: Kernel, kinds: tuple[str, ...]) -> str:
    """The name (in :data:`NAMESPACE`) of the op standing for ``kernel``, registered on first use.

    ``kinds``: the schema type of each positional argument of the call (``Tensor``, ``float``...): one op
    per combination. Raises :class:`NkiError` for what the automatic route cannot carry.
    """
    grid = getattr(kernel, "grid", None)
    if grid is None:  # a Kernel object dynamo built while tracing (``kernel[4](x)`` inside the compiled code)
        raise _refuse(kernel, "the launch grid was chosen inside the compiled code; pick it outside: k4 = kernel[4]")
    for p in inspect.signature(kernel.fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise _refuse(kernel, f"its parameter *{p.name} has no fixed schema")
    params = list(inspect.signature(kernel.fn).parameters)
    types = {n: k for n, k in zip(params, kinds) if k != "Tensor"}
    if "?" in kinds:
        raise _refuse(kernel, "an argument is neither a tensor nor a bool/int/float/str")
    safe = re.sub(r"\W", "_", kernel.name)
    suffix = "".join(f"_{n}_{k}" for n, k in sorted(types.items()))
    launch = "_grid" + "x".join(map(str, grid)) if grid else ""
    opname = f"{safe}_{_version(kernel.fn)}{launch}{suffix}"
    qualname = f"{NAMESPACE}::{opname}"
    op = _OPS.get(qualname)
    if op is None:
        try:
            op = nki_op(qualname, outputs=LIST, types=types)(kernel)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise _refuse(kernel, f"its signature cannot be a custom op schema ({exc})") from None
        op.register_autograd(_no_gradient, setup_context=_outputs_not_differentiable)
        _OPS[qualname] = op
    return opname


def traced_call(kernel: Kernel, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call ``kernel`` as its custom op (traced by dynamo); returns a tensor or a tuple of tensors."""
    kinds = tuple(_kind(a) for a in args)
    op = getattr(torch.ops.trn_nki_jit, op_for(kernel, kinds)).default
    outs = op(*args, **kwargs)  # keyword arguments bind by the kernel's parameter names (the op's schema)
    if len(outs) == 0:
        return None
    return outs[0] if len(outs) == 1 else tuple(outs)


def _kind(a: Any) -> str:
    if isinstance(a, torch.Tensor):
        return "Tensor"
    if isinstance(a, bool):
        return "bool"
    if isinstance(a, int):
        return "int"
    if isinstance(a, float):
        return "float"
    return "str" if isinstance(a, str) else "?"


def _outputs_not_differentiable(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """As in eager (the simulator returns plain tensors), a jit kernel's outputs carry no gradient."""
    ctx.mark_non_differentiable(*output)


def _no_gradient(ctx: Any, *grads: Any) -> Any:
    raise NkiError(
        "an @nki.jit kernel has no gradient; give one with trn_notebook.nki_op('mylib::name', reference=torch_fn) "
        "or backward=..."
    )


class JitKernel(Kernel):
    """A kernel function wrapped by :func:`jit`: simulated when called eagerly (or ``kernel[grid](...)``),
    one custom-op call (a ``kernel_call`` launch) when called inside ``torch.compile``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            return traced_call(self, args, kwargs)
        return self.run(*args, **kwargs).outputs


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Wrap a kernel function as a :class:`JitKernel` (``@nki.jit`` or ``@nki.jit()``)."""
    if fn is None:
        return lambda f: JitKernel(f)
    return JitKernel(fn)


def simulate(kernel: Kernel | Callable[..., Any]) -> JitKernel:
    """The CPU-simulated kernel (here every kernel is simulated; kept for NKI source compatibility)."""
    if isinstance(kernel, JitKernel):
        return kernel
    return JitKernel(kernel.fn, kernel.grid) if isinstance(kernel, Kernel) else JitKernel(kernel)
