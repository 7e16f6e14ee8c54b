"""trn-notebook: learn, try and evaluate PyTorch on AWS Trainium (``neuron``) from Jupyter.

``import trn_notebook`` registers the simulated ``neuron`` device (idempotent).
"""

from .device.autoload import autoload as _autoload

_autoload(explicit=True)  # registers the simulated device unless a real torch_neuronx is installed

from ._version import __version__  # noqa: E402  (the one version: pyproject reads the same file)
from .api import (  # noqa: E402
    clear_op_tracking,
    get_executed_ops,
    get_fallback_ops,
    memory_timeline,
    op_table,
    phase,
    placement_summary,
    save_trace,
    set_chip,
    set_memory_capacity,
    set_op_category,
)
from .device import get_chip  # noqa: E402
from .distributed import compare_ranks  # noqa: E402, F401 - public API
from .distributed.rank_setup import install_integrations as _install_integrations  # noqa: E402
from .dry.run import dryrun  # noqa: E402
from .migration import report  # noqa: E402
from .migration.portcheck import port_check  # noqa: E402
from .planner import plan  # noqa: E402
from .profiling import profile, profile_table, why_slow  # noqa: E402
from .state import reset  # noqa: E402

# The compiler (and with it torch._dynamo, ~1 s to import) loads on first use, so that `import torch`
# (which autoloads the device) stays fast; `backend="neuron"` also resolves through its entry point.
_COMPILER_NAMES = frozenset({"BucketPolicy", "bucketed", "compile", "explain", "suggest_policy", "tune"})
# Public subpackages the README and docs name, imported on first attribute access
# (`trn_notebook.cache.export(path)` works right after `import trn_notebook`).
_LAZY_SUBMODULES = frozenset({"cache", "compat", "compiler", "nki", "widgets", "zoo"})


# The numerics policy (trn_notebook.device.numerics.policy): set_numerics, numerics(...) as a context manager
_NUMERICS_NAMES = {
    "set_numerics": "set_numerics",
    "numerics": "numerics_scope",
    "numerics_policy": "numerics_policy",
    "NumericsPolicy": "NumericsPolicy",
    "NeuronNumericsWarning": "NeuronNumericsWarning",
}


def __getattr__(name: str) -> object:
    if name in _NUMERICS_NAMES:
        from .device.numerics import policy as _numerics

        return getattr(_numerics, _NUMERICS_NAMES[name])
    if name == "numerics_ratio":  # the AWS three-way ratio (trn_notebook/aws_ratio.py)
        from .aws_ratio import numerics_ratio

        return numerics_ratio
    if name == "compare_numerics":  # the three-way divergence finder (trn_notebook.numerics_compare)
        from .numerics_compare import compare_numerics

        return compare_numerics
    if name == "nki_op":  # custom tile kernels as torch custom ops (trn_notebook.nki, loaded on first use)
        from .nki import nki_op

        return nki_op
    if name == "memory_snapshot_view":  # the anywidget view loads on first use
        from .widgets.memory_snapshot import memory_snapshot_view

        return memory_snapshot_view
    if name in ("alias_torch_neuronx", "remove_alias"):  # opt-in `import torch_neuronx` aliases (session/alias.py)
        from .session import alias

        return getattr(alias, name)
    if name == "serve_estimate":  # the model-level estimate (transformers, walks) loads on first use
        from .fidelity.serve import serve_estimate

        return serve_estimate
    if name in _COMPILER_NAMES:
        from . import compiler

        return getattr(compiler, name)
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'trn_notebook' has no attribute {name!r}")


def _install_lazy_dynamo_metrics() -> None:
    import torch

    module = getattr(torch, "neuron", None)
    if module is None or hasattr(module, "get_dynamo_metrics"):
        return

    def get_dynamo_metrics() -> list[dict[str, object]]:
        """Per-graph compile metrics (loads the compiler, which replaces this function)."""
        from . import compiler  # noqa: F401 - registering attaches the real functions

        return module.get_dynamo_metrics()

    def reset_dynamo_metrics() -> None:
        """Forget per-graph compile metrics (loads the compiler, which replaces this function)."""
        from . import compiler  # noqa: F401

        module.reset_dynamo_metrics()

    module.get_dynamo_metrics = get_dynamo_metrics
    module.reset_dynamo_metrics = reset_dynamo_metrics


_install_lazy_dynamo_metrics()
# the "neuron" c10d backend; torch.compile(model) on neuron: our compiler with a one-time note, not Inductor;
# torch.profiler's simulated device lanes; torch.neuron.memory._record_memory_history / _snapshot / _dump_snapshot
_install_integrations()


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext trn_notebook``: register the ``%trn`` / ``%%trn`` magics."""
    from .magics import load_ipython_extension as load

    load(ipython)  # type: ignore[arg-type]


def unload_ipython_extension(ipython: object) -> None:
    """``%unload_ext trn_notebook``: remove the magics and their hooks."""
    from .magics import unload_ipython_extension as unload

    unload(ipython)  # type: ignore[arg-type]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension (the status-bar item) lives in the package."""
    return [{"src": "labextension", "dest": "trn-notebook"}]


__all__ = [
    "BucketPolicy",
    "NeuronNumericsWarning",
    "NumericsPolicy",
    "__version__",
    "alias_torch_neuronx",
    "bucketed",
    "clear_op_tracking",
    "compare_numerics",
    "compile",
    "dryrun",
    "explain",
    "get_chip",
    "get_executed_ops",
    "get_fallback_ops",
    "memory_timeline",
    "nki_op",
    "numerics",
    "numerics_policy",
    "numerics_ratio",
    "op_table",
    "phase",
    "placement_summary",
    "plan",
    "port_check",
    "profile",
    "profile_table",
    "remove_alias",
    "report",
    "reset",
    "save_trace",
    "serve_estimate",
    "set_chip",
    "set_memory_capacity",
    "set_numerics",
    "set_op_category",
    "suggest_policy",
    "tune",
    "why_slow",
]
