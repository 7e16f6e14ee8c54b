"""Generation checks of a three-way comparison: greedy token agreement and teacher-forced logit agreement.

Logit tolerances are NxD Inference's accuracy check: ``|logit − expected| ≤ atol + rtol·|expected|`` on the
expected top-5 / top-50 / top-1000 / all tokens with atol 1e-5 and rtol 0.01 / 0.02 / 0.03 / 0.05
(aws-neuron-sdk ``libraries/nxd-inference/developer_guides/onboarding-models.rst`` L429–477). Teacher-forced:
every run scores the FP32 run's token sequence in one forward pass, so each position's logits are
conditioned on the reference prefix (what NxD's regeneration at each divergence achieves).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["LOGIT_SOURCE", "LOGIT_TOLERANCES", "GenerationCheck", "TierCheck", "logit_tiers", "token_agreement"]

ATOL = 1e-5
LOGIT_TOLERANCES: tuple[tuple[int | None, float], ...] = ((5, 0.01), (50, 0.02), (1000, 0.03), (None, 0.05))
LOGIT_SOURCE = "aws-neuron-sdk libraries/nxd-inference/developer_guides/onboarding-models.rst L429-477"


@dataclass(frozen=True)
class TierCheck:
    """One NxD tolerance tier: the positions whose expected top-k logits all lie within tolerance."""

    tier: str
    rtol: float
    positions: int
    passed_positions: int
    worst: float  # max over positions of max |err| / (atol + rtol·|expected|); ≤ 1 passes

    @property
    def passed(self) -> bool:
        """Every position within tolerance."""
        return self.passed_positions == self.positions


@dataclass(frozen=True)
class GenerationCheck:
    """Greedy generation of the three runs against FP32, and the teacher-forced logit tiers of neuron and BF16."""

    new_tokens: int
    neuron_token_agreement: float
    neuron_first_divergence: int | None
    bf16_token_agreement: float
    bf16_first_divergence: int | None
    neuron_tiers: tuple[TierCheck, ...]
    bf16_tiers: tuple[TierCheck, ...]

    @property
    def passed(self) -> bool:
        """Neuron's logits within every NxD tier."""
        return all(t.passed for t in self.neuron_tiers)


def token_agreement(candidate: torch.Tensor, reference: torch.Tensor, prompt_len: int) -> tuple[float, int | None]:
    """Share of generated positions where ``candidate`` equals ``reference``, and the first differing one
    (0 = the first new token; None = none differs). Sequences of unequal length compare over the shorter."""
    c, r = candidate[:, prompt_len:], reference[:, prompt_len:]
    n = min(c.shape[1], r.shape[1])
    if n == 0:
        return 1.0, None
    same = (c[:, :n] == r[:, :n]).all(dim=0)
    diff = (~same).nonzero()
    return float(same.float().mean()), (int(diff[0]) if diff.numel() else None)


def logit_tiers(logits: torch.Tensor, expected: torch.Tensor) -> tuple[TierCheck, ...]:
    """NxD's tiers for ``logits`` against ``expected`` (both ``(positions, vocab)``, compared in float64)."""
    a, e = logits.double(), expected.double()
    out = []
    for k, rtol in LOGIT_TOLERANCES:
        if k is None or k >= e.shape[-1]:
            idx = None
            name = "all" if k is None else f"top-{k} (= all {e.shape[-1]})"
        else:
            idx = e.topk(k, dim=-1).indices
            name = f"top-{k}"
        ea = e if idx is None else e.gather(-1, idx)
        aa = a if idx is None else a.gather(-1, idx)
        score = ((aa - ea).abs() / (ATOL + rtol * ea.abs())).amax(dim=-1)
        out.append(TierCheck(name, rtol, int(score.numel()), int((score <= 1).sum()), float(score.max())))
    return tuple(out)


def _ids(inputs: dict[str, Any]) -> torch.Tensor:
    ids = inputs.get("input_ids")
    if not isinstance(ids, torch.Tensor):
        raise ValueError("generate= needs the prompt as input_ids: pass inputs={'input_ids': ids} or the ids tensor")
    return ids


def generate_three(
    models: dict[str, torch.nn.Module], devices: dict[str, str], inputs: dict[str, Any], max_new_tokens: int
) -> dict[str, torch.Tensor]:
    """Greedy ``generate`` of each model on its device (``fp32``, ``bf16``, ``neuron``); token ids on the CPU."""
    prompt = _ids(inputs)
    out: dict[str, torch.Tensor] = {}
    for name, model in models.items():
        kwargs = {k: v.to(devices[name]) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        with torch.no_grad():
            ids = model.generate(  # type: ignore[operator]
                **kwargs, max_new_tokens=max_new_tokens, do_sample=False, min_new_tokens=max_new_tokens
            )
        out[name] = ids.cpu()
    if out["fp32"].shape[1] <= prompt.shape[1]:
        raise ValueError("the FP32 run generated no tokens; raise max_new_tokens")
    return out


def teacher_forced_logits(model: torch.nn.Module, device: str, ids: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """Logits predicting each generated token of ``ids`` (``(positions, vocab)``, float32 CPU)."""
    with torch.no_grad():
        out = model(input_ids=ids.to(device))
    logits = out.logits if hasattr(out, "logits") else out[0]
    return logits[:, prompt_len - 1 : ids.shape[1] - 1].float().cpu().reshape(-1, logits.shape[-1])


def check_generation(
    models: dict[str, torch.nn.Module], devices: dict[str, str], inputs: dict[str, Any], max_new_tokens: int
) -> GenerationCheck:
    """Token agreement and teacher-forced logit tiers of the neuron and BF16 runs against FP32.

    Raises ``ValueError`` when the inputs hold no ``input_ids`` or nothing was generated.
    """
    prompt_len = _ids(inputs).shape[1]
    ids = generate_three(models, devices, inputs, max_new_tokens)
    ref = ids["fp32"]
    n_agree, n_div = token_agreement(ids["neuron"], ref, prompt_len)
    b_agree, b_div = token_agreement(ids["bf16"], ref, prompt_len)
    logits = {name: teacher_forced_logits(m, devices[name], ref, prompt_len) for name, m in models.items()}
    return GenerationCheck(
        new_tokens=int(ref.shape[1] - prompt_len),
        neuron_token_agreement=n_agree,
        neuron_first_divergence=n_div,
        bf16_token_agreement=b_agree,
        bf16_first_divergence=b_div,
        neuron_tiers=logit_tiers(logits["neuron"], logits["fp32"]),
        bf16_tiers=logit_tiers(logits["bf16"], logits["fp32"]),
    )
