"""Legendre PE: Legendre polynomials of a squashed position (Li 2025, seed 002 section 6.2).

    x(p) = tanh(gamma * p / L),  PE[p, l] = P_l(x(p)) / r_l,  l = 0 .. d_model - 1

P_l by the three-term recurrence (l + 1) P_{l+1}(x) = (2l + 1) x P_l(x) - l P_{l-1}(x), P_0 = 1, P_1 = x
(forward recurrence is stable on [-1, 1]). L = max_len (the training length), gamma = 1 as in the paper's
experiments (section 6.2.2 suggests a larger gamma, tanh(gamma) ~ 0.99, to use more of [0, 1)).

Normalisation (the paper keeps raw P_l, |P_l| <= 1): with norm="rms" (default) each degree is divided by its
RMS over the training positions 0 .. L-1, r_l = sqrt(mean_p P_l(x(p))^2), so every feature has RMS 1 in training
like the N(0, 1) token embeddings; raw high-degree polynomials would otherwise be ~ (pi l)^(-1/2) small on
[0, tanh(gamma)). r_l depends on L only, so the table is a fixed function of p. norm="none" keeps raw P_l.

Beyond the training length: x(p) -> 1 monotonically and P_l(1) = 1 for every l: positions past L are still
distinct for a while (x keeps growing), but compress together and the code converges to the constant vector
[1 / r_l]_l (raw: all ones), so far positions become indistinguishable; with norm="rms" the high-degree entries
then exceed their training range (up to 1 / r_l).
"""
from __future__ import annotations

import numpy as np

from .base import FixedInputPE, Scheme, need
from .registry import register


def legendre_values(x: np.ndarray, n_deg: int) -> np.ndarray:
    """[len(x), n_deg]: P_0(x) .. P_{n_deg-1}(x) by the three-term recurrence."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty((x.shape[0], n_deg))
    if n_deg >= 1:
        out[:, 0] = 1.0
    if n_deg >= 2:
        out[:, 1] = x
    for l in range(1, n_deg - 1):
        out[:, l + 1] = ((2 * l + 1) * x * out[:, l] - l * out[:, l - 1]) / (l + 1)
    return out


def legendre_table(n_pos: int, d_model: int, max_len: int, gamma: float = 1.0, norm: str = "rms") -> np.ndarray:
    """[n_pos, d_model] Legendre PE (see the module docstring)."""
    x = np.tanh(gamma * np.arange(n_pos, dtype=np.float64) / max_len)
    table = legendre_values(x, d_model)
    if norm == "rms":
        train = legendre_values(np.tanh(gamma * np.arange(max_len, dtype=np.float64) / max_len), d_model)
        table = table / np.maximum(np.sqrt((train ** 2).mean(0)), 1e-12)
    return table


@register
class Legendre(Scheme):
    name = "legendre"
    label = "Legendre"
    acts_on = "input"
    formula = "x_p = e(t_p) + [P_l(tanh(gamma p / L)) / r_l]_{l=0..d-1}, r_l = RMS of P_l over training positions"
    source = "Li 2025, theory of positional encodings (seed 002, section 6.2); Legendre polynomials"
    extrapolation = ("defined at any position; tanh(p / L) -> 1 so positions past L compress together and the "
                     "code converges to the constant P_l(1) = 1 (scaled by 1 / r_l): far positions become "
                     "indistinguishable")
    params = {"gamma": (1.0, "squash factor in tanh(gamma p / L)"),
              "norm": ("rms", "'rms' (each degree has RMS 1 over training positions) or 'none' (raw P_l)")}

    def check(self):
        kw = self.kw
        need(isinstance(kw["gamma"], (int, float)) and kw["gamma"] > 0, f"legendre gamma={kw['gamma']!r} must be > 0")
        need(kw["norm"] in ("rms", "none"), f"legendre norm={kw['norm']!r} is unknown; use 'rms' or 'none'")

    def input_pe(self):
        L, g, n = self.cfg.max_len, float(self.kw["gamma"]), self.kw["norm"]
        return FixedInputPE(lambda n_pos, d: legendre_table(n_pos, d, L, g, n), self.cfg.d_model)
