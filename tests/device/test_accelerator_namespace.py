"""Every public function of ``torch.accelerator`` and ``torch.accelerator.memory`` works on neuron, found by
introspection (a function a new torch adds is called too), in a process that never imports trn_notebook.

Probe (issue 56): 10 of them hit ``device_allocator INTERNAL ASSERT FAILED`` and ``empty_host_cache()`` killed
the process with a segmentation fault — in every program of the environment, since ``import torch`` alone
registers neuron through the ``torch.backends`` entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from trn_notebook.device import accelerator_routes

CALL_EVERY_FUNCTION = r"""
import faulthandler, inspect, json, sys
faulthandler.enable()
import torch  # the program never names trn_notebook: torch's backend entry point registers neuron
acc = torch.accelerator
x = torch.ones(1024, device="neuron")  # something on the device for the figures to show
ARGS = {{"set_device_index": (0,), "set_device_idx": (0,), "device_index": (0,)}}
seen = {{}}
for mod in (acc, acc.memory):
    for name in sorted(dir(mod)):
        f = getattr(mod, name)
        if name.startswith("_") or inspect.isclass(f) or not callable(f):
            continue
        if not getattr(f, "__module__", "").startswith("torch.accelerator"):
            continue  # imported helpers (functools.cache, typing_extensions.deprecated)
        args = (acc.current_stream(),) if name == "set_stream" else ARGS.get(name, ())
        print(mod.__name__, name, flush=True)  # the last line names a call that crashed
        result = f(*args)
        if name == "device_index":
            with result:
                pass
        seen[f"{{mod.__name__}}.{{name}}"] = repr(result)[:200]
figures = {{
    "memory_allocated": acc.memory_allocated(), "neuron_allocated": torch.neuron.memory_allocated(),
    "memory_reserved": acc.memory.memory_reserved(), "neuron_reserved": torch.neuron.memory_reserved(),
    "stats_allocated": acc.memory_stats()["allocated_bytes.all.current"],
    "free_total": list(acc.get_memory_info()),
    "capacity": torch.neuron.memory_stats()["capacity_bytes"],
}}
print("RESULT " + json.dumps({{"seen": seen, "figures": figures}}))
"""


def _run(**env: str) -> subprocess.CompletedProcess[str]:
    code = CALL_EVERY_FUNCTION.format()
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_every_public_accelerator_function_works_on_neuron_without_importing_trn_notebook():
    proc = _run()
    assert proc.returncode == 0, f"exit {proc.returncode} after {proc.stdout.splitlines()[-1:]}: {proc.stderr[-2000:]}"
    assert "INTERNAL ASSERT" not in proc.stderr
    result = json.loads(next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))[7:])
    seen = result["seen"]
    # the whole of both namespaces, not a list kept by hand: at least what torch 2.13 has
    for name in ("empty_host_cache", "memory_stats", "reset_accumulated_memory_stats", "get_memory_info",
                 "get_device_capability", "synchronize", "set_device_index"):  # fmt: skip
        assert any(key.endswith("." + name) for key in seen), name
    assert len(seen) >= 27
    f = result["figures"]
    assert f["memory_allocated"] == f["neuron_allocated"] == f["stats_allocated"] > 0
    assert f["memory_reserved"] == f["neuron_reserved"] >= f["memory_allocated"]
    free, total = f["free_total"]
    assert total == f["capacity"] and free == total - f["memory_reserved"]


def test_the_routes_answer_with_the_devices_figures_and_refuse_a_second_core(fresh_device):
    x = torch.ones(4096, device="neuron")
    assert torch.accelerator.memory.memory_allocated() == torch.neuron.memory_allocated() > 0
    torch.accelerator.memory.reset_accumulated_memory_stats()
    stats = torch.accelerator.memory_stats()
    assert stats["num_ooms"] == 0 and stats["allocation.all.current"] >= 1  # live blocks stay counted
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == torch.accelerator.memory_allocated()
    assert torch.float64 not in torch.accelerator.get_device_capability()["supported_dtypes"]
    assert {torch.float32, torch.bfloat16, torch.int64} <= torch.accelerator.get_device_capability()["supported_dtypes"]
    with pytest.raises((ValueError, RuntimeError), match="neuron:1"):
        torch.accelerator.memory.memory_allocated(1)
    torch.accelerator.memory.empty_host_cache()  # nothing pinned in the simulator: nothing to do, no crash
    del x


def test_inside_a_dry_run_the_namespaces_read_the_dry_allocator(fresh_device):
    import trn_notebook

    before = torch.accelerator.memory_allocated()
    with trn_notebook.dryrun():
        big = torch.empty(1 << 28, device="neuron")  # 1 GiB, shapes only
        inside = torch.accelerator.memory.memory_allocated()
        del big
    assert inside >= 1 << 30 and torch.accelerator.memory_allocated() == before


def test_the_bindings_are_replaced_once_and_can_be_put_back():
    names = accelerator_routes.install()
    assert set(names) <= set(accelerator_routes.ROUTES) and "_accelerator_emptyHostCache" in names
    assert all(getattr(getattr(torch._C, n), "_neuron_routed", False) for n in names)
    assert accelerator_routes.install() == names  # idempotent: never a route around a route
    original = accelerator_routes._originals["_accelerator_getDeviceStats"]
    assert not getattr(original, "_neuron_routed", False)


CPU_PROGRAM = r"""
import torch
torch.manual_seed(0)
a, b = torch.randn(64, 64), torch.randn(64, 64)
out = (a @ b).softmax(-1).sum(0)
acc = torch.accelerator.current_accelerator()
if acc is not None:  # whatever accelerator is current, its memory functions answer, never crash
    torch.accelerator.memory_stats(), torch.accelerator.empty_host_cache(), torch.accelerator.empty_cache()
print(out.double().sum().item(), out.std().item())
"""


@pytest.mark.slow
def test_a_program_that_never_names_neuron_gets_the_same_results_and_no_crash():
    runs = []
    for autoload in ("1", "0"):
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD=autoload)
        proc = subprocess.run([sys.executable, "-c", CPU_PROGRAM], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append(proc.stdout.strip())
    assert runs[0] == runs[1]  # installing trn-notebook changes nothing for it
