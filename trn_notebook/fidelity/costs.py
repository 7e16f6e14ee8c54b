"""The cost comparison of a serving estimate: time to the first useful result, and money only from user figures.

* **Time to the first useful result** (modeled) = the cold compiles of the bucket set (modeled Neuron
  compile, :mod:`trn_notebook.compiler.compile_time`) + loading the weights + the first request's end to
  end. The load is the user's ``load_s`` when given, else the BF16 weights at the load rate DeepSeek-V3's
  published figures imply (``LOAD_BYTES_PER_S``, derived: 1.34 TB of weights loaded in 7.8 min,
  neuronx-distributed-inference ``contrib/models/DeepSeek-V3/README.md``).
* **Amortisation**: the requests the warm service completes in the time the cold start took; after nine
  times as many, the start-up is under 10% of the time spent.
* **Money** — no price is built in. Cost per output = instance price per hour / outputs per hour at the
  warm steady state (full load at the stated concurrency); per *accepted* output = / the accepted
  fraction. Migration cost = engineering days x day rate. Break-even against the user's baseline
  (``{"name": ..., "cost_per_output": ...}`` or ``{"name": ..., "price_per_hour": ..., "outputs_per_hour": ...}``)
  = migration cost / saving per accepted output, and its period at the warm throughput running
  around the clock. A figure whose input is missing reads "missing (give ...)".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..display.format import fmt_duration
from ..display.results import Card

LOAD_BYTES_PER_S = 1.342e12 / (7.8 * 60)  # derived: DeepSeek-V3 BF16 weights (671B params) in 7.8 min
LOAD_SOURCE = "DeepSeek-V3's published load, 1.34 TB in 7.8 min (derived rate)"


@dataclass(frozen=True)
class CostInputs:
    """What the user supplied (None: not given)."""

    load_s: float | None = None
    price_per_hour: float | None = None
    engineering_days: float | None = None
    day_rate: float | None = None
    accepted_fraction: float | None = None
    baseline: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for name in ("load_s", "price_per_hour", "engineering_days", "day_rate"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int | float) or v < 0):
                raise ValueError(f"{name} must be a non-negative number, got {v!r}")
        f = self.accepted_fraction
        if f is not None and not (isinstance(f, int | float) and 0 < f <= 1):
            raise ValueError(f"accepted_fraction must be in (0, 1], got {f!r}")
        if self.baseline is not None:
            b = self.baseline
            if not isinstance(b, dict) or "name" not in b:
                raise ValueError("baseline must be a dict with a 'name' and 'cost_per_output' (or 'price_per_hour' "
                                 "and 'outputs_per_hour')")  # fmt: skip
            if "cost_per_output" not in b and not {"price_per_hour", "outputs_per_hour"} <= set(b):
                raise ValueError(
                    f"baseline {b.get('name')!r} needs 'cost_per_output', or 'price_per_hour' and 'outputs_per_hour'"
                )


@dataclass(frozen=True)
class Costs:
    """Time to the first useful result beside the warm steady state, and the money figures (None: missing)."""

    cold_compile_s: float
    load_s: float
    load_source: str
    first_request_s: float
    warm_request_s: float  # steady state: seconds per completed request at the stated concurrency
    amortize_requests: int  # requests the warm service completes in the cold start's time
    cost_per_output: float | None
    cost_per_accepted_output: float | None
    migration_cost: float | None
    baseline_name: str | None
    baseline_cost_per_output: float | None
    break_even_outputs: float | None  # None: missing input, inf: never (the baseline is cheaper)
    break_even_s: float | None
    missing: tuple[str, ...] = ()

    @property
    def first_useful_s(self) -> float:
        """Modeled seconds from nothing compiled to the first completed request."""
        return self.cold_compile_s + self.load_s + self.first_request_s

    def line(self) -> str:
        """One sentence for the migration report's start-up row."""
        money = (
            f"cost per accepted output {self.cost_per_accepted_output:.6g}"
            if self.cost_per_accepted_output is not None
            else "cost per accepted output missing (give price_per_hour, accepted_fraction)"
        )
        if self.break_even_outputs is None:
            even = "break-even missing (give " + ", ".join(self.missing) + ")"
        elif self.break_even_outputs == float("inf"):
            even = f"never breaks even against {self.baseline_name}"
        else:
            period = fmt_duration(self.break_even_s) if self.break_even_s is not None else "n/a"
            even = f"breaks even against {self.baseline_name} after {self.break_even_outputs:,.0f} outputs ({period})"
        return (
            f"first useful result {fmt_duration(self.first_useful_s)} (cold compiles "
            f"{fmt_duration(self.cold_compile_s)} + load {fmt_duration(self.load_s)} + first request) vs warm "
            f"{fmt_duration(self.warm_request_s)} per request; the cold start = {self.amortize_requests:,} warm "
            f"requests; {money}; {even}"
        )

    def card(self) -> Card:
        """The figures as a card (missing ones say which input to give)."""

        def money(v: float | None, need: str) -> str:
            return f"{v:.6g}" if v is not None else f"missing (give {need})"

        if self.break_even_outputs is None:
            even = "missing (give " + ", ".join(self.missing or ("a baseline",)) + ")"
        elif self.break_even_outputs == float("inf"):
            even = f"never: {self.baseline_name} costs less per accepted output"
        else:
            period = fmt_duration(self.break_even_s) if self.break_even_s is not None else "n/a"
            even = (
                f"{self.break_even_outputs:,.0f} accepted outputs ({period} at the warm throughput, around the clock)"
            )
        return Card(
            "Cost comparison (times modeled; money only from your figures)",
            [
                (
                    "first useful result",
                    f"{fmt_duration(self.first_useful_s)} = cold compiles {fmt_duration(self.cold_compile_s)} "
                    f"+ load {fmt_duration(self.load_s)} + first request {fmt_duration(self.first_request_s)}",
                ),
                ("warm steady state", f"{fmt_duration(self.warm_request_s)} per completed request"),
                (
                    "amortised",
                    f"the cold start = {self.amortize_requests:,} warm requests; under 10% of the time after "
                    f"{9 * self.amortize_requests:,}",
                ),
                ("cost per output", money(self.cost_per_output, "price_per_hour")),
                ("cost per accepted output", money(self.cost_per_accepted_output, "price_per_hour, accepted_fraction")),
                ("migration cost", money(self.migration_cost, "engineering_days, day_rate")),
                (
                    f"break-even vs {self.baseline_name or 'a baseline'}",
                    even,
                ),
            ],
            [f"load: {self.load_source}"],
        )


