"""The compiled conformance sweep: each OpInfo sample under ``torch.compile(backend="neuron", fullgraph=True)``.

For every OpInfo entry, up to :data:`COMPILED_SAMPLES` float32 samples are built on the CPU and moved to
``neuron`` as in the eager sweep (:mod:`.sweep`). A sample counts only if it passes *eagerly* on the
device (the eager sweep's check, run here on the same sample); it is then compiled with every tensor as
a graph input (other arguments are constants of the graph), run, and compared with CPU eager. Backward
compares input gradients the same way. When a compile fails, the same sample is compiled on the CPU
with ``backend="aot_eager"``: if PyTorch's own stack cannot capture it with ``fullgraph=True`` either
(data-dependent shapes, Python scalars out of tensors), it is not a test of our compiler and is counted
as ``uncapturable``, never as a pass. A sample the compiler refuses because an output's shape depends on the
data (``DataDependentShapeError``: static shapes only, as on TorchNeuron) is counted as ``refused``, apart.
Coverage is compiled passes over eager passes. The ops a passing graph ran as host calls (CPU fallbacks of
eager inside the graph: linear algebra, FFT ...) are kept per entry (``host_calls``), from the placement log.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import torch

from ..compiler.host_call import DATA_DEPENDENT
from ..device.placement import placement_log
from .sweep import (
    Tally,
    _call,
    _forward_sample,
    _grad_inputs,
    _is_random,
    _move_sample,
    _op_db,
    _short,
    _tensors,
    _to_cpu,
    _tolerance,
    compare,
)

COMPILED_SAMPLES = 3  # float32 samples per entry and direction in the full compiled sweep
QUICK_COMPILED_SAMPLES = 1


@dataclass
class CompiledResult:
    """Compiled outcome of one OpInfo entry: float32 forward and backward tallies over eager-passing samples."""

    op: str
    forward: Tally = field(default_factory=Tally)
    backward: Tally = field(default_factory=Tally)
    uncapturable: int = 0  # samples PyTorch's own aot_eager cannot capture with fullgraph=True either
    refused: int = 0  # samples refused at compile time: a data-dependent output shape
    host_calls: list[str] = field(default_factory=list)  # ops the compiled graphs ran on the host (CPU fallbacks)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (the worker protocol of :mod:`~trn_notebook.compat.isolate`)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompiledResult:
        """Inverse of :meth:`to_json`."""
        return cls(
            data["op"],
            Tally(**data["forward"]),
            Tally(**data["backward"]),
            data.get("uncapturable", 0),
            data.get("refused", 0),
            list(data.get("host_calls", [])),
        )


class _Graph:
    """The sample's call as a function of its tensors only (they become graph inputs)."""

    def __init__(self, opinfo: Any, sample: Any) -> None:
        self.opinfo = opinfo
        self.sample = sample
        self.tensors = _tensors((sample.input, sample.args, sample.kwargs))

    def _rebuild(self, x: Any, it: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return next(it)
        if isinstance(x, list):
            return [self._rebuild(v, it) for v in x]
        if isinstance(x, tuple):
            return tuple(self._rebuild(v, it) for v in x)
        if isinstance(x, dict):
            return {k: self._rebuild(v, it) for k, v in x.items()}
        return x

    def __call__(self, *tensors: torch.Tensor) -> Any:
        it = iter(tensors)
        inp, args, kwargs = self._rebuild((self.sample.input, self.sample.args, self.sample.kwargs), it)
        return self.sample.output_process_fn_grad(self.opinfo(inp, *args, **kwargs))


def _compiled(fn: _Graph, backend: str) -> Any:
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, fullgraph=True, dynamic=False)


def _capturable(opinfo: Any, sample: Any, backward: bool) -> bool:
    """Whether PyTorch's own ``aot_eager`` captures this CPU sample with ``fullgraph=True``."""
    graph = _Graph(opinfo, sample)
    try:
        out = _compiled(graph, "aot_eager")(*graph.tensors)
        if backward:
            outs = [t for t in _tensors(out) if t.requires_grad]
            torch.autograd.grad(outs, _grad_inputs(sample), [torch.ones_like(t) for t in outs], allow_unused=True)
    except Exception:
        return False
    return True


def _forward(opinfo: Any, sample: Any, seed: int, hosts: set[str]) -> str | Literal[False] | None:
    """None on a pass, the error, False when not counted (fails eagerly), "uncapturable" sentinel via str."""
    if _forward_sample(opinfo, sample, torch.float32, seed) is not None:
        return False  # the eager sweep's verdict: only eager passes are compiled
    torch.manual_seed(seed)
    expected = _to_cpu(_call(opinfo, sample))
    on_device, _ = _move_sample(opinfo, sample)
    graph = _Graph(opinfo, on_device)
    before = placement_log.snapshot()
    try:
        torch.manual_seed(seed)
        actual = _compiled(graph, "neuron")(*graph.tensors)
    except Exception as exc:
        return _failure(exc, opinfo, sample, False)
    _host_calls(before, hosts)
    rtol, atol = _tolerance(opinfo, torch.float32)
    nondet = opinfo.has_nondeterministic_output or _is_random(opinfo)
    return compare(actual, expected, rtol, atol, nondet)


