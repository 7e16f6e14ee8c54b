"""One reader of environment variables: every variable in one table, a type each, a malformed value warns
naming the variable and keeps the default, and nothing else in the package reads ``os.environ``."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import trn_notebook
from trn_notebook import envvars
from trn_notebook.compiler.config import CompilerConfig
from trn_notebook.device.config import DeviceConfig
from trn_notebook.envvars import VARIABLES, ConfigWarning

PACKAGE = Path(trn_notebook.__file__).parent
ROOT = PACKAGE.parent


def _reads_environ(tree: ast.AST) -> list[int]:
    """Lines that read a variable: ``os.environ.get(..)``, ``os.environ[..]`` loads, ``os.getenv(..)``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = ast.unparse(node.func)
            if target in ("os.environ.get", "os.getenv", "environ.get"):
                found.append(node.lineno)
        loads = isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
        if loads and ast.unparse(node.value) in ("os.environ", "environ"):  # type: ignore[attr-defined]
            found.append(node.lineno)
    return found


def test_only_envvars_reads_the_environment():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "envvars.py" and path.parent == PACKAGE:
            continue
        lines = _reads_environ(ast.parse(path.read_text(), str(path)))
        offenders += [f"{path.relative_to(ROOT)}:{n}" for n in lines]
    assert offenders == [], f"read these through trn_notebook.envvars (add the variable to its table): {offenders}"


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_every_variable_is_read_where_the_table_says(name):
    reader = PACKAGE / VARIABLES[name].reader
    assert reader.is_file(), reader
    source = reader.read_text()
    assert name in source or (name == "TRN_NOTEBOOK_NUMERICS" and "ENV_VAR" in source)


def test_the_docs_list_every_variable_from_the_table():
    assert (ROOT / "docs" / "environment.md").read_text() == envvars.markdown_table()


FLAGS = sorted(name for name, v in VARIABLES.items() if v.kind == "flag")


@pytest.mark.parametrize("name", FLAGS)
def test_a_malformed_boolean_warns_naming_it_and_keeps_the_default(name):
    default = VARIABLES[name].default == "1"
    with pytest.warns(ConfigWarning, match=rf"{name}='maybe' is not valid; accepted: 1/0, true/false"):
        assert envvars.flag(name, {name: "maybe"}) is default
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for word, expected in (("1", True), ("TRUE", True), ("on", True), ("0", False), ("No", False)):
            assert envvars.flag(name, {name: word}) is expected
        assert envvars.flag(name, {}) is default


@pytest.mark.parametrize("value", ["100", "1", "4096", "1M", "1MiB"])
def test_an_hbm_smaller_than_one_segment_is_refused_naming_the_variable(value):
    # Probe (medium): 100 B imported silently, then the first tensor raised an OOM that contradicted itself.
    with pytest.warns(ConfigWarning, match=rf"TRN_NOTEBOOK_HBM_BYTES='{value}' is not valid; accepted: at least"):
        assert DeviceConfig.from_env({"TRN_NOTEBOOK_HBM_BYTES": value}).hbm_bytes is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DeviceConfig.from_env({"TRN_NOTEBOOK_HBM_BYTES": "2M"}).hbm_bytes == 2 << 20
        assert DeviceConfig.from_env({"TRN_NOTEBOOK_HBM_BYTES": "4G"}).hbm_bytes == 4 << 30


def test_a_cache_dir_with_an_unknown_user_warns_and_uses_the_default():
    # Probe (medium): `~nosuchuser/x` made every compile fail with "Could not determine home directory".
    with pytest.warns(ConfigWarning, match=r"TORCH_NEURONX_NEFF_CACHE_DIR='~nosuchuser_trn/x' is not valid"):
        config = CompilerConfig.from_env({"TORCH_NEURONX_NEFF_CACHE_DIR": "~nosuchuser_trn/x"})
    assert config.cache_dir is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        home = CompilerConfig.from_env({"TORCH_NEURONX_NEFF_CACHE_DIR": "~/x"}).cache_dir
    assert home == str(Path.home() / "x")


def test_a_malformed_value_warns_once_per_process():
    code = (
        "import warnings, trn_notebook\n"
        "from trn_notebook.nki.standdown import real_nki\n"
        "real_nki(); real_nki()\n"
        "from trn_notebook.device.config import DeviceConfig\n"
        "DeviceConfig.from_env(); DeviceConfig.from_env()\n"
    )
    env = dict(os.environ, TRN_NOTEBOOK_FORCE_NKI_SIM="perhaps", TRN_NOTEBOOK_STRICT="sometimes")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("TRN_NOTEBOOK_FORCE_NKI_SIM='perhaps' is not valid") == 1, proc.stderr
    assert proc.stderr.count("TRN_NOTEBOOK_STRICT='sometimes' is not valid") == 1, proc.stderr


def test_a_name_outside_the_table_is_a_programming_error():
    with pytest.raises(KeyError, match="not in trn_notebook.envvars.VARIABLES"):
        envvars.flag("TRN_NOTEBOOK_NO_SUCH_SWITCH")


def test_a_malformed_choice_is_refused_when_the_switch_is_strict():
    with pytest.raises(ValueError, match="TRN_NOTEBOOK_RANKS_NETNS='maybe' is not one of auto, on, off"):
        envvars.choice("TRN_NOTEBOOK_RANKS_NETNS", {"TRN_NOTEBOOK_RANKS_NETNS": "maybe"})


@pytest.mark.slow
def test_a_user_with_a_bad_cache_dir_still_compiles(tmp_path):
    code = (
        "import torch, trn_notebook\n"
        "f = torch.compile(lambda x: x * 2, backend='neuron')\n"
        "print(f(torch.ones(3, device='neuron')).cpu().tolist())\n"
    )
    env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR="~nosuchuser_trn/x", XDG_CACHE_HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[2.0, 2.0, 2.0]"
    assert "TORCH_NEURONX_NEFF_CACHE_DIR='~nosuchuser_trn/x' is not valid" in proc.stderr


@pytest.mark.slow
def test_a_malformed_autoload_switch_is_named_with_what_pytorch_made_of_it():
    # PyTorch reads anything but "1" as off: `import torch` alone then does not register neuron.
    code = "import torch\nprint(hasattr(torch, 'neuron'))\nimport trn_notebook\nprint(torch.ones(1, device='neuron').item())\n"
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="maybe")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False", "1.0"]
    assert (
        "TORCH_DEVICE_BACKEND_AUTOLOAD='maybe' is not valid; accepted: 1 (on) or 0 (off). PyTorch read it as 0"
        in proc.stderr
    )
