"""The ``neuron`` dynamo backend: capture → AOT Autograd → lower → passes → codegen → executable.

``neuron_backend`` is what ``torch.compile(backend="neuron")`` calls (through the
``torch_dynamo_backends`` entry point or :func:`register`). Each forward, backward or inference
graph AOT Autograd produces is compiled by :class:`_Capture.compile_graph`, which consults the
in-memory and disk caches, records one compile-log entry, and returns an :class:`Executable`.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import re
import time
import warnings
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx

from .. import locks as _locks
from .. import state as _state
from . import attention, contracts, disk_cache, progress
from .artifacts import Bundle, artifacts
from .aten_decompositions import aten_decompositions
from .compile_log import LiveRecord, compile_log, get_dynamo_metrics, reset_dynamo_metrics
from .compile_time import schedule_instructions
from .executable import Executable
from .ir import Graph
from .lower import lift_constants, lower, user_source
from .numerics_pass import key_items as numerics_key_items
from .passes import run_passes
from .schedule import Schedule, build_schedule
from .shape_log import shape_log, signature_of

log = logging.getLogger("trn_notebook.compiler")
_perf = time.perf_counter
_lock = _locks.make("backend_registration", "compiler backend registration")
_names_lock = _locks.make("leaf", "compiled graph names")
_registered = False
_memory: OrderedDict[str, tuple[Graph, Schedule]] = OrderedDict()  # cache key -> planned graph, schedule
MEMORY_CACHE_CAPACITY = 256
_name_counts: dict[str, int] = {}
_seen_failures: dict[Any, int] = {}
_capture_started: list[float] = [0.0]
_downcast_warned: set[str] = set()
_COMPILE_ID = re.compile(r"^\[?[0-9/_]+\]?: ")


class _CompiledGraphs(_state.Globals):
    """The planned graphs held in memory (by cache key) and dynamo's compiled frames."""

    def snapshot(self) -> int:  # type: ignore[override]
        """How many planned graphs are held in memory."""
        return len(_memory)

    def reset(self) -> None:
        """Drop dynamo's compiled frames and the planned graphs."""
        torch._dynamo.reset()
        super().reset()


_state.register("compiled_graphs", _CompiledGraphs(__name__, "_memory"), reset="compiled")
# graph-name counters restart, and dynamo's guard failures (emptied by torch._dynamo.reset) are read from the start
_state.register(
    "graph_names", _state.Globals(__name__, "_name_counts", "_seen_failures", "_capture_started"), reset="compiled"
)
_state.register("downcast_warnings", _state.Globals(__name__, "_downcast_warned"))  # warn again after a reset
_state.register("neuron_backend", _state.Globals(__name__, "_registered"), reset=False)  # dynamo registration


def _on_dynamo_start(_args: Any) -> None:
    _capture_started[0] = _perf()
    if progress.has_listeners():
        progress.emit("capture", 0.0, "")


def ensure_capture_callback() -> None:
    """(Re-)install the dynamo start callback that times capture (``torch._dynamo.reset()`` drops it)."""
    from torch._dynamo.callback import callback_handler

    if _on_dynamo_start not in callback_handler.start_callbacks:
        callback_handler.register_start_callback(_on_dynamo_start)


def register() -> None:
    """Register backend ``neuron`` with dynamo and attach ``torch.neuron.get_dynamo_metrics`` (idempotent)."""
    global _registered
    with _lock:
        if _registered:
            return
        from torch._dynamo.backends import registry

        # With the package installed, torch registers us itself from the torch_dynamo_backends entry point on
        # the first lookup (and asserts if the name is taken by then); otherwise register directly. `neuron`
        # belongs to torch-neuronx when it is installed; the simulator's compiler is always `neuron_sim`.
        from ..device.autoload import real_backend_present

        for name in ("neuron_sim",) if real_backend_present() else ("neuron", "neuron_sim"):
            if name not in registry._COMPILER_FNS and registry._BACKENDS.get(name) is None:
                registry.register_backend(neuron_backend, name)
        # Static shapes only, as on the real backend: a new length recompiles instead of going dynamic. This
        # is scoped to our compiles (dynamic=False in trn_notebook.compile/bucketed, per-shape specialisation
        # in neuron_backend), never set for the whole process.
        ensure_capture_callback()
        from ..device.registration import skip_dynamo_tracing

        skip_dynamo_tracing()  # dynamo is loaded now: keep it out of the device's Python kernels
        neuron_module = getattr(torch, "neuron", None)
        if neuron_module is not None and not real_backend_present():  # never replace TorchNeuron's own
            neuron_module.get_dynamo_metrics = get_dynamo_metrics
            neuron_module.reset_dynamo_metrics = reset_dynamo_metrics
        atexit.register(_release_dynamo_caches)
        _registered = True


