"""Wavelet PE: Daubechies-4 scaling and wavelet functions evaluated at each position (Li 2025, seed 002 section 6.1).

Multi-resolution features of a position p, for scales j = 0 .. J, J = floor(log2 L), L = max_len (the training
length; the table is a fixed function of p, so a longer table extends a shorter one):

    phi_{j,c}(p) = 2^(-j/2) phi((p - c) / 2^j + mu_phi),   psi_{j,c}(p) = 2^(-j/2) psi((p - c) / 2^j + mu_psi)

phi, psi: the db4 scaling function and mother wavelet (`pywt.Wavelet('db4').wavefun`, 8 taps, support [0, 7],
sampled at 2^-12 and linearly interpolated); mu = the centre of the function's energy (about 1.27 for phi, 3.50
for psi), so phi_{j,c} and psi_{j,c} are centred on position c. Scale j = 0 is the finest (width about 7
positions), scale J the coarsest (width about 7 * 2^J >= 3.5 L): the paper's j0 = 0, J = floor(log2 N_max);
the 2^(-j/2) factor keeps every function at unit L2 norm, as in the paper's orthonormal family.

Filling d_model features (the paper says only "K_j shifts per scale"): the 2 (J + 1) groups (phi and psi at each
scale, in the order phi_0, psi_0, phi_1, psi_1, ...) get d_model // (2 (J + 1)) features each, the first
d_model mod 2 (J + 1) groups one more; a group with b features centres them at the bin midpoints
c_i = (i + 1/2) L / b - 1/2, i = 0 .. b - 1, spread evenly over the training positions [0, L - 1] (fractional
shifts when b exceeds the integer shift grid, a subset of it when b is smaller).

Normalisation (paper, eq. after "PE_wavelet"): each position's vector is divided by its L2 norm and multiplied by
`scale` (default sqrt(d_model): per-entry RMS 1, like the N(0, 1) token embeddings; 1.0 gives the paper's unit
norm). A position whose raw norm is below ZERO_TOL (1e-6) times the smallest raw norm over the training positions
(only the far tails of the coarsest functions remain, at the level of the sampling error) is the zero vector.

Beyond the training length: fine-scale functions (centred inside [0, L)) vanish first, then coarser ones; after
normalisation the remaining coarse features are rescaled to full norm, so nearby positions past L look like the
coarse-scale code of the end of the training range. Once only the tails of the last coarse functions are left
(about L + 4.8 * 2^J positions: 745 for L = 128, 205 for L = 48) the PE is the zero vector: no positional signal.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .base import FixedInputPE, Scheme, need
from .registry import register

WAVEFUN_LEVEL = 12
ZERO_TOL = 1e-6  # relative raw norm below which a position's code counts as zero (see wavelet_table)


@functools.lru_cache(maxsize=4)
def _wavefun(name: str = "db4"):
    import pywt

    phi, psi, x = pywt.Wavelet(name).wavefun(level=WAVEFUN_LEVEL)
    phi, psi, x = np.asarray(phi, float), np.asarray(psi, float), np.asarray(x, float)
    centres = tuple(float(np.trapezoid(x * f ** 2, x) / np.trapezoid(f ** 2, x)) for f in (phi, psi))
    return x, phi, psi, centres


def wavelet_layout(d_model: int, max_len: int) -> list[tuple[str, int, float]]:
    """(kind 'phi'|'psi', scale j, centre c) of each of the d_model features, in column order."""
    J = int(math.floor(math.log2(max_len))) if max_len >= 1 else 0
    groups = [(kind, j) for j in range(J + 1) for kind in ("phi", "psi")]
    base, extra = divmod(d_model, len(groups))
    layout = []
    for g, (kind, j) in enumerate(groups):
        b = base + (1 if g < extra else 0)
        layout += [(kind, j, (i + 0.5) * max_len / b - 0.5) for i in range(b)]
    return layout


def wavelet_raw(n_pos: int, d_model: int, max_len: int) -> np.ndarray:
    """[n_pos, d_model] un-normalised features phi_{j,c}(p) / psi_{j,c}(p) (see the module docstring)."""
    x, phi, psi, (mu_phi, mu_psi) = _wavefun()
    pos = np.arange(n_pos, dtype=np.float64)
    table = np.zeros((n_pos, d_model))
    for col, (kind, j, c) in enumerate(wavelet_layout(d_model, max_len)):
        f, mu = (phi, mu_phi) if kind == "phi" else (psi, mu_psi)
        table[:, col] = 2.0 ** (-j / 2) * np.interp((pos - c) / 2.0 ** j + mu, x, f, left=0.0, right=0.0)
    return table


def wavelet_table(n_pos: int, d_model: int, max_len: int, scale: float | None = None) -> np.ndarray:
    """Row-normalised wavelet PE: each row has L2 norm `scale` (default sqrt(d_model)); a row whose raw norm is below
    ZERO_TOL times the smallest raw norm over the training positions (only the far tails of the coarsest functions
    are left, at the level of the interpolation error) is the zero vector."""
    raw = wavelet_raw(n_pos, d_model, max_len)
    norm = np.linalg.norm(raw, axis=1, keepdims=True)
    train_min = np.linalg.norm(wavelet_raw(max_len, d_model, max_len), axis=1).min() if n_pos > max_len else \
        norm[:max_len].min()
    target = math.sqrt(d_model) if scale is None else float(scale)
    keep = norm > max(ZERO_TOL * train_min, 1e-300)
    return np.where(keep, raw / np.where(keep, norm, 1.0), 0.0) * target


@register
class Wavelet(Scheme):
    name = "wavelet"
    label = "Wavelet"
    acts_on = "input"
    formula = ("x_p = e(t_p) + s * v_p / |v_p|, v_p = [2^(-j/2) phi((p-c)/2^j + mu), 2^(-j/2) psi((p-c)/2^j + mu)] "
               "over db4, scales j = 0..floor(log2 L), centres c spread over [0, L)")
    source = "Li 2025, theory of positional encodings (seed 002, section 6.1); Daubechies 1988 (db4)"
    extrapolation = ("fine-scale features vanish past L and the normalised code is carried by coarse scales; "
                     "past about L + 4.8 * 2^floor(log2 L) (745 for L = 128) the PE is the zero vector (no position)")
    params = {"scale": (None, "L2 norm of each position's vector (None = sqrt(d_model); 1.0 = the paper's unit norm)")}

    def check(self):
        s = self.kw["scale"]
        need(s is None or (isinstance(s, (int, float)) and s > 0), f"wavelet scale={s!r} must be > 0 (or None)")

    def input_pe(self):
        L, s = self.cfg.max_len, self.kw["scale"]
        return FixedInputPE(lambda n, d: wavelet_table(n, d, L, s), self.cfg.d_model)
