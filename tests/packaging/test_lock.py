"""The full lock (issue 49): what the README's commands and both CI jobs install, and that it is what ran.

``constraints/lock.txt`` pins every package the README's commands install, for Python 3.11 and 3.12 on Linux
x86-64 (one universal ``uv pip compile``; ``bash constraints/relock`` regenerates it). These tests fail when
``pyproject.toml`` and the lock disagree, when a command installs around the lock, and when this very suite
runs on versions other than the lock's (the check a newcomer's fresh clone and CI's fresh venv share).
"""

from __future__ import annotations

import os
import re
import site
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "constraints" / "lock.txt"
README = ROOT / "README.md"

# the environments the lock promises (Linux x86-64, the two CI Pythons)
TARGETS = {
    f"py{minor}": {
        **default_environment(),
        "python_version": f"3.{minor}",
        "python_full_version": f"3.{minor}.{patch}",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
    }
    for minor, patch in ((11, 7), (12, 1))
}
# installed by the venv or the install itself, not by a requirement (pip leaves them out of the lock)
NOT_LOCKED = {"pip", "setuptools", "wheel", "trn-notebook"}


def _lock_pins(env: dict[str, str]) -> dict[str, Version]:
    """``{name: version}`` of every pin in the lock whose marker holds in ``env``."""
    pins: dict[str, Version] = {}
    for line in LOCK.read_text().splitlines():
        if not line.strip() or line.startswith(("#", " ")):
            continue
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        (spec,) = req.specifier
        assert spec.operator == "==", f"the lock pins with ==, not {line!r}"
        name = canonicalize_name(req.name)
        assert name not in pins, f"{name} pinned twice for one environment"
        pins[name] = Version(spec.version)
    return pins


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _readme_commands() -> list[str]:
    """The README's first two fenced blocks, each one command (the promise: two commands, copy-paste)."""
    blocks = re.findall(r"^```bash\n(.*?)^```$", README.read_text(encoding="utf-8"), re.M | re.S)
    return [b.strip() for b in blocks[:2]]


def test_the_lock_says_how_it_is_regenerated():
    head = LOCK.read_text().splitlines()[:2]
    assert head[1].strip() == "#    bash constraints/relock", head
    assert (ROOT / "constraints" / "relock").read_text().count('"$UV" pip compile pyproject.toml --all-extras') == 1


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_every_requirement_of_every_extra_is_pinned_inside_its_range(target):
    env = TARGETS[target]
    pins = _lock_pins(env)
    project = _project()
    requirements = [Requirement(r) for r in project["dependencies"]]
    for extra, reqs in project["optional-dependencies"].items():
        requirements += [Requirement(r) for r in reqs]
        assert reqs, extra
    wrong = []
    for req in requirements:
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None or not req.specifier.contains(pinned, prereleases=True):
            wrong.append(f"{req} (lock: {pinned})")
    assert not wrong, (
        f"pyproject.toml and constraints/lock.txt disagree on {target}; run `bash constraints/relock`: {wrong}"
    )


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_lock_pins_the_tested_cpu_torch(target):
    from trn_notebook.device import registration

    assert _lock_pins(TARGETS[target])["torch"] == Version(f"{registration.TESTED_TORCH}+cpu")


def test_the_readme_commands_and_both_ci_jobs_install_through_the_lock():
    first, second = _readme_commands()
    for command in (first, second):
        assert command.startswith("pip install -c constraints/lock.txt -e "), command
        assert "\n" not in command
    assert first.endswith("&& python -m trn_notebook.quickstart")
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.rstrip().splitlines()[-1] == second  # the README's second command, verbatim, last
    assert "-m venv --clear" in ci  # from nothing, each run
    py312 = (ROOT / ".ci" / "run-py312").read_text()
    assert "-m venv --clear" in py312 and "constraints/lock.txt" in py312
    # nothing in either job installs around the lock
    for job in (ci, py312):
        for line in job.splitlines():
            if re.search(r"\bpip install\b", line) and "--upgrade pip" not in line:
                assert "-c " in line, f"installs without the lock: {line.strip()}"


def _torch_runtime(installed: dict[str, metadata.Distribution], pins: dict[str, Version]) -> set[str]:
    """The packages torch brings itself that the lock does not name: torch's requirements outside the lock (the
    CUDA build's ``cuda-toolkit[...]==13.0.3``, ``cuda-bindings``, ``nvidia-nccl-cu13``…) and whatever those require
    in turn (``cuda-toolkit`` → ``nvidia-cublas``, ``cuda-bindings`` → ``cuda-pathfinder``), markers and extras
    evaluated here. Empty for the CPU build, whose requirements are all in the lock."""
    env = dict(default_environment())
    found: set[str] = set()
    todo: list[tuple[str, frozenset[str]]] = [("torch", frozenset())]
    while todo:
        name, extras = todo.pop()
        for r in map(Requirement, installed[name].requires or []):
            dep = canonicalize_name(r.name)
            if dep in pins or dep in found or dep not in installed:
                continue
            if r.marker is not None and not any(r.marker.evaluate({**env, "extra": e}) for e in extras or {""}):
                continue
            found.add(dep)
            todo.append((dep, frozenset(r.extras)))
    return found


def test_this_environment_runs_the_locked_versions():
    """The suite runs on the lock's versions: a venv filled any other way says so, with the command that fixes it.

    Extra packages a developer added (a profiler, say) are allowed on a workstation; in CI (``CI=true``), whose
    venv is emptied each run, every installed distribution must come from the lock — or be part of the CUDA
    runtime torch brings itself in the 3.12 job (:func:`_torch_runtime`).
    """
    pins = _lock_pins(dict(default_environment()))
    # site-packages only: an imported setuptools puts its vendored packaging and platformdirs on sys.path
    installed = {canonicalize_name(d.metadata["Name"]): d for d in metadata.distributions(path=site.getsitepackages())}
    torch_pins = _torch_runtime(installed, pins)
    drift, unlocked = [], []
    for name, dist in sorted(installed.items()):
        if name in NOT_LOCKED:
            continue
        if name in pins:
            if Version(dist.version) != pins[name] and not (
                name == "torch" and Version(dist.version).public == pins[name].public
            ):
                drift.append(f"{name} {dist.version} (lock: {pins[name]})")
        elif name not in torch_pins:
            unlocked.append(f"{name} {dist.version}")
    fix = 'install through the lock: pip install -c constraints/lock.txt -e ".[dev]"'
    assert not drift, f"this venv is not the lock's ({fix}): {drift}"
    if os.environ.get("CI") == "true":
        assert not unlocked, f"CI's venv holds packages the lock does not name: {unlocked}"
