"""Operator compatibility of the ``neuron`` device, verified against PyTorch's OpInfo database."""

from __future__ import annotations

from .api import compatibility_table
from .table import Summary, results_frame, summarize, to_markdown

__all__ = ["Summary", "compatibility_table", "results_frame", "summarize", "to_markdown"]
