"""Learned absolute position embedding, N(0, 1) init (what the authors' code calls "random")."""
import torch
from torch import nn

from .base import Scheme
from .registry import register


class LearnedPE(nn.Module):
    """Trainable [max_len, d_model] table, N(0, 1) at init (`zero_init`: zeros, as the authors' MLA script)."""

    def __init__(self, max_len: int, d_model: int, zero_init: bool = False):
        super().__init__()
        self.W_pos = nn.Parameter(torch.zeros(max_len, d_model) if zero_init else torch.randn(max_len, d_model))

    def forward(self, n_pos: int) -> torch.Tensor:
        if n_pos > self.W_pos.shape[0]:
            raise ValueError(
                f"the `learned` scheme has trained embeddings for {self.W_pos.shape[0]} positions only and cannot "
                f"run on {n_pos}; it cannot extrapolate. Use a sequence of at most max_len={self.W_pos.shape[0]} "
                "tokens, or a scheme that extrapolates (rope, alibi, sinusoidal, ...)")
        return self.W_pos[:n_pos]


@register
class Learned(Scheme):
    name = "learned"
    label = "Learned"
    acts_on = "input"
    formula = "x_p = e(t_p) + P[p], P trainable, P ~ N(0, 1) at init"
    source = "Devlin et al. 2019 / GPT-2; seed 003 (the authors' 'random' code path)"
    extrapolation = "cannot: positions >= max_len have no embedding, and the model refuses them"
    can_extrapolate = False

    def input_pe(self):
        return LearnedPE(self.cfg.max_len, self.cfg.d_model)
