"""Fixed random position codes: untrained N(0, 1) vectors (what the core paper's text calls "random")."""
import numpy as np

from .base import FixedInputPE, Scheme
from .registry import register


def random_table(n_pos: int, d_model: int, seed: int) -> np.ndarray:
    """Row p is the p-th draw of a seeded N(0, 1) stream, so a longer table extends a shorter one."""
    return np.random.default_rng(seed).standard_normal((n_pos, d_model))


@register
class RandomFixed(Scheme):
    name = "random"
    label = "Random"
    acts_on = "input"
    formula = "x_p = e(t_p) + r_p, r_p ~ N(0, 1) drawn once from a seed, never trained"
    source = "seed 003 ('random, fixed')"
    extrapolation = "positions past training get further draws of the same seeded stream: codes never seen in training"
    params = {"seed": (1234, "seed of the random codes")}

    def input_pe(self):
        return FixedInputPE(lambda n, d: random_table(n, d, self.kw["seed"]), self.cfg.d_model)
