"""``trn_notebook.compare_numerics``: run a model three ways (CPU FP32, CPU BF16, neuron) and judge it per module.

The neuron run uses the numerics policy given (``numerics=``, applied only for the call) or the one in force.
The CPU BF16 run is a deep copy cast to ``torch.bfloat16`` with floating inputs cast too, as a user deploys
it; FP32 and neuron runs use a float32 copy. The user's model is never changed. The last comparison of
the session is kept (registered with :mod:`trn_notebook.state`) for the migration report.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import torch

from .. import state as _state
from ..aws_ratio import THRESHOLD, numerics_ratio
from ..device.numerics.policy import NumericsPolicy, numerics_policy, numerics_scope, parse_numerics
from .capture import Capture, capture, copy_as, first_tensor, source_line, to_device
from .debug import first_differing_op
from .generation import check_generation
from .metrics import Heatmap, first_crossing, heatmap, module_rows
from .result import NumericsComparison

__all__ = ["compare_numerics", "last_comparison", "resolve_policy"]

_last: list[NumericsComparison] = []  # the last comparison of the session (read by the migration report)
_state.register("last_numerics_comparison", _state.Globals(__name__, "_last"))


def last_comparison() -> NumericsComparison | None:
    """The session's last :func:`compare_numerics` result (None after a reset or before the first)."""
    return _last[0] if _last else None


def resolve_policy(numerics: Any) -> NumericsPolicy:
    """The policy of ``numerics=``: None (the one in force), a :class:`NumericsPolicy`, a dict of
    ``set_numerics`` knobs (``mode`` defaults to ``"trainium"``) or a spec string ``"trainium,autocast=matmult"``.

    Raises ``TypeError``/``ValueError`` naming the accepted forms.
    """
    if numerics is None:
        return numerics_policy()
    if isinstance(numerics, NumericsPolicy):
        return numerics
    if isinstance(numerics, str):
        return parse_numerics(numerics)
    if isinstance(numerics, dict):
        knobs = dict(numerics)
        mode = knobs.pop("mode", "trainium")
        try:
            return dataclasses.replace(NumericsPolicy(), mode=mode, **knobs)  # validates as set_numerics does
        except TypeError as exc:
            valid = ", ".join(f.name for f in dataclasses.fields(NumericsPolicy))
            raise TypeError(f"numerics= has an unknown knob ({exc}); valid: {valid}") from None
    raise TypeError(
        f"numerics= takes None, a dict of set_numerics knobs, a spec string or a NumericsPolicy; got {type(numerics).__name__}"
    )


def _split(inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, tuple):
        return inputs, {}
    return (inputs,), {}


def _check(model: Any, threshold: Any, generate: Any) -> int | None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"compare_numerics needs a torch.nn.Module, got {type(model).__name__}")
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not threshold > 0:
        raise ValueError(f"threshold must be a positive number (AWS uses {THRESHOLD:g}), got {threshold!r}")
    if generate is None:
        return None
    if not isinstance(generate, dict) or set(generate) - {"max_new_tokens"}:
        raise ValueError(f"generate= takes dict(max_new_tokens=N), got {generate!r}")
    n = generate.get("max_new_tokens", 8)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"generate max_new_tokens must be a positive integer, got {n!r}")
    if not callable(getattr(model, "generate", None)):
        raise ValueError(
            f"generate= needs a model with .generate() (a Hugging Face model); {type(model).__name__} has none"
        )
    return n


