"""The ``kernel_call`` IR op: a custom tile kernel, registered as a torch custom op, as one IR node.

``trn_notebook.nki.nki_op`` registers each kernel here (the compiler knows nothing of the kernel
language): lowering turns a call of the custom op's ``OpOverload`` into
``kernel_call('ns::name@version', %a, %b, ...)``; codegen runs the registered CPU implementation;
the schedule charges the kernel's own modeled time (engine ``NKI``) as one launch. The version (a
hash of the kernel's code) is in the graph text, so editing a kernel misses the compile cache.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from .ir import IRError, Node, TensorType

ATTRIBUTE = "trn_kernel_call"  # the custom op's OpOverload carries its kernel entry under this name


class KernelEntry(Protocol):
    """What ``nki_op`` attaches to the op: ``run`` computes on CPU tensors, ``seconds`` models the time."""

    name: str
    version: str

    @property
    def ref(self) -> str: ...

    def run(self, *args: Any) -> Any: ...

    def seconds(self, types: tuple[TensorType | None, ...], consts: tuple[Any, ...]) -> float: ...


def entry_for(target: Any) -> KernelEntry | None:
    """The kernel entry of an FX call target, if it is a registered custom tile kernel."""
    return getattr(target, ATTRIBUTE, None)


def lookup(ref: str) -> KernelEntry:
    """The entry for ``'ns::name@version'``; raises ``IRError`` if unknown or changed since compile."""
    name, _, version = ref.partition("@")
    ns, _, op = name.partition("::")
    try:
        entry = entry_for(getattr(getattr(torch.ops, ns), op).default)
    except (AttributeError, RuntimeError):
        entry = None
    if entry is None:
        raise IRError(
            f"kernel_call: no kernel {name!r} is registered in this process; run the cell that defines it "
            "with trn_notebook.nki_op before calling the compiled model"
        )
    if version and version != entry.version:
        raise IRError(
            f"kernel_call: kernel {name!r} changed since this graph was compiled; recompile (torch._dynamo.reset())"
        )
    return entry


def kernel_call(ref: str, *args: Any) -> Any:
    """Run a registered kernel on CPU tensors (the IR op's implementation)."""
    return lookup(ref).run(*args)


def node_seconds(n: Node, types: dict[str, TensorType | None]) -> float:
    """Modeled device time of one ``kernel_call`` node from its argument types."""
    ref, *rest = n.args
    arg_types = tuple(types.get(a.name) if hasattr(a, "name") else None for a in rest)
    consts = tuple(a for a in rest if not hasattr(a, "name"))
    return lookup(ref).seconds(arg_types, consts)
