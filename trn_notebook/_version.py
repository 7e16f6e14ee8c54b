"""The one place trn-notebook's version is written: pyproject reads it (hatch), and so do the package,
the device card and the migration report (``trn_notebook.__version__``)."""

__version__ = "0.1.0"
