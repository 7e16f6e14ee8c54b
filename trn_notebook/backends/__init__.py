"""Where the numbers come from: the simulator or a real Trainium through TorchNeuron.

:func:`current` returns the live :class:`Backend` (the simulator unless ``torch_neuronx`` is importable);
``api.py`` and the report read placement, memory, compile records and device facts through it. Submodules
load lazily so that the dynamo entry point (:mod:`.dynamo`) stays cheap to import.
"""
