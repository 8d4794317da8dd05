"""ALiBi: a fixed linear distance penalty per head (Press et al. 2022)."""
import torch

from ..attention import Attention
from .base import Scheme, need
from .registry import register
from .relative import offsets


def alibi_slopes(n_heads: int, kind: str = "geometric") -> torch.Tensor:
    """geometric: m_h = 2^(-8h/H), h = 1..H (Press et al.); paper: m_h = exp(-h/H)."""
    h = torch.arange(1, n_heads + 1, dtype=torch.float32)
    return 2.0 ** (-8.0 * h / n_heads) if kind == "geometric" else torch.exp(-h / n_heads)


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
    acts_on = "logits"
    formula = "score(i, j) = q_i . k_j / sqrt(d) - m_h |i - j|, m_h = 2^(-8h/H)"
    source = "Press et al. 2022 (ALiBi); seed 003"
    extrapolation = "the penalty is linear in distance, defined for any length (ALiBi's design goal)"
    params = {"slopes": ("geometric", "'geometric' (2^(-8h/H)) or 'paper' (exp(-h/H))")}
    attention_cls = AlibiAttention

    def check(self):
        need(self.kw["slopes"] in ("geometric", "paper"),
             f"slopes={self.kw['slopes']!r} is unknown; use 'geometric' or 'paper'")
