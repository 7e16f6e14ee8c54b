"""The ``neuron`` compiler: ``torch.compile(backend="neuron")`` with our IR, passes, cache and buckets.

Importing this package registers the dynamo backend (idempotent, also reachable through the
``torch_dynamo_backends`` entry point) and attaches ``torch.neuron.get_dynamo_metrics``.
"""

from . import compile_log, compile_time, disk_cache, progress, shape_log
from .api import CompiledCallable, GraphBreakError, compile
from .backend import neuron_backend, register
from .buckets import BucketedCallable, BucketPolicy, bucketed
from .contracts import DynamicShapesError, NeuronCompileError
from .explain import Explanation, explain
from .tuner import TuneResult, suggest_policy, tune

register()

__all__ = [
    "BucketPolicy",
    "BucketedCallable",
    "CompiledCallable",
    "DynamicShapesError",
    "Explanation",
    "GraphBreakError",
    "NeuronCompileError",
    "TuneResult",
    "bucketed",
    "compile",
    "compile_log",
    "compile_time",
    "disk_cache",
    "explain",
    "neuron_backend",
    "progress",
    "register",
    "shape_log",
    "suggest_policy",
    "tune",
]
