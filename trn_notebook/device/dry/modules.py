"""Modules built outside a dry run and moved in with ``.to("neuron")``: shape-only inside, restored after.

``model.to("neuron")`` inside :func:`trn_notebook.dryrun` converts each parameter and buffer to a
shape-only ``neuron`` tensor (the host->device copies are charged as real ones). Left like that, the
user's model would hold tensors with no values once the dry run ends. :class:`ModuleRestorer` wraps
``nn.Module._apply`` for the duration of the run: the outermost conversion of a module tree first
remembers each parameter (its data, ``requires_grad`` and gradient) and buffer of real tensors, and
on exit every one of them that now holds a shape-only tensor gets its real data back, the same
Python objects kept (``torch.utils.swap_tensors``), so optimizers and tied weights stay valid.
"""

from __future__ import annotations

import threading
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import is_fake

_Saved = tuple[nn.Module, dict[str, tuple[nn.Parameter, torch.Tensor, torch.Tensor | None]], dict[str, Any]]


def _convert(p: nn.Parameter, fn: Any) -> torch.Tensor:
    """``fn`` (``.to``, ``.float`` ...) of a shape-only Parameter: a new Parameter, its gradient converted too."""
    with torch.no_grad():
        applied = fn(p)
    if applied is p:
        return p
    new = nn.Parameter(applied, requires_grad=p.requires_grad)
    if p.grad is not None:
        with torch.no_grad():
            new.grad = fn(p.grad)
    return new


class ModuleRestorer:
    """Remembers real parameters and buffers of modules converted during a dry run; :meth:`restore` puts them back."""

    def __init__(self) -> None:
        self.saved: list[_Saved] = []
        self._seen: set[int] = set()
        self._depth = threading.local()
        self._original: Any = None
        self._converted: dict[int, torch.Tensor] = {}  # id(real Parameter) -> its shape-only replacement

    def install(self) -> None:
        """Wrap ``nn.Module._apply`` until :meth:`restore`."""
        original = self._original = nn.Module._apply
        restorer = self

        def _apply(module: nn.Module, fn: Any, recurse: bool = True) -> nn.Module:
            depth = getattr(restorer._depth, "n", 0)
            if depth == 0:
                restorer.remember(module)
            memo = restorer._converted
            if recurse:  # children first, as torch does, so a weight tied to a child's is seen converted below
                restorer._depth.n = depth + 1
                try:
                    for child in module.children():
                        child._apply(fn)
                finally:
                    restorer._depth.n = depth
            params = module._parameters
            order = list(params)
            # A tied weight already converted under another module: kept out of this conversion (the
            # device would see a no-op) and given the same shape-only Parameter, in its place in the order.
            tied = {k: memo[id(p)] for k, p in params.items() if p is not None and id(p) in memo}
            for key, p in params.items():  # built inside the run: converted here (torch would swap and fail)
                if p is not None and key not in tied and is_fake(p):
                    tied[key] = memo[id(p)] = _convert(p, fn)
            for key in tied:
                del params[key]
            before = dict(params)
            restorer._depth.n = depth + 1
            try:
                out = original(module, fn, False)
            finally:
                restorer._depth.n = depth
                if tied:
                    current = dict(params)
                    params.clear()
                    params.update({k: tied[k] if k in tied else current[k] for k in order if k in tied or k in current})
            for key, old in before.items():
                new = module._parameters.get(key)
                if old is not None and new is not None and new is not old and is_fake(new) and not is_fake(old):
                    memo[id(old)] = new  # later holders of `old` get the same shape-only Parameter: ties survive
            return out

        nn.Module._apply = _apply  # type: ignore[method-assign]

    def remember(self, root: nn.Module) -> None:
        """Record the real tensors of every module under ``root`` (once per module)."""
        for mod in root.modules():
            if id(mod) in self._seen:
                continue
            params = {
                n: (p, p.detach(), p.grad) for n, p in mod._parameters.items() if p is not None and not is_fake(p)
            }
            buffers = {n: b for n, b in mod._buffers.items() if b is not None and not is_fake(b)}
            if params or buffers:
                self._seen.add(id(mod))
                self.saved.append((mod, params, buffers))

    def restore(self) -> int:
        """Unwrap ``_apply`` and give back the real data of each remembered tensor now shape-only; returns how many."""
        if self._original is not None:
            nn.Module._apply = self._original  # type: ignore[method-assign]
            self._original = None
        restored = 0
        for mod, params, buffers in self.saved:
            for name, (obj, data, grad) in params.items():
                current = mod._parameters.get(name)
                if current is not None and is_fake(current):
                    real = nn.Parameter(data, requires_grad=obj.requires_grad)
                    real.grad = grad
                    if current is obj:
                        obj.grad = None
                        torch.utils.swap_tensors(obj, real)  # the user's object holds its real data again
                    else:
                        mod._parameters[name] = obj if not is_fake(obj) else real
                    restored += 1
            for name, buf in buffers.items():
                current = mod._buffers.get(name)
                if current is not None and is_fake(current):
                    mod._buffers[name] = buf
                    restored += 1
        self.saved.clear()
        self._seen.clear()
        self._converted.clear()
        return restored
