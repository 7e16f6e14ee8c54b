"""Three-way numerics: CPU FP32 vs CPU BF16 vs neuron per module, judged by AWS's ratio (issue 27)."""

from .api import compare_numerics, last_comparison, resolve_policy
from .result import EXACT_NOTE, NumericsComparison

__all__ = ["EXACT_NOTE", "NumericsComparison", "compare_numerics", "last_comparison", "resolve_policy"]
