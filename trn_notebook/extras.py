"""Optional dependencies: which extra of trn-notebook brings a module, and a clear error when one is missing.

The extras themselves are defined once, in ``pyproject.toml``; this module reads them back from the installed
package's metadata (``Requires-Dist: transformers<6,>=5.0; extra == "models"``), so a CLI can say what to
install *before* it does any work instead of failing on every sample.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re

DISTRIBUTION = "trn-notebook"
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the extra of trn-notebook that brings it."""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_for(distribution: str) -> str | None:
    """The smallest extra of trn-notebook whose requirements list ``distribution`` (``None`` if none does).

    Read from the installed package's metadata; ``None`` too when trn-notebook's metadata is not installed
    (a source tree on ``sys.path``). Raises nothing.
    """
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    sizes: dict[str, int] = {}
    listing: set[str] = set()
    for line in requires:
        name, extra = _NAME.match(line), _EXTRA.search(line)
        if name is None or extra is None:
            continue
        sizes[extra.group(1)] = sizes.get(extra.group(1), 0) + 1
        if _normal(name.group(1)) == _normal(distribution):
            listing.add(extra.group(1))
    return min(listing, key=lambda e: (sizes[e], e)) if listing else None


def missing_message(module: str, feature: str, distribution: str | None = None) -> str | None:
    """``None`` if ``module`` is importable, else what ``feature`` lacks and the install command that fixes it.

    ``distribution``: the package that provides ``module`` (default: the module's own name). Raises nothing.
    """
    if importlib.util.find_spec(module) is not None:
        return None
    dist = distribution or module
    extra = extra_for(dist)
    if extra is None:
        return f"{feature} needs {dist}, which is not installed: pip install {dist}"
    return (
        f"{feature} needs {dist}, which is not installed: install trn-notebook's {extra!r} extra, "
        f'pip install "trn-notebook[{extra}]" (from a checkout: pip install -c constraints/lock.txt -e ".[{extra}]")'
    )


def require(module: str, feature: str, distribution: str | None = None) -> None:
    """Raise :class:`MissingExtra` (naming the extra to install) if ``module`` is not importable.

    Call it before any work: ``require("transformers", "the model zoo")``.
    """
    message = missing_message(module, feature, distribution)
    if message is not None:
        raise MissingExtra(message, name=module)
