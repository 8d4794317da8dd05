"""Sinusoidal absolute position embedding (Vaswani et al. 2017; the core paper's "absolute")."""
import numpy as np

from .base import FixedInputPE, Scheme, need, need_base
from .registry import register

LAYOUTS = ("interleaved", "concat")


def sinusoid_table(n_pos: int, d_model: int, base: float = 10000.0, layout: str = "interleaved") -> np.ndarray:
    """w_i = base^(-2i/d). interleaved: PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i) (Vaswani; the authors'
    "absolute"). concat: PE[p] = [sin(p w) ; cos(p w)], halves of d/2 (the input encoding of the authors' "rope")."""
    pos = np.arange(n_pos, dtype=np.float64)[:, None]
    inv_freq = base ** (-np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table = np.zeros((n_pos, d_model))
    if layout == "concat":
        half = d_model // 2
        table[:, :half] = np.sin(pos * inv_freq[:half])
        table[:, half:2 * half] = np.cos(pos * inv_freq[:half])
        return table
    table[:, 0::2] = np.sin(pos * inv_freq)
    table[:, 1::2] = np.cos(pos * inv_freq)[:, : d_model // 2]
    return table


def check_layout(scheme: Scheme) -> None:
    need(scheme.kw["layout"] in LAYOUTS, f"{scheme.name} layout={scheme.kw['layout']!r} is unknown; use one of {LAYOUTS}")


LAYOUT_PARAM = ("interleaved", "'interleaved' (sin on even, cos on odd dims) or 'concat' ([sin ; cos] halves, "
                               "the authors' rope script)")


@register
class Sinusoidal(Scheme):
    name = "sinusoidal"
    label = "Sinusoidal"
    acts_on = "input"
    formula = "x_p = e(t_p) + [sin(p w_i), cos(p w_i)]_i, w_i = 10000^(-2i/d)"
    source = "Vaswani et al. 2017; seed 003 ('absolute')"
    extrapolation = "the formula is defined for any position; positions past training are unseen phases"
    params = {"base": (10000.0, "frequency base"), "layout": LAYOUT_PARAM}

    def check(self):
        need_base(self.name, self.kw["base"])
        check_layout(self)

    def input_pe(self):
        return FixedInputPE(lambda n, d: sinusoid_table(n, d, self.kw["base"], self.kw["layout"]), self.cfg.d_model)