def _release_dynamo_caches() -> None:
    """At exit, drop dynamo's caches while namespaces still exist.

    Compiled notebook functions leave ``__builtins_dict___N`` entries whose weakref callbacks would
    otherwise run after IPython cleared the namespace and print "Exception ignored … KeyError".
    """
    try:
        torch._dynamo.reset()
    except Exception:  # interpreter teardown: nothing useful left to report
        pass


def _new_recompile_reasons() -> list[str]:
    from torch._dynamo.utils import guard_failures

    reasons: list[str] = []
    for code, failures in list(guard_failures.items()):
        seen = _seen_failures.get(code, 0)
        for text in failures[seen:]:
            first = _COMPILE_ID.sub("", str(text).split("\nUser stack trace:")[0])
            reasons.extend(r.strip() for r in first.split("; ") if r.strip())
        _seen_failures[code] = len(failures)
    return reasons


def _graph_breaks(gm: torch.fx.GraphModule) -> list[dict[str, str]]:
    reason = getattr(gm, "compile_subgraph_reason", None)
    if reason is None or not getattr(reason, "graph_break", False):
        return []
    stack = getattr(reason, "user_stack", None) or []
    source = ""
    if stack:
        frame = stack[-1]
        from ..device.source_lines import format_source

        source = format_source(frame.filename, frame.lineno or 0)
    return [{"reason": str(reason.reason).strip(), "source": source}]


def _guess_model_name() -> str:
    """The compiled module's class name or the function's name, from dynamo's root frame."""
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        f_locals = getattr(tx, "f_locals", {}) or {}
        for key in ("self", "fn", "mod"):  # torch's call wrappers hold the module or function here
            obj = f_locals.get(key)
            obj = getattr(obj, "__self__", obj)
            if isinstance(obj, torch.nn.Module):
                return type(obj).__name__
            if key == "fn" and callable(obj) and hasattr(obj, "__name__"):
                return str(obj.__name__)
        args = f_locals.get("args")
        for value in (*(args if isinstance(args, tuple) else ()), *f_locals.values()):  # transformers' wrappers
            value = getattr(value, "__self__", value)
            if isinstance(value, torch.nn.Module):
                return type(value).__name__
        return tx.f_code.co_name
    except Exception:
        return "graph"


