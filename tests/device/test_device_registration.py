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
