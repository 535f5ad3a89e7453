"""Maps of stacked runs (joma_lib.base.run_axis): each run's slice gets the map of its own parameters."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from joma_lib.base.run_axis import affine, layer_norm


@pytest.mark.parametrize("with_bias", [True, False])
def test_affine_is_each_runs_linear_map_and_one_runs_without_the_run_axis(with_bias):
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(3, 5, 4, generator=gen, dtype=torch.float64)
    weight = torch.randn(3, 6, 4, generator=gen, dtype=torch.float64)
    bias = torch.randn(3, 6, generator=gen, dtype=torch.float64) if with_bias else None
    out = affine(h, weight, bias)
    assert out.shape == (3, 5, 6)
    for r in range(3):
        b = None if bias is None else bias[r]
        torch.testing.assert_close(out[r], F.linear(h[r], weight[r], b), rtol=0, atol=1e-12)
        torch.testing.assert_close(affine(h[r], weight[r], b), F.linear(h[r], weight[r], b), rtol=0, atol=1e-12)
    written = torch.empty(3, 5, 6, dtype=torch.float64)
    assert affine(h, weight, bias, out=written) is written and torch.equal(written, out)


def test_layer_norm_normalises_each_row_and_applies_each_runs_gain_and_shift():
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(2, 7, 5, generator=gen, dtype=torch.float64)
    weight, bias = torch.randn(2, 5, generator=gen, dtype=torch.float64), torch.randn(2, 5, dtype=torch.float64)
    out = layer_norm(h, weight, bias)
    for r in range(2):
        torch.testing.assert_close(out[r], F.layer_norm(h[r], (5,), weight[r], bias[r]), rtol=0, atol=1e-12)
