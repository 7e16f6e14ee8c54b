"""DDP under a dry run of ranks: torch's own ``DistributedDataParallel`` and its C++ ``Reducer``, shape-only.

DDP runs unchanged: its Reducer forms the gradient buckets (one bucket in the first iteration, then
rebuilt in the order the gradients became ready, ``bucket_cap_mb`` each) and all-reduces each bucket's
flat buffer through ``c10d::allreduce_``, which the dry run charges like any collective
(:mod:`.ranks`). Three things a shape-only run lacks are supplied here, each stated:

* **completed work**: the fake process group's ``FakeWork`` has a future with no value, and DDP's
  built-in all-reduce hook asserts its result is a tensor; the dry run gives each collective a
  completed work whose future holds the collective's output tensors, as a real backend's does
  (:func:`completed_work`);
* **host bookkeeping**: the Reducer writes its rebuilt bucket indices into a CPU tensor, copies it to
  the device, broadcasts it from rank 0 and reads it back; under
  :mod:`~trn_notebook.device.dry.host` those CPU tensors hold real values and
  come back with rank 0's (the copies and the broadcast are charged as usual);
* **the parameter-shape check** at construction (``_verify_param_shape_across_processes``: every
  rank's parameter shapes gathered and compared) is skipped: every dry rank runs rank 0's program,
  so the shapes agree by construction. Its small host-side collectives are not charged (a one-time
  cost at construction, not part of a step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from ..device.dry.dispatch import DryMode


def completed_work(out: Any) -> Any:
    """``out`` of a non-functional collective, ``(tensors, work)``, with ``work`` replaced by a completed one
    whose future's value is ``tensors`` (what c10d's real works give); anything else is returned unchanged."""
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], torch.ScriptObject):
        future: torch.futures.Future[Any] = torch.futures.Future()
        future.set_result(out[0])
        return (out[0], torch._C._distributed_c10d._create_work_from_future(future).boxed())
    return out


class DdpPatches:
    """Installs (and removes) DDP's two host-side stand-ins described in the module docstring."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def install(self, mode: DryMode) -> None:
        """Run the Reducer's bucket rebuild under ``mode.real_host()``; skip DDP's cross-rank shape check."""
        import torch.nn.parallel.distributed as ddp_module

        def on_host(original: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with mode.real_host():
                    return original(*args, **kwargs)

            wrapper.__doc__ = original.__doc__
            return wrapper

        def shapes_agree(process_group: Any, tensors: Any, logger: Any = None) -> None:
            """Every dry rank runs rank 0's program: the parameter shapes agree (see the module docstring)."""

        rebuild = dist.Reducer._rebuild_buckets
        for owner, name, new in (
            (dist.Reducer, "_rebuild_buckets", on_host(rebuild)),
            (ddp_module, "_verify_param_shape_across_processes", shapes_agree),
        ):
            self._saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, new)

    def remove(self) -> None:
        """Put the originals back."""
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)