def compare_numerics(
    model: torch.nn.Module,
    inputs: Any,
    *,
    numerics: Any = None,
    compiled: bool = False,
    threshold: float = THRESHOLD,
    generate: dict[str, int] | None = None,
) -> NumericsComparison:
    """Run ``model`` on ``inputs`` as CPU FP32, CPU BF16 and neuron (plus ``torch.compile`` if ``compiled``) and
    report per module AWS's ratio ``|neuron − FP32| / |CPU BF16 − FP32|`` (L-inf, L2), max abs / rel error,
    cosine, and the first module at or above ``threshold`` with its class's ``forward`` source line.

    ``inputs`` is a tensor, a tuple of positional arguments or a dict of keyword arguments. ``numerics`` is
    None (the policy in force), a dict of ``set_numerics`` knobs, a spec string or a policy; it applies to
    this call only. ``generate=dict(max_new_tokens=N)`` (a Hugging Face model) adds greedy token agreement
    and teacher-forced logit agreement at NxD Inference's tolerances. Raises ``TypeError``/``ValueError`` for
    bad arguments (nothing run), and what the model raises.
    """
    new_tokens = _check(model, threshold, generate)
    policy = resolve_policy(numerics)
    args, kwargs = _split(inputs)
    t0 = time.perf_counter()
    ref_model = copy_as(model, "cpu", torch.float32).eval()
    bf16_model = copy_as(model, "cpu", torch.bfloat16).eval()
    sources = {name: source_line(m) for name, m in ref_model.named_modules()}

    def runner(m: torch.nn.Module, device: str, dtype: torch.dtype | None) -> Any:
        a, k = to_device(args, device, dtype), to_device(kwargs, device, dtype)
        return lambda: m(*a, **k)

    fp32 = capture(ref_model, runner(ref_model, "cpu", torch.float32), keep_inputs=True)
    bf16 = capture(bf16_model, runner(bf16_model, "cpu", torch.bfloat16))
    dev_model = copy_as(model, "neuron", torch.float32).eval()
    with numerics_scope(policy):
        neuron = capture(dev_model, runner(dev_model, "neuron", torch.float32))
        rows = module_rows(fp32, bf16, neuron, sources, threshold=threshold)
        first = first_crossing(rows, threshold)
        first_op = first_differing_op(ref_model, dev_model, fp32.calls[first.key]) if first is not None else None
        compiled_ratio = _compiled(dev_model, runner, fp32, bf16) if compiled else None
        gen = None
        if new_tokens is not None:
            models = {"fp32": ref_model, "bf16": bf16_model, "neuron": dev_model}
            gen = check_generation(
                models, {"fp32": "cpu", "bf16": "cpu", "neuron": "neuron"}, kwargs or {"input_ids": args[0]}, new_tokens
            )
    heat: dict[str, Heatmap] = {}
    by_capture: dict[tuple[int, int], Heatmap] = {}  # a block sharing its last child's output shares its map
    for r in rows:
        ref, cand = fp32.calls[r.key], neuron.calls[r.key]
        ident = (id(ref.output), id(cand.output))
        if ident not in by_capture:
            by_capture[ident] = heatmap(ref, cand)
        heat[r.key] = dataclasses.replace(by_capture[ident], key=r.key)
    notes = [
        "ratio: |neuron - FP32| / |CPU BF16 - FP32| of each module's first floating output; 0 when neuron equals "
        "FP32, 1 when both equal FP32, inf when only CPU BF16 equals FP32. max rel: max abs error / max |FP32|"
    ]
    if compiled:
        notes.append("compiled: the model's output only (forward hooks do not run inside a compiled graph)")
    result = NumericsComparison(
        model=type(model).__name__,
        policy=policy,
        threshold=float(threshold),
        rows=rows,
        heatmaps=heat,
        first=first,
        first_op=first_op,
        compiled=compiled_ratio,
        generation=gen,
        wall_s=time.perf_counter() - t0,
        notes=notes,
        hardware=_hardware_name(),
    )
    _last[:] = [result]
    return result


def _hardware_name() -> str:
    """The live backend's name when ``neuron`` is real Trainium (TorchNeuron), else ``""`` (the simulator)."""
    from ..facts import current

    backend = current()
    return "" if backend.is_simulator else backend.name


def _compiled(dev_model: torch.nn.Module, runner: Any, fp32: Capture, bf16: Capture) -> Any:
    """The compiled model's output judged against FP32 and CPU BF16 (the same ratio)."""
    from ..compiler.api import compile as neuron_compile

    compiled_model = neuron_compile(dev_model)
    with torch.no_grad():
        out = runner(compiled_model, "neuron", torch.float32)()
    got, ref, base = first_tensor(out), first_tensor(fp32.output), first_tensor(bf16.output)
    if got is None or ref is None or base is None:
        raise ValueError("the compiled model's output holds no floating tensor to compare")
    return numerics_ratio(got.float().cpu(), ref.float(), base.float())
