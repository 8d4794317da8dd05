"""Sinusoidal absolute position embedding (Vaswani et al. 2017; the core paper's "absolute")."""
import numpy as np

from .base import FixedInputPE, Scheme
from .registry import register


def sinusoid_table(n_pos: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(p / base^(2i/d))."""
    pos = np.arange(n_pos, dtype=np.float64)[:, None]
    inv_freq = base ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table = np.zeros((n_pos, d_model))
    table[:, 0::2] = np.sin(pos * inv_freq)
    table[:, 1::2] = np.cos(pos * inv_freq)[:, : d_model // 2]
    return table


@register
class Sinusoidal(Scheme):
    name = "sinusoidal"
    acts_on = "input"
    formula = "x_p = e(t_p) + [sin(p w_i), cos(p w_i)]_i, w_i = 10000^(-2i/d)"
    source = "Vaswani et al. 2017; seed 003 ('absolute')"
    extrapolation = "the formula is defined for any position; positions past training are unseen phases"
    params = {"base": (10000.0, "frequency base")}

    def input_pe(self):
        return FixedInputPE(lambda n, d: sinusoid_table(n, d, self.kw["base"]), self.cfg.d_model)
