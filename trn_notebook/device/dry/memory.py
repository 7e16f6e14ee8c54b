"""Memory by category at a dry run's allocated peak: parameters, gradients, optimizer state, activations …

The categories are torch's own (``torch.distributed._tools.mem_tracker``'s reference types), decided
for each storage live at the peak (:attr:`~.alloc.StorageTracker.peak_live`), first match wins:

1. **parameters** (and buffers): storages of the tracked modules' parameters and buffers at the end of
   the run; for FSDP2 modules (``fully_shard``) both the local shards and the unsharded parameters the
   all-gathers fill;
2. **gradients**: storages of those parameters' ``.grad`` (at the end of the run, and each one autograd
   accumulated during it: a gradient freed by ``zero_grad()`` before the end still counts at the peak);
3. **optimizer state**: tensors in the tracked optimizers' ``state`` (AdamW's ``exp_avg``, ``exp_avg_sq``);
4. **collective buffers**: storages given to or returned by a collective (labelled when it ran);
5. **activations**: storages autograd saved for the backward pass (a ``saved_tensors_hooks`` pack
   hook labels them; under activation checkpointing the checkpointed region saves nothing);
6. **temporaries**: everything else (intermediates, the unsharded gradients before a reduce-scatter,
   the optimizer's foreach scratch).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import is_fake

from .alloc import Identity, StorageTracker

CATEGORIES = ("parameters", "gradients", "optimizer state", "activations", "temporaries", "collective buffers")


def _local(t: Any) -> torch.Tensor | None:
    """The shape-only tensor behind ``t`` (a DTensor's local shard), or ``None``."""
    local = getattr(t, "_local_tensor", t)
    return local if isinstance(local, torch.Tensor) and is_fake(local) else None


def _unsharded_params(module: nn.Module) -> list[torch.Tensor]:
    """FSDP2's unsharded parameters of ``module``'s tree (the storages its all-gathers fill)."""
    out: list[torch.Tensor] = []
    for sub in module.modules():
        get_state = getattr(sub, "_get_fsdp_state", None)
        if get_state is None:
            continue
        group = getattr(get_state(), "_fsdp_param_group", None)
        for fp in getattr(group, "fsdp_params", ()) or ():
            u = getattr(fp, "_unsharded_param", None)
            if isinstance(u, torch.Tensor):
                out.append(u)
    return out


class MemoryCategories:
    """Labels activations while active; :meth:`breakdown` gives bytes per category at the peak."""

    def __init__(self, tracker: StorageTracker) -> None:
        self.tracker = tracker
        self.modules: list[nn.Module] = []
        self.optimizers: list[torch.optim.Optimizer] = []
        self._hooks: Any = None
        self._grad_hooks: list[Any] = []

    def track(self, *objects: Any) -> None:
        """Name the modules and optimizers whose tensors are parameters, gradients and optimizer state.

        Raises ``TypeError`` for anything else.
        """
        for obj in objects:
            if isinstance(obj, nn.Module):
                self.modules.append(obj)
                for p in obj.parameters():  # a gradient freed before the run ends (zero_grad) still counts as one
                    if p.requires_grad:
                        self._grad_hooks.append(p.register_post_accumulate_grad_hook(self._label_grad))
            elif isinstance(obj, torch.optim.Optimizer):
                self.optimizers.append(obj)
            else:
                raise TypeError(f"track() takes nn.Module and torch.optim.Optimizer objects, got {type(obj).__name__}")

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        local = _local(t)
        if local is not None:
            self.tracker.label(local, "activations")
        return t

    def _label_grad(self, p: torch.Tensor) -> None:
        local = _local(p.grad)
        if local is not None:
            self.tracker.label(local, "gradients")

    def __enter__(self) -> MemoryCategories:
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, tp: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._hooks is not None:
            self._hooks.__exit__(tp, exc, tb)
            self._hooks = None
        for h in self._grad_hooks:
            h.remove()
        self._grad_hooks.clear()

    def breakdown(self, at: str = "peak") -> dict[str, int]:
        """Bytes (allocator blocks) per category at the allocated peak (they sum to the peak allocated), or
        ``at="end"``: of the storages live now. Raises ``ValueError`` for another ``at``."""
        tr = self.tracker
        tr.finish_peak()
        if at not in ("peak", "end"):
            raise ValueError(f"at must be 'peak' or 'end', got {at!r}")
        fs = tr.first_seq
        live = tr.peak_live if at == "peak" else {(k, fs[k]): b.size for k, b in tr.blocks.items()}
        known: dict[Identity, str] = {}

        def mark(t: Any, category: str) -> None:
            local = _local(t)
            ident = tr.identity(local) if local is not None else None
            if ident is not None:
                known.setdefault(ident, category)

        for m in self.modules:
            for p in m.parameters():
                mark(p, "parameters")
            for b in m.buffers():
                mark(b, "parameters")
            for u in _unsharded_params(m):
                mark(u, "parameters")
            for p in m.parameters():
                if p.grad is not None:
                    mark(p.grad, "gradients")
        for o in self.optimizers:
            for st in o.state.values():
                for v in st.values():
                    if isinstance(v, torch.Tensor):
                        mark(v, "optimizer state")
        out = dict.fromkeys(CATEGORIES, 0)
        for ident, size in live.items():
            out[known.get(ident) or tr.labels.get(ident) or "temporaries"] += size
        return out