def _user_inputs(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> list[tuple[str, torch.Tensor]]:
    """The tensors the user passed (not parameters or buffers), named after dynamo's placeholders."""
    found = []
    for node, x in zip((n for n in gm.graph.nodes if n.op == "placeholder"), example_inputs):
        name = node.name
        if not isinstance(x, torch.Tensor) or isinstance(x, torch.nn.Parameter) or not name.lower().startswith("l_"):
            continue
        if any(part in name for part in ("_parameters_", "_buffers_", "self_")):
            continue
        found.append((name[2:].rstrip("_").replace("args_", "arg"), x))
    return found


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], **kwargs: Any) -> Any:
    """Dynamo backend entry: check contracts, then compile every AOT graph of ``gm`` for neuron.

    Raises :class:`~trn_notebook.compiler.contracts.DynamicShapesError` for symbolic shapes and
    ``TypeError`` for bad options; compile failures raise ``NeuronCompileError`` unless fallback
    execution is on.
    """
    register()
    t_entry = _perf()
    ensure_capture_callback()
    mode = kwargs.pop("mode", None)
    options = kwargs.pop("options", None)
    callable_name = kwargs.pop("callable_name", None)
    if kwargs:
        raise TypeError(f"neuron backend got unexpected arguments {sorted(kwargs)}; it takes mode= and options=")
    contracts.check_mode(mode)
    opts = contracts.resolve_options(options)
    if _automatic_dynamic(example_inputs):
        return _specialized_per_shape(gm, mode, options, callable_name)
    contracts.check_static(example_inputs)
    started = _capture_started[0]
    capture_us = (t_entry - started) * 1e6 if started and t_entry - started < 3600 else 0.0
    model = opts.model_name or callable_name or _guess_model_name()
    on_device = contracts.runs_on_device(gm, example_inputs)
    if callable_name is None:
        user = _user_inputs(gm, example_inputs)
        if user:
            shape_log.observe(model, user)
    capture = _Capture(gm, model, opts, capture_us, t_entry, on_device)
    from torch._dynamo.backends.common import aot_autograd

    if progress.has_listeners():
        progress.emit("forward/backward", 0.0, model)
    compiler = aot_autograd(
        fw_compiler=capture.forward,
        bw_compiler=capture.backward,
        inference_compiler=capture.inference,
        decompositions=aten_decompositions(),  # only Core ATen IR (and our kernels) reaches lowering
    )
    if not attention.uses_attention(gm):
        return compiler(gm, example_inputs)
    attention.select_kernels(gm)
    with attention.flash_attention_selected():
        return compiler(gm, example_inputs)


def _automatic_dynamic(example_inputs: list[Any]) -> bool:
    """True when dynamo made a dimension symbolic on its own (a new shape under automatic dynamic
    shapes), not because the user asked for ``dynamic=True`` (which keeps sizes non-static by default)."""
    if not torch._dynamo.config.assume_static_by_default:
        return False
    for x in example_inputs:
        if isinstance(x, torch.SymInt | torch.SymFloat):
            return True
        if isinstance(x, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in x.shape):
            return True
    return False


def _specialized_per_shape(gm: torch.fx.GraphModule, mode: Any, options: Any, callable_name: Any) -> Any:
    """Compile ``gm`` statically for each concrete input signature on first use (one compile per new
    shape, as on the real backend) instead of changing dynamo's process-wide ``automatic_dynamic_shapes``."""
    compiled: dict[tuple[Any, ...], Any] = {}

    def run(*args: Any) -> Any:
        key = tuple(
            (tuple(a.shape), a.dtype, a.device, a.requires_grad) if isinstance(a, torch.Tensor) else (type(a), a)
            for a in args
        )
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        fn = compiled.get(key)
        if fn is None:
            static = _bake_scalars(gm, args)
            fn = compiled[key] = neuron_backend(
                static, tensors, mode=mode, options=options, callable_name=callable_name
            )
        return fn(*tensors)

    return run