def cost_of(
    inputs: CostInputs, *, requests_per_s: float, cold_compile_s: float, first_request_s: float, weight_bytes: int
) -> Costs:
    """The cost comparison of a serving estimate (its throughput, cold compile and first-request time) from
    ``inputs`` (see the module docstring); raises nothing (a missing input is listed in ``missing``)."""
    if inputs.load_s is not None:
        load, source = float(inputs.load_s), "given (load_s=)"
    else:
        load, source = (
            weight_bytes / LOAD_BYTES_PER_S,
            f"modeled: {weight_bytes / 1e9:.1f} GB of weights at {LOAD_SOURCE}",
        )
    per_request = 1.0 / requests_per_s if requests_per_s > 0 else float("inf")
    cold = cold_compile_s + load
    amortize = int(cold / per_request) if per_request > 0 else 0
    missing = []
    per_output = per_accepted = migration = base = None
    if inputs.price_per_hour is not None:
        per_output = inputs.price_per_hour / 3600.0 * per_request
        if inputs.accepted_fraction is not None:
            per_accepted = per_output / inputs.accepted_fraction
        else:
            missing.append("accepted_fraction")
    else:
        missing.append("price_per_hour")
    if inputs.engineering_days is not None and inputs.day_rate is not None:
        migration = inputs.engineering_days * inputs.day_rate
    else:
        missing.append("engineering_days, day_rate")
    b = inputs.baseline
    if b is not None:
        base = (
            float(b["cost_per_output"])
            if "cost_per_output" in b
            else float(b["price_per_hour"]) / float(b["outputs_per_hour"])
        )
    else:
        missing.append("baseline")
    outputs = seconds = None
    if per_accepted is not None and migration is not None and base is not None:
        saving = base - per_accepted
        outputs = migration / saving if saving > 0 else float("inf")
        seconds = outputs * per_request if saving > 0 else None
    return Costs(
        cold_compile_s=cold_compile_s,
        load_s=load,
        load_source=source,
        first_request_s=first_request_s,
        warm_request_s=per_request,
        amortize_requests=amortize,
        cost_per_output=per_output,
        cost_per_accepted_output=per_accepted,
        migration_cost=migration,
        baseline_name=str(b["name"]) if b is not None else None,
        baseline_cost_per_output=base,
        break_even_outputs=outputs,
        break_even_s=seconds,
        missing=tuple(missing),
    )
