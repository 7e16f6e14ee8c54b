"""``import torch`` never fails because of us — not for an in-range but unusable setting, not when warnings are
errors; the error comes when the device is used, naming the variable. Booleans say when a value is not one."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from trn_notebook.device.config import ConfigWarning, DeviceConfig


def _run(code: str, flags: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=os.getcwd(), **env)
    return subprocess.run([sys.executable, *flags, "-c", code], env=full, capture_output=True, text=True, timeout=300)


USE = """
import torch
try:
    torch.ones(2, device="neuron")
    print("USED")
except torch.OutOfMemoryError as exc:
    print("OOM", exc)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "flags", "expect"),
    [
        ({"TRN_NOTEBOOK_HBM_BYTES": "1"}, ["-W", "error"], "USED"),  # below one segment: refused at import
        ({"TRN_NOTEBOOK_CHIP": "trn9"}, ["-W", "error::UserWarning"], "USED"),  # the ConfigWarning became an error
        ({"TRN_NOTEBOOK_STRICT": "maybe"}, ["-W", "error"], "USED"),
    ],
    ids=["hbm-1-byte", "chip-trn9-warnings-as-errors", "flag-maybe-warnings-as-errors"],
)
def test_import_torch_never_fails_because_of_a_setting(env, flags, expect):
    proc = _run(USE, flags, **env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Failed to load the backend extension" not in proc.stderr
    assert proc.stdout.startswith(expect), proc.stdout + proc.stderr[-1000:]
    name, value = next(iter(env.items()))
    shown = proc.stdout if expect == "OOM" else proc.stderr
    assert f"{name}={value!r}" in shown  # the variable is named where the problem shows


def test_a_boolean_that_is_not_one_warns_and_keeps_the_default():
    # Probe (Low): boolean variables set to `maybe` were taken as on.
    with pytest.warns(ConfigWarning, match=r"TRN_NOTEBOOK_STRICT='maybe' is not valid; accepted: 1/0, true/false"):
        assert DeviceConfig.from_env({"TRN_NOTEBOOK_STRICT": "maybe"}).strict is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for word, expected in (("1", True), ("On", True), ("yes", True), ("0", False), ("off", False)):
            assert DeviceConfig.from_env({"TRN_NOTEBOOK_STRICT": word}).strict is expected


@pytest.mark.parametrize(
    ("name", "field", "default"),
    [
        ("TORCH_NEURONX_DISABLE_NEFF_CACHE", "disable_cache", False),
        ("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "preserve_artifacts", False),
        ("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "disable_fallback_execution", True),
    ],
)
def test_the_compilers_booleans_read_maybe_as_the_devices_do(name, field, default):
    # The device's flags were fixed; the compiler's still took `maybe` (anything but 0/false/no/off) as on.
    from trn_notebook.compiler.config import CompilerConfig

    with pytest.warns(ConfigWarning, match=rf"{name}='maybe' is not valid; accepted: 1/0"):
        assert getattr(CompilerConfig.from_env({name: "maybe"}), field) is default
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for word, expected in (("1", True), ("ON", True), ("0", False), ("no", False)):
            assert getattr(CompilerConfig.from_env({name: word}), field) is expected
