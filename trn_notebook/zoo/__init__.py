"""The model zoo: tiny random-weight Hugging Face models on ``neuron``, eager and compiled, vs CPU.

``python -m trn_notebook.zoo [--quick] [--models GLOBS] [--out docs/models.md]`` runs it;
:func:`run_zoo` is the library entry. Needs the ``models`` extra (``transformers``).
"""

from __future__ import annotations

from .api import run_zoo
from .specs import QUICK, SPECS, ModelSpec, select
from .stages import STAGES, ModelResult, run_model

__all__ = ["QUICK", "SPECS", "STAGES", "ModelResult", "ModelSpec", "run_model", "run_zoo", "select"]
