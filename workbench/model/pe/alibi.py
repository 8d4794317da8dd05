"""ALiBi: a fixed linear distance penalty per head (Press et al. 2022); symmetric |i - j| in bidirectional archs."""
import math

import torch

from ..attention import Attention
from .base import Scheme, need
from .registry import register
from .relative import offsets

SLOPES = ("geometric", "reference", "paper")


def geometric_slopes(n_heads: int) -> list[float]:
    """m_h = 2^(-8h/H), h = 1..H (Press et al. 2022 for a power-of-two H)."""
    return [2.0 ** (-8.0 * h / n_heads) for h in range(1, n_heads + 1)]


def reference_slopes(n_heads: int) -> list[float]:
    """The ALiBi reference recipe: geometric for a power of two; otherwise the geometric slopes of the power of
    two P below H, then every other slope of the 2P-head sequence for the remaining H - P heads."""
    p = 2 ** int(math.floor(math.log2(n_heads)))
    if p == n_heads:
        return geometric_slopes(n_heads)
    return geometric_slopes(p) + geometric_slopes(2 * p)[0::2][: n_heads - p]


def alibi_slopes(n_heads: int, kind: str = "geometric") -> torch.Tensor:
    """geometric: 2^(-8h/H), h = 1..H; reference: as geometric for a power-of-two H, Press et al.'s interleaved
    recipe otherwise; paper: exp(-h/H), h = 0..H-1 (the core paper's released code)."""
    if kind == "paper":
        return torch.exp(-torch.arange(n_heads, dtype=torch.float32) / n_heads)
    return torch.tensor((reference_slopes if kind == "reference" else geometric_slopes)(n_heads), dtype=torch.float32)


class AlibiAttention(Attention):
    def __init__(self, cfg, layer, scheme):
        super().__init__(cfg, layer, scheme)
        self.register_buffer("slopes", alibi_slopes(cfg.n_heads, scheme.kw["slopes"]), persistent=False)

    def pos_bias(self, n_q, n_k):
        dist = offsets(n_q, n_k, self.slopes.device).abs().float()
        return -self.slopes[:, None, None] * dist


@register
class Alibi(Scheme):
    name = "alibi"
    label = "ALiBi"
    translation_invariant = True
    acts_on = "logits"
    formula = "score(i, j) = q_i . k_j / sqrt(d) - m_h |i - j|, m_h = 2^(-8h/H)"
    source = "Press et al. 2022 (ALiBi); seed 003"
    extrapolation = "the penalty is linear in distance, defined for any length (ALiBi's design goal)"
    params = {"slopes": ("geometric", "'geometric' (2^(-8h/H), h=1..H), 'reference' (Press et al.'s recipe: "
                                      "equal to geometric for a power-of-two head count, interleaved otherwise) "
                                      "or 'paper' (exp(-h/H), h=0..H-1, the core paper's released code)")}
    attention_cls = AlibiAttention

    def check(self):
        need(self.kw["slopes"] in SLOPES, f"alibi slopes={self.kw['slopes']!r} is unknown; use one of {SLOPES}")
