"""The migration evidence report: the seed article's "what a credible comparison should publish"."""

from .evidence import Evidence, collect_evidence
from .render import MigrationReport, report

__all__ = ["Evidence", "MigrationReport", "collect_evidence", "report"]
