"""nki.check: per-tile errors against the reference, and modeled kernel vs reference-op time."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import trn_notebook.nki as nki
import trn_notebook.nki.language as nl
from trn_notebook.nki.kernels import rmsnorm_kernel


def _rms(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)


def test_check_passes_and_models_both_sides(fresh_device):
    x, w = torch.randn(256, 1024), torch.randn(1024)
    res = nki.check(rmsnorm_kernel, _rms, x, w, rtol=1e-5, atol=1e-5)
    assert res.passed and bool(res)
    assert len(res.outputs[0].max_err) == 2 and len(res.outputs[0].max_err[0]) == 2  # 2 x 2 tiles of 128 x 512
    assert res.kernel_s > 0 and res.reference_s > res.kernel_s  # one fused launch vs several eager ops
    assert "PASS" in res.text() and "<table" in res._repr_html_()


def test_check_localises_a_wrong_tile(fresh_device):
    @nki.jit
    def off_by_one_tile(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in range(x.shape[0] // 128):
            t = nl.load(x[i * 128 : (i + 1) * 128, :])
            nl.store(out[i * 128 : (i + 1) * 128, :], nl.add(t, 1.0 if i == 1 else 0.0))
        return out

    res = nki.check(off_by_one_tile, lambda x: x.clone(), torch.randn(384, 64))
    assert not res.passed
    assert [row[0] for row in res.outputs[0].bad] == [False, True, False]
    assert abs(res.outputs[0].max_err[1][0] - 1.0) < 1e-6
