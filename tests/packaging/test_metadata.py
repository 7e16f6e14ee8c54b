"""Packaging metadata: a torch range that admits TorchNeuron's PyTorch, a CI pin, a self-test that names APIs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from trn_notebook.device import registration

ROOT = Path(__file__).resolve().parents[2]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _torch_requirement() -> Requirement:
    (req,) = [Requirement(d) for d in _project()["dependencies"] if Requirement(d).name == "torch"]
    return req


def test_torch_range_admits_torchneuron_pytorch_and_the_tested_version():
    spec = _torch_requirement().specifier
    assert spec.contains("2.13.0") and spec.contains("2.14.1")  # 2.14: the PyTorch TorchNeuron (SDK 2.33) needs
    assert not spec.contains("2.15.0") and not spec.contains("2.12.1")
    assert spec == SpecifierSet(registration.SUPPORTED_TORCH)  # the self-test's message tells the same range


def test_ci_constraints_pin_the_tested_cpu_torch_inside_the_range():
    pins = [
        Requirement(line)
        for line in (ROOT / "constraints" / "ci.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    torch_pins = [p for p in pins if p.name == "torch"]
    linux = {"sys_platform": "linux", "platform_system": "Linux"}
    other = {"sys_platform": "darwin", "platform_system": "Darwin"}
    # Linux: the CPU build by its local version, which PyPI (CUDA builds only) cannot satisfy
    (on_linux,) = [p for p in torch_pins if p.marker is None or p.marker.evaluate(linux)]
    assert str(on_linux.specifier) == f"=={registration.TESTED_TORCH}+cpu"
    # macOS / Windows: PyPI's wheels are CPU builds without a local version
    (elsewhere,) = [p for p in torch_pins if p.marker is None or p.marker.evaluate(other)]
    assert str(elsewhere.specifier) == f"=={registration.TESTED_TORCH}"
    assert _torch_requirement().specifier.contains(registration.TESTED_TORCH)
    assert torch.__version__.split("+")[0] == registration.TESTED_TORCH  # this suite runs on the pinned torch


def test_requires_python_and_classifiers_agree():
    project = _project()
    requires = SpecifierSet(project["requires-python"])
    versions = [c.rsplit(" :: ", 1)[1] for c in project["classifiers"] if re.match(r".*Python :: 3\.\d+$", c)]
    assert versions and all(requires.contains(f"{v}.0") for v in versions)
    assert requires.contains("3.12.0")  # TorchNeuron needs Python 3.12+: pip must not refuse it


def test_self_test_names_each_missing_api_and_the_supported_range():
    with pytest.raises(registration.DeviceRegistrationError) as info:
        registration.self_test(("torch._C._no_such_api", "torch.no_such_module.fn", "torch._tensor_str._str"))
    message = str(info.value)
    assert "torch._C._no_such_api" in message and "torch.no_such_module.fn" in message
    assert "torch._tensor_str._str" not in message  # present APIs are not blamed
    assert torch.__version__ in message and registration.SUPPORTED_TORCH in message


def test_every_listed_private_api_resolves_on_the_tested_torch():
    import torch._dynamo  # noqa: F401 - the dynamo APIs are checked once dynamo is loaded

    registration.self_test()
    registration.self_test(registration.DYNAMO_APIS)


def test_the_version_is_written_once_and_read_everywhere():
    """pyproject takes the version from ``trn_notebook/_version.py`` (hatch), which the package re-exports;
    the installed distribution's metadata agrees (issue 29: one version)."""
    import importlib.metadata

    import trn_notebook
    from trn_notebook import _version

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    assert config["tool"]["hatch"]["version"]["path"] == "trn_notebook/_version.py"
    assert trn_notebook.__version__ == _version.__version__
    assert importlib.metadata.version("trn-notebook") == _version.__version__
    written = [p for p in (ROOT / "trn_notebook").rglob("*.py") if f'"{_version.__version__}"' in p.read_text()]
    assert written == [ROOT / "trn_notebook" / "_version.py"], written
