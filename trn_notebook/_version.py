"""The one place trn-notebook's version is written: pyproject reads it (hatch), and so do the package,
the device card and the migration report (``trn_notebook.__version__``)."""

__version__ = "0.1.0"

MIRRORS = "TorchNeuron of Neuron SDK 2.34 (torch-neuronx 2.13.3.1 / 2.14.3.1, 2026-11-30)"
"""The TorchNeuron release whose contracts the simulator follows (shared/reference/torchneuron.md, "What changed
in SDK 2.34"); the device card, the README and docs/compatibility.md say it from here."""
