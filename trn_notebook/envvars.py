"""Every environment variable the package reads: one table, one typed reader per kind.

A leaf module (imports nothing of the package), so every layer reads its switches here. Each variable
has a kind — a boolean flag, a size in bytes, a path, a chip name, a choice, a spec text — and a
documented default. A malformed value never raises where it is read at import (it would break every
``import torch`` of the environment through the device's autoload entry point): it warns once with a
:class:`ConfigWarning` naming the variable, the value and what is accepted, and the default applies.
The one exception is a security switch (``strict=True``), refused with ``ValueError`` where it is used.

``docs/environment.md`` is generated from :data:`VARIABLES` (:func:`markdown_table`); a test keeps the
two equal, and a test forbids reading ``os.environ`` anywhere else in the package.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["flag", "bytes", "path", "chip", "choice", "text"]

KiB, MiB = 1 << 10, 1 << 20
SMALLEST_HBM = 2 * MiB
"""The smallest useful simulated HBM: one small-pool segment of the caching allocator (its
``SMALL_SEGMENT``); a capacity below it cannot hold even a one-element tensor."""


@dataclass(frozen=True)
class Variable:
    """One environment variable: its kind, documented default, meaning and the module that reads it."""

    name: str
    kind: Kind
    default: str
    meaning: str
    reader: str
    choices: tuple[str, ...] = ()
    strict: bool = False  # a malformed value is refused (ValueError) instead of warned about


_V = Variable
VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        _V("TRN_NOTEBOOK_CHIP", "chip", "trn2", "simulated chip model", "device/config.py"),
        _V(
            "TRN_NOTEBOOK_HBM_BYTES",
            "bytes",
            "the chip's own HBM",
            "simulated device memory per logical device (at least 2 MiB)",
            "device/config.py",
        ),
        _V("NEURON_LAUNCH_BLOCKING", "flag", "0", "every op is a sync point (TorchNeuron's)", "device/config.py"),
        _V(
            "TORCH_NEURONX_ENABLE_CONCATENATION",
            "flag",
            "0",
            "adaptive eager fusion of queued native ops (TorchNeuron's)",
            "device/config.py",
        ),
        _V(
            "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS",
            "flag",
            "0",
            "an op with a native kernel that cannot run here raises instead of falling back (TorchNeuron's)",
            "device/config.py",
        ),
        _V("TRN_NOTEBOOK_STRICT", "flag", "0", "any CPU fallback raises", "device/config.py"),
        _V(
            "TRN_NOTEBOOK_ALLOW_FLOAT64",
            "flag",
            "0",
            "run float64 on the device instead of raising",
            "device/config.py",
        ),
        _V(
            "TRN_NOTEBOOK_NUMERICS",
            "text",
            "exact",
            "numerics policy: exact or trainium[,KEY=VALUE...]",
            "device/numerics/policy.py",
        ),
        _V(
            "TORCH_NEURONX_NEFF_CACHE_DIR",
            "path",
            "<user cache dir>/trn-notebook/neff_cache",
            "compile cache directory (TorchNeuron's; created 0700)",
            "compiler/config.py",
        ),
        _V("TORCH_NEURONX_DISABLE_NEFF_CACHE", "flag", "0", "no compile cache (TorchNeuron's)", "compiler/config.py"),
        _V(
            "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION",
            "flag",
            "1",
            "a failed compile raises instead of running the graph eagerly (TorchNeuron's)",
            "compiler/config.py",
        ),
        _V(
            "TRN_NOTEBOOK_CACHE_KEY_FILE",
            "path",
            "<user config dir>/trn-notebook/cache-hmac.key",
            "key that signs compile cache entries",
            "compiler/config.py",
        ),
        _V(
            "TORCH_NEURONX_DEBUG_DIR",
            "path",
            "unset",
            "where compilation artifacts are written (TorchNeuron's)",
            "compiler/config.py",
        ),
        _V(
            "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS",
            "flag",
            "0",
            "write compilation artifacts to TORCH_NEURONX_DEBUG_DIR (TorchNeuron's)",
            "compiler/config.py",
        ),
        _V(
            "TRN_NOTEBOOK_FORCE_NKI_SIM",
            "flag",
            "0",
            "use the NKI simulator even when real NKI is installed",
            "nki/standdown.py",
        ),
        _V(
            "TORCH_DEVICE_BACKEND_AUTOLOAD",
            "flag",
            "1",
            "PyTorch's: load device backends on `import torch`; PyTorch reads anything but 1 as off",
            "device/autoload.py",
        ),
        _V("TRN_NOTEBOOK_LOCK_CHECK", "flag", "0", "locks check the documented order as they are taken", "locks.py"),
        _V(
            "OMP_NUM_THREADS",
            "text",
            "1",
            "threads of each simulated rank's process (passed on to the ranks)",
            "distributed/pool.py",
        ),
        _V(
            "TRN_NOTEBOOK_RANKS_NETNS",
            "choice",
            "auto",
            "simulated ranks in a private network namespace: auto, on (required), off; malformed is refused",
            "distributed/netns.py",
            choices=("auto", "on", "off"),
            strict=True,
        ),
    )
}

_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})
FLAG_FORMS = "1/0, true/false, yes/no, on/off"
BYTES_FORMS = "a positive number of bytes, optionally with a binary unit: 25769803776, 24G, 512MiB, 1T"
_UNITS = {"": 1, "k": KiB, "m": MiB, "g": 1 << 30, "t": 1 << 40}
_BYTES_RE = re.compile(r"(\d{1,20})\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
log = logging.getLogger("trn_notebook")
_warned: set[tuple[str, str]] = set()  # (variable, value) already warned about; registered by state.py


class ConfigWarning(UserWarning):
    """An environment variable has a value the package does not accept; the documented default is used."""


def torch_is_importing() -> bool:
    """True while ``import torch`` is loading its device backends (our entry point imported this package).

    Then nothing of ours may raise: the ``import torch`` of a program that never uses ``neuron`` would fail.
    """
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_import_device_backends" and code.co_filename.endswith(
            os.path.join("torch", "__init__.py")
        ):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _variable(name: str) -> Variable:
    try:
        return VARIABLES[name]
    except KeyError:
        raise KeyError(f"{name} is not in trn_notebook.envvars.VARIABLES; add it to the table first") from None


def warn_bad(
    name: str, value: str, forms: str, *, once: bool = True, consequence: str = "Using the default instead."
) -> None:
    """Warn (:class:`ConfigWarning`) that ``name=value`` is not valid, naming ``forms``; the default applies.

    Shown once per process for the same variable and value when ``once`` (a reader given an explicit
    mapping instead of ``os.environ`` passes False). Under ``-W error`` it raises the warning,
    except during ``import torch`` (then it is logged: ``import torch`` must not fail because of us).
    """
    if once and (name, value) in _warned:
        return
    _warned.add((name, value))
    message = f"{name}={value!r} is not valid; accepted: {forms}. {consequence}"
    try:
        warnings.warn(message, ConfigWarning, stacklevel=4)
    except Warning:
        if not torch_is_importing():
            raise
        log.warning("%s", message)


def _raw(name: str, env: Mapping[str, str] | None) -> str | None:
    _variable(name)
    value = (os.environ if env is None else env).get(name)
    return None if value is None or value.strip() == "" else value


def parse_bytes(text: str) -> int:
    """``'24G'``/``'512MiB'``/``'1024'`` as bytes; raises ``ValueError`` naming the accepted forms."""
    m = _BYTES_RE.fullmatch(text.strip())
    value = int(m.group(1)) * _UNITS[m.group(2).lower()] if m else 0
    if value <= 0:
        raise ValueError(f"{text!r} is not a size; use {BYTES_FORMS}")
    return value


def flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """A boolean variable: 1/true/yes/on or 0/false/no/off (any case); unset means its documented default;
    anything else (``maybe``) warns and uses the default. Raises ``KeyError`` for a name not in the table."""
    default = _variable(name).default == "1"
    value = _raw(name, env)
    if value is None:
        return default
    word = value.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    warn_bad(name, value, FLAG_FORMS, once=env is None)
    return default


def size(name: str, env: Mapping[str, str] | None = None, *, minimum: int = 1) -> int | None:
    """A size in bytes (units allowed), None when unset. A malformed value, or one below ``minimum``, warns
    and gives None (the default). Raises ``KeyError`` for a name not in the table."""
    value = _raw(name, env)
    if value is None:
        return None
    try:
        nbytes = parse_bytes(value)
    except ValueError:
        warn_bad(name, value, BYTES_FORMS, once=env is None)
        return None
    if nbytes < minimum:
        warn_bad(name, value, f"at least {minimum} bytes ({minimum // MiB} MiB); {BYTES_FORMS}", once=env is None)
        return None
    return nbytes


def path(name: str, env: Mapping[str, str] | None = None) -> Path | None:
    """A path with ``~`` expanded, None when unset. A ``~user`` that does not resolve (``~nosuchuser/x``)
    warns naming the variable and gives None (the default). Raises ``KeyError`` for a name not in the table."""
    value = _raw(name, env)
    if value is None:
        return None
    expanded = os.path.expanduser(value.strip())
    if expanded.startswith("~"):
        warn_bad(
            name,
            value,
            "a path whose ~ or ~user names an existing home directory, or an absolute path",
            once=env is None,
        )
        return None
    return Path(expanded)


def choice(name: str, env: Mapping[str, str] | None = None, *, choices: tuple[str, ...] | None = None) -> str:
    """One of the variable's choices (case-insensitive), its default when unset. A malformed value warns and
    gives the default, or raises ``ValueError`` naming the variable and choices when the variable is strict."""
    var = _variable(name)
    allowed = choices if choices is not None else var.choices
    value = _raw(name, env)
    if value is None:
        return var.default
    word = value.strip().lower()
    if word in allowed:
        return word
    forms = ", ".join(allowed)
    if var.strict:
        raise ValueError(f"{name}={value!r} is not one of {forms} (unset means {var.default}); set it to one of those")
    warn_bad(name, value, forms, once=env is None)
    return var.default


def text(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The raw text of a variable parsed by its reader (None when unset or blank). Raises ``KeyError`` for a
    name not in the table."""
    value = _raw(name, env)
    return None if value is None else value.strip()


def markdown_table() -> str:
    """``docs/environment.md``: every variable the package reads, from :data:`VARIABLES`."""
    lines = [
        "# Environment variables",
        "",
        "Generated from `trn_notebook/envvars.py`: `python -c 'import trn_notebook.envvars as e; print(e.markdown_table(), end=\"\")' > docs/environment.md`.",
        "A malformed value warns once (`ConfigWarning`, naming the variable, the value and what is accepted)",
        f"and the default applies; booleans accept {FLAG_FORMS}; sizes accept {BYTES_FORMS}.",
        "",
        "| variable | kind | default | meaning | read by |",
        "|---|---|---|---|---|",
    ]
    for v in VARIABLES.values():
        kind = f"one of {', '.join(v.choices)}" if v.choices else v.kind
        lines.append(f"| `{v.name}` | {kind} | {v.default} | {v.meaning} | `trn_notebook/{v.reader}` |")
    return "\n".join(lines) + "\n"
