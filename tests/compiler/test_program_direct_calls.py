"""The compiled program calls ATen through the ops' C++ builtins (issue 33): no ``OpOverload.__call__`` frame per node."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import torch

import trn_notebook  # noqa: F401
from trn_notebook.compiler import executable


def _f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = torch.relu(x @ w) + 1.0
    a, b = h.split(4, dim=1)
    return (a * b).sum(), torch.cat([b, a], dim=0)


def test_the_program_runs_no_python_frame_of_torch_ops_and_gives_the_same_values() -> None:
    x, w = torch.randn(32, 16), torch.randn(16, 8)
    seen: list[executable.Executable] = []
    orig = executable.Executable.__call__

    def spy(self: executable.Executable, args: list[Any]) -> list[Any]:
        seen.append(self)
        return orig(self, args)

    executable.Executable.__call__ = spy  # type: ignore[method-assign]
    try:
        out = torch.compile(_f, backend="neuron")(x.to("neuron"), w.to("neuron"))
    finally:
        executable.Executable.__call__ = orig  # type: ignore[method-assign]
    program = seen[-1].program
    frames: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.endswith("torch/_ops.py"):
            frames.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        host = program([x, w])
    finally:
        sys.setprofile(None)
    assert len(program.plan) >= 4
    assert frames == [], frames  # each node is one call of the op's C++ builtin
    ref = _f(x, w)
    torch.testing.assert_close(host[0], ref[0])
    assert torch.equal(host[1], ref[1])
    torch.testing.assert_close(out[0].cpu(), ref[0])
    assert torch.equal(out[1].cpu(), ref[1])