def _backward(opinfo: Any, sample: Any, seed: int, hosts: set[str]) -> str | Literal[False] | None:
    from .sweep import _backward_sample

    if _backward_sample(opinfo, sample, seed) is not None:
        return False
    inputs = _grad_inputs(sample)
    torch.manual_seed(seed)
    outs = [t for t in _tensors(_call(opinfo, sample)) if t.requires_grad and t.is_floating_point()]
    gen = torch.Generator().manual_seed(seed)
    grads_out = [torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in outs]
    expected = torch.autograd.grad(outs, inputs, grads_out, allow_unused=True)
    on_device, _ = _move_sample(opinfo, sample, requires_grad=True)
    graph = _Graph(opinfo, on_device)
    before = placement_log.snapshot()
    try:
        torch.manual_seed(seed)
        got = [t for t in _tensors(_compiled(graph, "neuron")(*graph.tensors)) if t.requires_grad]
        got = [t for t in got if t.is_floating_point()]
        actual = torch.autograd.grad(
            got, _grad_inputs(on_device), [g.to("neuron") for g in grads_out], allow_unused=True
        )
    except Exception as exc:
        return _failure(exc, opinfo, sample, True)
    _host_calls(before, hosts)
    rtol, atol = _tolerance(opinfo, torch.float32)
    if rtol is None:
        rtol, atol = 1e-5, 1e-5
    if any((a is None) != (e is None) for a, e in zip(actual, expected)):
        return "mismatch: a gradient is None on one device only"
    pairs = [(a, e) for a, e in zip(actual, expected) if e is not None]
    return compare([a for a, _ in pairs], [e for _, e in pairs], rtol, atol, _is_random(opinfo))


_UNCAPTURABLE = "\0uncapturable"
_REFUSED = "\0refused"


def _failure(exc: BaseException, opinfo: Any, sample: Any, backward: bool) -> str:
    """A failed compile's outcome: refused (data-dependent shape), uncapturable by aot_eager too, or the error."""
    error = _compile_error(exc)
    if DATA_DEPENDENT in error:
        return _REFUSED
    return _UNCAPTURABLE if not _capturable(opinfo, sample, backward) else error


def _host_calls(before: Any, hosts: set[str]) -> None:
    """Add to ``hosts`` the ops that fell back to the CPU since ``before`` (the compiled run's host calls)."""
    hosts.update(op for op, e in placement_log.snapshot().since(before).items() if e.category == "cpu_fallback")


def _compile_error(exc: BaseException) -> str:
    """The compiler's own message, not dynamo's wrapper ("backend='neuron' raised:")."""
    inner = getattr(exc, "inner_exception", None) or exc.__cause__
    while inner is not None and type(inner).__name__ == "NeuronCompileError" and inner.__cause__ is not None:
        inner = inner.__cause__
    return _short(inner if inner is not None else exc)


def run_compiled_op(name: str, quick: bool = False) -> CompiledResult:
    """Compile up to :data:`COMPILED_SAMPLES` float32 samples of one OpInfo entry, forward and backward.

    Never raises for a failing sample (its first error is kept in the tally)."""
    opinfo = _op_db()[name]
    result = CompiledResult(name)
    limit = QUICK_COMPILED_SAMPLES if quick else COMPILED_SAMPLES
    if torch.float32 not in opinfo.supported_dtypes("cpu"):
        return result
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _sweep_direction(opinfo, result, result.forward, False, limit)
        if opinfo.supports_autograd and torch.float32 in opinfo.supported_backward_dtypes("cpu"):
            _sweep_direction(opinfo, result, result.backward, True, limit)
    torch._dynamo.reset()
    return result


def _sweep_direction(opinfo: Any, result: CompiledResult, tally: Tally, backward: bool, limit: int) -> None:
    try:
        samples = opinfo.sample_inputs("cpu", torch.float32, requires_grad=backward)
        refused = 0
        for i, sample in enumerate(samples):
            if tally.total + refused >= limit:  # a refused sample counts toward the limit (it needs no more tries)
                break
            hosts: set[str] = set()
            try:
                outcome = (_backward if backward else _forward)(opinfo, sample, i, hosts)
            except Exception as exc:  # the CPU reference itself failed in a way the eager check did not see
                outcome = "sweep error: " + _short(exc)
            result.host_calls = sorted(set(result.host_calls) | hosts)
            if outcome == _UNCAPTURABLE:
                result.uncapturable += 1
            elif outcome == _REFUSED:
                result.refused += 1
                refused += 1
            elif outcome is not False:
                tally.add(outcome if isinstance(outcome, str) or outcome is None else None)
    except Exception as exc:  # the sample generator itself failed
        tally.add("sample generation failed: " + _short(exc))
