"""Where the committed prebuilt extension lives, and its package.json as built."""

from __future__ import annotations

import json
from typing import Any

from tests.browser_utils import REPO_ROOT

BUILD_DIR = REPO_ROOT / "trn_notebook" / "labextension"
INSTALL_JSON = REPO_ROOT / "labextension" / "install.json"


def committed_build() -> dict[str, Any]:
    """The committed build's package.json (names the federated entry point JupyterLab loads)."""
    return json.loads((BUILD_DIR / "package.json").read_text())
