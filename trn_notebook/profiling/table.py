"""The per-op table of a finished ``torch.profiler`` profile, with the modeled device columns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    import pandas as pd


def profile_table(prof: Any) -> pd.DataFrame:
    """Per-op table of a finished ``torch.profiler`` profile with modeled device columns.

    Columns: ``op``, ``calls``, ``cpu_total_ms`` / ``self_cpu_ms`` (wall, Kineto), ``device_ms`` /
    ``self_device_ms`` (modeled neuron time), ``device_launches`` (modeled device launches the op
    issued: an eager kernel or a compiled graph each count one), ``simulator_kernel`` (True for the
    simulator's inner CPU kernels — already inside their parent's time). Sorted by device time.
    Raises ``ValueError`` if ``prof`` is not a stopped ``torch.profiler.profile``.
    """
    import pandas as pd

    if not hasattr(prof, "key_averages"):
        raise ValueError(f"profile_table() takes a torch.profiler.profile object, got {type(prof).__name__}")
    try:
        averages = prof.key_averages()
    except (AssertionError, RuntimeError) as exc:
        raise ValueError(f"the profile has no results yet (stop it first: leave the `with` block): {exc}") from exc
    launches: dict[str, int] = {}
    for fe in prof.events():
        if fe.device_type == torch.autograd.DeviceType.CPU and fe.kernels:
            launches[fe.key] = launches.get(fe.key, 0) + len(fe.kernels)
    rows = []
    for a in averages:
        if a.device_type != torch.autograd.DeviceType.CPU:
            continue
        rows.append(
            (
                a.key,
                a.count,
                a.cpu_time_total / 1e3,
                a.self_cpu_time_total / 1e3,
                a.device_time_total / 1e3,
                a.self_device_time_total / 1e3,
                launches.get(a.key, 0),
                a.key.startswith("[neuron sim] "),
            )
        )
    cols = ["op", "calls", "cpu_total_ms", "self_cpu_ms", "device_ms", "self_device_ms", "device_launches",
            "simulator_kernel"]  # fmt: skip
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["self_device_ms", "self_cpu_ms"], ascending=False, ignore_index=True)