def _bake_scalars(gm: torch.fx.GraphModule, args: tuple[Any, ...]) -> torch.fx.GraphModule:
    """A copy of ``gm`` whose non-tensor inputs (symbolic sizes, now concrete) are constants."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, Any] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = dict(zip(placeholders, args))
    for n in gm.graph.nodes:
        if n.op == "placeholder" and not isinstance(values.get(n), torch.Tensor):
            env[n] = values.get(n)
        else:
            copy = env[n] = graph.node_copy(n, lambda x: env[x])
            for key in ("example_value", "val", "tensor_meta"):  # symbolic: AOT must fakeify the real inputs
                copy.meta.pop(key, None)
    return torch.fx.GraphModule(gm, graph)


class _Capture:
    """One dynamo graph: its AOT graphs compile through :meth:`compile_graph`."""

    def __init__(
        self, gm: torch.fx.GraphModule, model: str, opts: contracts.Options, capture_us: float, t0: float, dev: bool
    ) -> None:
        self.fx_text = gm.code
        self.node_count = sum(1 for n in gm.graph.nodes if n.op == "call_function" or n.op == "call_method")
        self.model = model
        self.opts = opts
        self.capture_us = capture_us
        self.t0 = t0
        self.on_device = dev
        self.breaks = _graph_breaks(gm)
        self.reasons = _new_recompile_reasons()

    def forward(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        return self.compile_graph("forward", gm, example_inputs)

    def backward(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        return self.compile_graph("backward", gm, example_inputs)

    def inference(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        return self.compile_graph("inference", gm, example_inputs)

    def compile_graph(self, kind: str, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        t_start = _perf()
        with _names_lock:
            n = _name_counts.get(f"{self.model}_{kind}", 0)
            _name_counts[f"{self.model}_{kind}"] = n + 1
        name = f"{_identifier(self.model)}_{kind}_{n}"
        first = kind != "backward"
        stage_us = dict.fromkeys(("capture", "aot", "lower", "passes", "codegen", "cache_write"), 0.0)
        if first:
            stage_us["capture"] = self.capture_us
            stage_us["aot"] = (t_start - self.t0) * 1e6
        specs = [signature_of(x) if isinstance(x, torch.Tensor) else repr(x) for x in example_inputs]
        record = LiveRecord(
            graph_name=name,
            model_name=self.model,
            kind=kind,
            graph_node_count=self.node_count if first else sum(1 for x in gm.graph.nodes if x.op == "call_function"),
            timestamp=time.time(),
            input_signature=specs,
            stage_us=stage_us,
            requested_options=dict(self.opts.requested),
            effective_options=dict(self.opts.effective),
            graph_breaks=list(self.breaks) if first else [],
            recompile_reasons=list(self.reasons) if first else [],
        )
        try:
            with gc_paused():  # a full collection of dynamo's objects can pause 0.5 s inside a tiny pass
                exe = self._build(name, kind, gm, specs, record, stage_us)
        except Exception as exc:
            record.error = f"{type(exc).__name__}: {exc}"
            record.compile_s = sum(stage_us.values()) / 1e6
            record.fallback = self.opts.fallback_execution  # set before the log holds it
            compile_log.add(record)
            _emit("done", t_start, name)
            if not self.opts.fallback_execution:
                raise contracts.NeuronCompileError(
                    f"neuron compile of graph {name} failed: {exc}. To run this graph eagerly instead, pass "
                    "options={'fallback_execution': True} or set TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0."
                ) from exc
            warnings.warn(
                f"neuron compile of graph {name} failed ({exc}); running it eagerly (fallback execution)",
                contracts.NeuronCompileFallbackWarning,
                stacklevel=2,
            )
            from functorch.compile import make_boxed_func

            return make_boxed_func(gm.forward)
        record.compile_s = sum(stage_us.values()) / 1e6
        compile_log.add(record)
        _emit("done", t_start, name)
        return exe

    def _build(
        self, name: str, kind: str, gm: torch.fx.GraphModule, specs: list[str], record: LiveRecord, st: dict
    ) -> Executable:
        t = _perf()
        gm, constants = lift_constants(gm)
        specs = specs + [signature_of(c) for c in constants]
        aten_text = gm.graph.python_code("self").src  # no exec: cheaper than gm.code on a lazy module
        key = disk_cache.make_key(aten_text, specs, {**self.opts.key_items(), **numerics_key_items()})
        record.graph_id = key
        bundle = Bundle(name, self.model, kind, self.fx_text, aten_text, None)
        hit = _memory.get(key)
        if hit is not None:
            record.cache_result = "memory hit"
            graph, schedule = hit
            graph = Graph(name, graph.inputs, graph.nodes, graph.outputs, graph.meta)
            bundle.note = "in-memory cache hit"
        else:
            loaded = disk_cache.load(key)
            if loaded is not None:
                record.cache_result = "disk hit"
                graph = loaded[0]
                graph = Graph(name, graph.inputs, graph.nodes, graph.outputs, graph.meta)
                schedule = build_schedule(graph)
                bundle.note = "disk cache hit"
                st["codegen"] = (_perf() - t) * 1e6  # parse + schedule; closures are added below
            else:
                _emit("lower", t, name)
                lowered = lower(gm, name)
                bundle.lowered = lowered
                t1 = _perf()
                st["lower"] = (t1 - t) * 1e6
                _emit("passes", t, name)
                graph, bundle.history = run_passes(lowered, keep=True)
                schedule = build_schedule(graph)
                st["passes"] = (_perf() - t1) * 1e6
            if kind != "backward":  # backward inputs are saved activations, not the user's
                self._warn_downcast(graph, name)
        t2 = _perf()
        _emit("codegen", t, name)
        exe = Executable(graph, schedule, record, self.on_device, constants)
        st["codegen"] += (_perf() - t2) * 1e6
        if record.cache_result == "miss":
            t3 = _perf()
            _emit("cache write", t, name)
            disk_cache.store(
                key, graph, {"graph_name": name, "model_name": self.model, "kind": kind, "input_signature": specs}
            )
            st["cache_write"] = (_perf() - t3) * 1e6
        _memory[key] = (graph, schedule)
        _memory.move_to_end(key)
        while len(_memory) > MEMORY_CACHE_CAPACITY:
            _memory.popitem(last=False)
        bundle.final = graph
        bundle.schedule = schedule
        artifacts.add(bundle)
        record.fused_kernels = schedule.fused_kernels
        record.ir_node_count = len(graph.nodes)
        record.modeled_device_s = schedule.device_s
        record.modeled_peak_bytes = schedule.peak_bytes
        record.extra["modeled_eager_device_s"] = schedule.eager_device_s
        record.extra["neuron_instructions"] = schedule_instructions(graph, schedule)
        # the custom tile kernels (trn_notebook.nki_op) this graph calls, 'ns::name' (the report lists them)
        record.extra["custom_kernels"] = sorted(
            {str(n.args[0]).partition("@")[0] for n in graph.nodes if n.op == "kernel_call" and n.args}
        )
        return exe

    def _warn_downcast(self, graph: Graph, name: str) -> None:
        what = dict(graph.meta).get("downcast")
        scalar_counters = all(t.shape == () for n, t in graph.inputs if t.dtype in ("i64", "f64") and n in (what or ""))
        if what and what != "internal" and not scalar_counters and self.model not in _downcast_warned:
            _downcast_warned.add(self.model)  # once per model, not once per graph (each bucket is a graph)
            from ..device.source_lines import user_frame

            where = user_frame() or ("<unknown>", 0)
            warnings.warn_explicit(
                f"neuron: {self.model} computes 64-bit inputs ({what}) in 32 bits and casts outputs back "
                f"(the device has no native 64-bit); {_downcast_advice(what)}",
                UserWarning,
                where[0],
                where[1],
                "trn_notebook",
            )


def _downcast_advice(what: str) -> str:
    """What a downcast means for the inputs named in ``what`` ("name:i64,name:f64"), and what to do."""
    kinds = {part.rsplit(":", 1)[-1] for part in what.split(",")}
    advice = []
    if kinds & {"f64"}:
        advice.append("float64 inputs get float32 precision: pass float32 inputs to silence this")
    if kinds - {"f64"}:
        advice.append(
            "int64 inputs stay exact while every value fits in int32 (|x| < 2**31), as token ids, targets and "
            "indices do; keep them int64 (cross_entropy, embedding and gather require int64 indices)"
        )
    return "; ".join(advice)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the garbage collector inside the block and restore its state on any exit (also an
    exception or a KeyboardInterrupt mid-compile)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _identifier(text: str) -> str:
    """``text`` as an IR identifier (graph names appear in IR text)."""
    ident = re.sub(r"\W+", "_", text).strip("_") or "graph"
    return ident if not ident[0].isdigit() else f"g_{ident}"


def _emit(stage: str, t0: float, name: str) -> None:
    if progress.has_listeners():
        progress.emit(stage, _perf() - t0, name)


def clear_memory_cache() -> None:
    """Forget in-process compiled graphs (the next compile of a graph goes to disk or recompiles)."""
    _memory.clear()


__all__ = ["clear_memory_cache", "neuron_backend", "register", "user_source"]
