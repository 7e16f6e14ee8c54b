"""The zoo's stages: one model on ``neuron`` (eager and compiled) compared with the same model on CPU.

Every stage starts from the same seeded CPU weights (a ``deepcopy`` moved with ``.to("neuron")``)
and compares with CPU PyTorch eager at a stated tolerance (:data:`TOLERANCES`). A stage passes,
fails with the first line of its error (a mismatch names the tensor and the largest difference),
or is ``n/a`` with the reason (e.g. the CPU itself refuses a static cache for this model).
"""

from __future__ import annotations

import copy
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

import trn_notebook  # noqa: F401  (registers the neuron device and the compiler)

from .specs import ModelSpec, build, make_inputs, prompt

N = "neuron"
STAGES = ("eager_fwd", "compiled_fwd", "eager_bwd", "compiled_bwd", "train", "generate", "generate_compiled")
STAGE_TITLES = {
    "eager_fwd": "eager forward",
    "compiled_fwd": "compiled forward",
    "eager_bwd": "eager backward",
    "compiled_bwd": "compiled backward",
    "train": "5 AdamW steps",
    "generate": "greedy generate (eager)",
    "generate_compiled": "generate compiled, static cache",
}
# (rtol, atol) against CPU float32 eager; generated tokens must be identical.
TOLERANCES = {"forward": (1e-4, 1e-5), "backward": (1e-3, 1e-5), "train": (1e-3, 1e-5)}
TRAIN_STEPS = 5
NEW_TOKENS = 6


class StageNA(Exception):
    """The stage does not apply to this model (the message says why)."""


@dataclass
class ModelResult:
    """Outcome of one zoo model: per stage ``[status, detail, seconds]`` plus benchmark figures."""

    name: str
    family: str
    arch: str
    stages: dict[str, list[Any]] = field(default_factory=dict)
    crashed: str = ""
    figures: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # why a benchmark figure is missing

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (the worker protocol)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelResult:
        """Inverse of :meth:`to_json`."""
        return cls(**data)


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (dynamo's wrapper text stripped)."""
    text = str(exc).strip()
    for marker in ("NeuronCompileError: ", "backend='neuron' raised:\n"):
        if marker in text:
            text = text.split(marker, 1)[1].strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line}"[:300]


def _to(x: Any, device: str) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


def _outputs(out: Any) -> dict[str, torch.Tensor]:
    """The floating-point tensors of a model output worth comparing (loss, logits, hidden states)."""
    found: dict[str, torch.Tensor] = {}
    items = out.items() if hasattr(out, "items") else [("output", out)]
    for key, value in items:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            found[key] = value.detach().cpu().float()
    return found


def _close(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], tol: tuple[float, float], what: str) -> None:
    if sorted(got) != sorted(ref):
        raise AssertionError(f"{what}: outputs {sorted(got)} on neuron, {sorted(ref)} on CPU")
    rtol, atol = tol
    for key in ref:
        r, g = ref[key], got[key]
        if r.shape != g.shape:
            raise AssertionError(f"{what} {key}: shape {tuple(g.shape)} on neuron, {tuple(r.shape)} on CPU")
        if not torch.allclose(g, r, rtol=rtol, atol=atol, equal_nan=True):
            diff = (g - r).abs().nan_to_num(float("inf")).max().item()
            raise AssertionError(f"{what} {key}: max |neuron - cpu| = {diff:.3g} (rtol {rtol}, atol {atol})")


def _loss(out: Any) -> torch.Tensor:
    loss = getattr(out, "loss", None)
    if loss is None:  # no labels for this head: a fixed projection of the main output
        main = next(iter(_outputs_live(out).values()))
        w = torch.linspace(-1, 1, main.shape[-1], device=main.device)
        return (main.float() * w).mean()
    return loss


def _outputs_live(out: Any) -> dict[str, torch.Tensor]:
    items = out.items() if hasattr(out, "items") else [("output", out)]
    return {k: v for k, v in items if isinstance(v, torch.Tensor) and v.is_floating_point()}


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().cpu().float() for n, p in model.named_parameters() if p.grad is not None}


