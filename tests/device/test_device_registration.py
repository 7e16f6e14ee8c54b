"""Registration: idempotent, autoloaded by ``import torch``, stands down for a real torch_neuronx."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import torch

import trn_notebook


def _python(code: str, env: dict[str, str] | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=120,
    )


def test_register_is_idempotent():
    trn_notebook.device.register()
    trn_notebook.device.register()
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.ones(1, device="neuron").item() == 1.0


def test_import_torch_alone_makes_neuron_available():
    r = _python("import torch; print(torch.ones(2, device='neuron').sum().item())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "2.0"


def test_autoload_honours_the_opt_out():
    r = _python(
        "import torch; print(torch._C._get_privateuse1_backend_name())",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "privateuseone"


def test_autoload_stands_down_when_a_real_torch_neuronx_is_importable(tmp_path):
    (tmp_path / "torch_neuronx").mkdir()
    (tmp_path / "torch_neuronx" / "__init__.py").write_text("")
    r = _python(
        "import torch; print(torch._C._get_privateuse1_backend_name())",
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "privateuseone"
    assert "stands down" in r.stderr


def test_self_test_names_the_torch_version_when_an_api_is_missing(monkeypatch):
    import pytest

    from trn_notebook.device import registration

    monkeypatch.setattr(registration, "PRIVATE_APIS", (*registration.PRIVATE_APIS, "torch._C._no_such_api"))
    with pytest.raises(
        registration.DeviceRegistrationError, match=rf"torch {re.escape(torch.__version__)}.*_no_such_api"
    ):
        registration.self_test()


STAND_IN = '''
"""A stand-in for another PrivateUse1 package that names the device neuron (as torch_neuronx does)."""
import types
import torch

torch.utils.rename_privateuse1_backend("neuron")
device = types.ModuleType("stand_in_neuron_device")
device.is_available = lambda: True
device.device_count = lambda: 1
device.current_device = lambda: 0
torch._register_device_module("neuron", device)
'''


def test_the_first_backend_imported_keeps_neuron_and_the_simulator_never_half_registers(tmp_path):
    # Issue 56 item 5 (TorchNeuron 2.34's coexistence rule): another package imported first keeps `neuron`.
    (tmp_path / "stand_in_neuron.py").write_text(STAND_IN)
    env = {"PYTHONPATH": str(tmp_path), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    first = _python(
        """
        import stand_in_neuron, torch
        import trn_notebook
        print(torch.neuron.__name__)
        try:
            torch.ones(2, device="neuron")
        except NotImplementedError:
            print("no kernels of ours")  # nothing registered on top of the other backend
        print(trn_notebook.plan.__name__)  # the rest of the toolkit still imports and works
        """,
        env=env,
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["stand_in_neuron_device", "no", "kernels", "of", "ours", "plan"]
    assert "already registered by 'stand_in_neuron_device', imported first" in first.stderr
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in first.stderr and "stands down" in first.stderr
    # the simulator first (import torch loads it through the entry point): it keeps neuron, the other is refused
    second = _python(
        """
        import torch
        try:
            import stand_in_neuron
        except RuntimeError as exc:
            print("refused:", "already been registered" in str(exc))
        print(torch.neuron.__name__, torch.ones(2, device="neuron").sum().item())
        """,
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["refused:", "True", "trn_notebook.device.module", "2.0"]
