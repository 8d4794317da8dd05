"""The core paper's learned relative bias: one scalar per head, layer and offset j - i."""
import torch
from torch import nn

from ..attention import Attention
from .base import Scheme
from .registry import register


def offsets(n_q: int, n_k: int, device=None) -> torch.Tensor:
    """[n_q, n_k] matrix of j - i."""
    return torch.arange(n_k, device=device)[None, :] - torch.arange(n_q, device=device)[:, None]


class RelativeBiasAttention(Attention):
    def __init__(self, cfg, layer, scheme):
        super().__init__(cfg, layer, scheme)
        self.rel_bias = nn.Parameter(torch.randn(cfg.n_heads, 2 * cfg.max_len - 1) * 0.02)

    def pos_bias(self, n_q, n_k):
        L = self.cfg.max_len
        idx = offsets(n_q, n_k, self.rel_bias.device).clamp(-(L - 1), L - 1) + (L - 1)
        return self.rel_bias[:, idx]


@register
class Relative(Scheme):
    name = "relative"
    label = "Relative"
    translation_invariant = True
    learned_bias = True
    acts_on = "logits"
    formula = "score(i, j) = q_i . k_j / sqrt(d) + b[l, h, j - i], b ~ N(0, 0.02), offsets in [-(L-1), L-1]"
    source = "seed 003 (the authors' relative bias); Shaw et al. 2018"
    extrapolation = "offsets beyond +-(max_len-1) reuse the bias of the largest trained offset (clamped)"
    attention_cls = RelativeBiasAttention