class Runner:
    """Runs the stages of one spec; each stage gets fresh copies of the same CPU weights."""

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.cpu = build(spec)
        self._ref_cache: dict[str, Any] = {}
        self.stages_status: dict[str, str] = {}
        self.notes: list[str] = []

    def device_model(self) -> torch.nn.Module:
        """A fresh neuron copy of the CPU weights."""
        return copy.deepcopy(self.cpu).to(N)

    def _ref(self, key: str, fn: Callable[[], Any]) -> Any:
        if key not in self._ref_cache:
            self._ref_cache[key] = fn()
        return self._ref_cache[key]

    # -- forward ----------------------------------------------------------------------------------
    def _forward(self, model: torch.nn.Module, fn: Callable[..., Any], device: str) -> dict[str, torch.Tensor]:
        inputs = _to(make_inputs(self.spec, self.cpu, labels=True), device)
        model.eval()
        with torch.no_grad():
            return _outputs(fn(**inputs))

    def _cpu_forward(self) -> dict[str, torch.Tensor]:
        return self._ref("fwd", lambda: self._forward(self.cpu, self.cpu, "cpu"))

    def eager_fwd(self) -> str:
        dev = self.device_model()
        _close(self._forward(dev, dev, N), self._cpu_forward(), TOLERANCES["forward"], "forward")
        return ""

    def compiled_fwd(self) -> str:
        dev = self.device_model()
        compiled = torch.compile(dev, backend=N)
        _close(self._forward(dev, compiled, N), self._cpu_forward(), TOLERANCES["forward"], "compiled forward")
        return _graphs_note()

    # -- backward ---------------------------------------------------------------------------------
    def _backward(self, model: torch.nn.Module, fn: Callable[..., Any], device: str) -> tuple[dict, dict]:
        inputs = _to(make_inputs(self.spec, self.cpu, labels=True), device)
        model.train()
        out = fn(**inputs)
        loss = _loss(out)
        loss.backward()
        return {"loss": loss.detach().cpu().float()}, _grads(model)

    def _cpu_backward(self) -> tuple[dict, dict]:
        def run() -> tuple[dict, dict]:
            model = copy.deepcopy(self.cpu)
            return self._backward(model, model, "cpu")

        return self._ref("bwd", run)

    def _check_backward(self, got: tuple[dict, dict], what: str) -> str:
        ref_loss, ref_grads = self._cpu_backward()
        loss, grads = got
        _close(loss, ref_loss, TOLERANCES["forward"], what)
        missing = sorted(set(ref_grads) ^ set(grads))
        if missing:
            raise AssertionError(f"{what}: gradient present on one device only for {missing[:3]}")
        rtol, atol = TOLERANCES["backward"]
        for name, r in ref_grads.items():  # every gradient by parameter name
            scale = max(1.0, r.abs().max().item())
            _close({name: grads[name]}, {name: r}, (rtol, atol * scale), f"{what} grad")
        return f"{len(ref_grads)} gradients"

    def eager_bwd(self) -> str:
        dev = self.device_model()
        return self._check_backward(self._backward(dev, dev, N), "backward")

    def compiled_bwd(self) -> str:
        dev = self.device_model()
        compiled = torch.compile(dev, backend=N)
        note = self._check_backward(self._backward(dev, compiled, N), "compiled backward")
        return f"{note}; {_graphs_note()}"

    # -- training ---------------------------------------------------------------------------------
    def _train(self, model: torch.nn.Module, device: str) -> tuple[list[float], dict[str, torch.Tensor]]:
        inputs = _to(make_inputs(self.spec, self.cpu, labels=True), device)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses = []
        for _ in range(TRAIN_STEPS):
            opt.zero_grad()
            loss = _loss(model(**inputs))
            loss.backward()
            opt.step()
            losses.append(float(loss.detach().cpu()))
        return losses, {n: p.detach().cpu().float() for n, p in model.named_parameters()}

    def train(self) -> str:
        ref_losses, ref_params = self._train(copy.deepcopy(self.cpu), "cpu")
        losses, params = self._train(self.device_model(), N)
        rtol, atol = TOLERANCES["train"]
        _close({"losses": torch.tensor(losses)}, {"losses": torch.tensor(ref_losses)}, (rtol, atol), "loss curve")
        _close(params, ref_params, (rtol, atol), "final parameters")
        return f"loss {ref_losses[0]:.4f} -> {ref_losses[-1]:.4f}"

    # -- generation -------------------------------------------------------------------------------
    def _generate(self, model: torch.nn.Module, device: str, **kwargs: Any) -> torch.Tensor:
        model.eval()
        cfg = model.generation_config
        if cfg.pad_token_id is None:
            cfg.pad_token_id = cfg.eos_token_id if cfg.eos_token_id is not None else 0
        inputs = _to(prompt(self.spec, self.cpu), device)
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False, min_new_tokens=NEW_TOKENS,
                                 **kwargs)  # fmt: skip
        return out.cpu()

    def _cpu_generate(self) -> torch.Tensor:
        if not self.spec.generates:
            raise StageNA(f"no generation head ({self.spec.task})")
        try:
            return self._ref("gen", lambda: self._generate(copy.deepcopy(self.cpu), "cpu"))
        except Exception as exc:
            raise StageNA(f"CPU generate raises too: {first_line(exc)}") from exc

    def generate(self) -> str:
        ref = self._cpu_generate()
        got = self._generate(self.device_model(), N)
        if not torch.equal(got, ref):
            raise AssertionError(f"tokens differ: neuron {got.tolist()} vs CPU {ref.tolist()}")
        return f"{ref.shape[-1]} tokens"

    def generate_compiled(self) -> str:
        from transformers import CompileConfig

        ref = self._cpu_generate()
        if not getattr(self.cpu, "_can_compile_fullgraph", True):  # generate would never call torch.compile
            raise StageNA("transformers never compiles generate for this model (_can_compile_fullgraph is False)")
        try:  # does the model support a static cache at all? Ask the CPU, uncompiled.
            self._ref("static", lambda: self._generate(copy.deepcopy(self.cpu), "cpu", cache_implementation="static"))
        except Exception as exc:
            raise StageNA(f"no static cache for this model (CPU: {first_line(exc)})") from exc
        from trn_notebook.compiler import compile_log

        before = len(compile_log.snapshot())
        got = self._generate(
            self.device_model(),
            N,
            cache_implementation="static",
            compile_config=CompileConfig(backend=N, mode=None, fullgraph=False),  # type: ignore[arg-type]
        )
        records = compile_log.snapshot()[before:]
        if not records:
            raise AssertionError("generate did not compile the decoding step (no neuron graph was built)")
        if not torch.equal(got, ref):
            raise AssertionError(f"tokens differ: neuron {got.tolist()} vs CPU eager {ref.tolist()}")
        return f"{len(records)} graph{'s' if len(records) != 1 else ''}"


