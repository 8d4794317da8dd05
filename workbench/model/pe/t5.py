"""T5 bucketed relative position bias (Raffel et al. 2020)."""
import math

import torch
from torch import nn

from ..attention import Attention
from .base import Scheme, need
from .registry import register
from .relative import offsets


def t5_bucket(rel: torch.Tensor, bidirectional: bool, n_buckets: int, max_distance: int) -> torch.Tensor:
    """Bucket of offset `rel = j - i`: exact for small |rel|, log-spaced up to max_distance, then saturated."""
    bucket = torch.zeros_like(rel)
    if bidirectional:
        n_buckets //= 2
        bucket = bucket + (rel > 0).long() * n_buckets
        dist = rel.abs()
    else:
        dist = (-rel).clamp(min=0)
    exact = n_buckets // 2
    log_b = exact + (torch.log(dist.float().clamp(min=1) / exact) / math.log(max_distance / exact)
                     * (n_buckets - exact)).long()
    log_b = log_b.clamp(max=n_buckets - 1)
    return bucket + torch.where(dist < exact, dist, log_b)


class T5BiasAttention(Attention):
    def __init__(self, cfg, layer, scheme):
        super().__init__(cfg, layer, scheme)
        self.rel_bias = nn.Parameter(torch.randn(cfg.n_heads, scheme.kw["n_buckets"]) * 0.02)

    def pos_bias(self, n_q, n_k):
        kw = self.scheme.kw
        b = t5_bucket(offsets(n_q, n_k, self.rel_bias.device), self.cfg.arch != "decoder",
                      kw["n_buckets"], kw["max_distance"])
        return self.rel_bias[:, b]


@register
class T5(Scheme):
    name = "t5"
    label = "T5"
    translation_invariant = True
    learned_bias = True
    acts_on = "logits"
    formula = "score(i, j) = q_i . k_j / sqrt(d) + b[l, h, bucket(j - i)]; log-spaced buckets"
    source = "Raffel et al. 2020 (T5); seed 003"
    extrapolation = "offsets past max_distance share the last bucket, so any length runs"
    params = {"n_buckets": (32, "number of buckets (split by sign when bidirectional)"),
              "max_distance": (128, "distance where the log buckets saturate")}
    attention_cls = T5BiasAttention

    def check(self):
        need(self.kw["n_buckets"] >= 4, f"n_buckets={self.kw['n_buckets']} must be >= 4")
        need(self.kw["max_distance"] > self.kw["n_buckets"] // 2,
             f"max_distance={self.kw['max_distance']} must exceed n_buckets/2")
