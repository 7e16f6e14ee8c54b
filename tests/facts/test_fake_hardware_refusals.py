"""What the workshop notebooks meet under the stand-in torch_neuronx (found by
``benchmarks/bench_fake_hardware_workshop.py``): a modeled figure is None on hardware, never a made-up 0, and
a simulator-only feature refuses at once instead of starting simulated ranks.
"""

from __future__ import annotations

from .fakehw import run

PROBE = r"""
import torch, trn_notebook
from trn_notebook.facts import SimulatorOnlyError, current
from trn_notebook.session.timing import timeit

assert not current().is_simulator
x = torch.randn(32, 32)
r = timeit(lambda: x @ x, number=2, repeat=2)
print("TIMEIT", r.host_s, r.modeled_device_s, r.best_s > 0)

def make_model():
    from torch import nn
    return nn.Linear(4, 4)

def make_batch(n, seed):
    return torch.randn(n, 4), torch.randn(n, 4)

try:
    trn_notebook.compare_ranks(make_model, make_batch, global_batch=4, world_size=2, steps=1)
except SimulatorOnlyError as exc:
    print("RANKS", exc)
"""


def test_timeit_has_no_modeled_figures_and_compare_ranks_refuses_on_torchneuron(tmp_path):
    out = run(PROBE, tmp_path, fake=True, timeout=120)
    assert "TIMEIT None None True" in out  # modeled host/device time: not a 0.0 that reads as "free"
    ranks = out.split("RANKS", 1)[1]
    assert "trn_notebook.compare_ranks (simulated ranks with modeled collectives) is simulator-only" in ranks
    assert "torchrun --nproc-per-node N" in ranks
