"""The compiled program calls ATen through the ops' C++ builtins (issue 33): no ``OpOverload.__call__`` frame per node."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import torch

import trn_notebook  # noqa: F401
from trn_notebook.compiler import executable
from trn_notebook.device.memory import runtime


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


def test_a_compiled_runs_results_are_their_own_cached_host_views_and_backward_matches_cpu() -> None:
    x = torch.randn(32, 16)
    w = torch.randn(16, 8, requires_grad=True)
    wn = w.detach().to("neuron").requires_grad_(True)
    results: list[tuple[list[Any], list[Any]]] = []
    orig = executable.Program.__call__

    def spy(self: executable.Program, inputs: list[Any]) -> list[Any]:
        outs = orig(self, inputs)
        results.append((list(inputs), outs))
        return outs

    fn = torch.compile(_f, backend="neuron")
    fn(x.to("neuron"), wn)  # compile outside the spy
    executable.Program.__call__ = spy  # type: ignore[method-assign]
    try:
        s, c = fn(x.to("neuron"), wn)
        host_outs = results[-1][1]
        tensors = [o for o in host_outs if isinstance(o, torch.Tensor)]
        assert len(tensors) >= 2  # the two results and the activations saved for backward
        for o in (s, c):  # each result's first host read is the program's own output (no new view built)
            assert any(runtime.cached_host_view(o) is h for h in tensors)
        (s + c.sum()).backward()
        bw_inputs = results[-1][0]
        assert any(any(i is h for h in tensors) for i in bw_inputs)  # backward read saved activations as they were
    finally:
        executable.Program.__call__ = orig  # type: ignore[method-assign]
    ref_s, ref_c = _f(x, w)
    (ref_s + ref_c.sum()).backward()
    assert wn.grad is not None and w.grad is not None
    torch.testing.assert_close(wn.grad.cpu(), w.grad)
    torch.testing.assert_close(s.detach().cpu(), ref_s.detach())


def _g(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    h = torch.relu(x @ w)
    return h * 2, h.t(), h


def test_seeded_results_stay_right_after_in_place_metadata_changes_and_writes() -> None:
    x, w = torch.randn(6, 4), torch.randn(4, 3)
    fn = torch.compile(_g, backend="neuron")
    ra, rb, rh = _g(x, w)
    assert torch.equal(rb.t(), rh)
    a, b, h = fn(x.to("neuron"), w.to("neuron"))
    a.t_()
    b.unsqueeze_(0)
    assert torch.equal(a.cpu(), ra.t()) and torch.equal(b.cpu(), rb.unsqueeze(0))
    a, b, h = fn(x.to("neuron"), w.to("neuron"))
    a.resize_(3, 6)
    assert torch.equal(a.cpu().flatten(), ra.flatten())
    a, b, h = fn(x.to("neuron"), w.to("neuron"))
    h.mul_(3)  # a write through one result is seen by its views
    assert torch.equal(b.cpu(), rb * 3) and torch.equal(h.cpu(), rh * 3) and torch.equal(a.cpu(), ra)
    assert torch.equal((b + 0).cpu(), rb * 3)
