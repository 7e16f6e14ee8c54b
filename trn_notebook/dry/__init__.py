"""The dry run a user starts: :func:`dryrun` (a model at full size, shape-only, every op charged as on the real
device), its :class:`DryRun` result, and dry runs of ranks (:mod:`.ranks`: torch's fake process group,
collectives charged; :mod:`.ddp`: DDP's reducer on shape-only tensors). Built on the device's dry engine
(:mod:`trn_notebook.device.dry`); ``planner/`` and ``zoo/`` use it."""

from .run import DRY, CapacityNeed, DryRun, DryRunError, Finding, active, dryrun, is_dry, last

__all__ = ["DRY", "CapacityNeed", "DryRun", "DryRunError", "Finding", "active", "dryrun", "is_dry", "last"]
