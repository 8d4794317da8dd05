"""NoPE: no positional signal at all."""
from .base import Scheme
from .registry import register


@register
class NoPE(Scheme):
    name = "nope"
    label = "NoPE"
    translation_invariant = True
    acts_on = "nowhere"
    formula = "score(i, j) = q_i . k_j / sqrt(d_head); no position anywhere"
    source = "seed 003 (baseline); Kazemnejad et al. 2023"
    extrapolation = "nothing depends on position, so any length runs; the `paper` arch is permutation-invariant"