def _graphs_note() -> str:
    from trn_notebook.compiler import compile_log

    recs = compile_log.snapshot()
    return f"{len(recs)} graph{'s' if len(recs) != 1 else ''}" if recs else "no graph compiled"


def run_model(spec: ModelSpec, stages: tuple[str, ...] = STAGES, bench: bool = False) -> ModelResult:
    """Run ``stages`` for ``spec`` in this process; a failing stage never stops the others."""
    import transformers

    from trn_notebook.compiler import compile_log

    result = ModelResult(spec.name, spec.family, spec.model)
    try:
        runner = Runner(spec)
    except Exception as exc:
        for stage in stages:
            result.stages[stage] = ["fail", f"building the model: {first_line(exc)}", 0.0]
        return result
    transformers.logging.set_verbosity_error()
    for stage in stages:
        torch._dynamo.reset()
        compile_log.reset()
        t0 = time.perf_counter()
        try:
            detail = getattr(runner, stage)()
            status = "pass"
        except StageNA as exc:
            status, detail = "n/a", str(exc)
        except Exception as exc:
            status, detail = "fail", first_line(exc)
            if bench:
                traceback.print_exc()
        result.stages[stage] = [status, detail, round(time.perf_counter() - t0, 2)]
        runner.stages_status[stage] = status
    if bench:
        from .figures import measure

        result.figures = measure(runner)
        result.notes = list(runner.notes)
    torch._dynamo.reset()
    return result
