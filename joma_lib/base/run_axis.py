"""Maps of many runs at once: tensors with a leading run axis, each run's slice with its own parameters.

A stack of runs (the language model's, :mod:`joma_lib.lm.stacked`; Table 1's, :mod:`joma_lib.theory.table1.stacked`)
holds each parameter as one tensor ``[R, ...]``; these are its linear maps and layer norms, each one operation for
all runs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def affine(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor | None = None
           ) -> torch.Tensor:
    """``h W^T + b`` in one product: ``h [N, in]``, ``W [out, in]``, ``b [out]`` -> ``[N, out]``, or with a leading
    run axis on all three (``[R, N, in]``, ``[R, out, in]``, ``[R, out]`` -> ``[R, N, out]``, one batched product);
    without ``b`` where it is None."""
    if h.dim() == 2:
        if bias is None:
            return torch.mm(h, weight.t(), out=out)
        return torch.addmm(bias, h, weight.t(), out=out)
    if bias is None:
        return torch.bmm(h, weight.transpose(-2, -1), out=out)
    return torch.baddbmm(bias.unsqueeze(-2), h, weight.transpose(-2, -1), out=out)


def layer_norm(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """LayerNorm over the last axis of ``h [R, N, d]`` with each run's own gain and shift (``[R, d]``)."""
    return F.layer_norm(h, h.shape[-1:]) * weight.unsqueeze(1) + bias.unsqueeze(1)
