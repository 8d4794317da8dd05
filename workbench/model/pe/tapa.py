"""TAPA: token-aware phase attention (Wang et al. 2025, seed 000). No rotation; position enters the score as a
token-dependent phase.

Each head's q and k (width D = d_head) split into an amplitude part (first theta D dims) and a phase part (the
remaining (1 - theta) D dims):

    quadratic (default, eq. 12):
        score(m, n) = q_A . k_A / sqrt(theta D) * cos(2 pi |m - n|^alpha * q_P . k_P / sqrt((1 - theta) D))
    linear (eq. 16, section 4.5): the phase q_P . k_P is replaced by sum(q_P) + sum(k_P), i.e. the paper's
        (q^T, k^T) 1 / sqrt((1 - theta) D) read as the all-ones vector over both phase parts: a phase linear in
        q and k (non-stationary), which the paper found worse than the quadratic one

theta = 0.5, alpha = 0.1 as in the paper. At |m - n| = 0 the cosine is 1, so the diagonal is the amplitude score;
with a zero phase part TAPA is the scaled dot product of the amplitude halves. The score is not a dot product of
two vectors, so TAPA always takes the explicit path (no SDPA); memory is O(N^2) per head like any explicit
attention. hook_rot_q / hook_rot_k exist and equal hook_q / hook_k (no rotation).

Beyond the training length: the score is defined at any distance; |m - n|^alpha grows slowly (alpha = 0.1:
128^0.1 = 1.6, 4096^0.1 = 2.3), so unseen distances only make the phase oscillate moderately faster. The expected
score decays to 0 with distance (Thm 3.2) while its variance stays bounded below (Thm 3.3): no built-in distance bias.
"""
from __future__ import annotations

import math

import torch

from ..attention import Attention
from .base import Scheme, need
from .registry import register


def tapa_distance(n_q: int, n_k: int, alpha: float, device=None) -> torch.Tensor:
    """[n_q, n_k]: |m - n|^alpha (0 on the diagonal)."""
    m = torch.arange(n_q, device=device, dtype=torch.float32)[:, None]
    n = torch.arange(n_k, device=device, dtype=torch.float32)[None, :]
    return (m - n).abs() ** alpha


class TAPAAttention(Attention):
    dot_product_scores = False

    def __init__(self, cfg, layer, scheme):
        super().__init__(cfg, layer, scheme)
        self.d_amp = scheme.d_amp
        self.alpha = float(scheme.kw["alpha"])
        self.phase = scheme.kw["phase"]

    def phase_scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """[b, h, q, k]: the phase phi(q_m, k_n) before the 2 pi |m - n|^alpha factor."""
        a = self.d_amp
        qp, kp = q[..., a:], k[..., a:]
        scale = math.sqrt(qp.shape[-1])
        if self.phase == "linear":
            return (qp.sum(-1).transpose(1, 2)[..., :, None] + kp.sum(-1).transpose(1, 2)[..., None, :]) / scale
        return torch.einsum("bqhe,bkhe->bhqk", qp, kp) / scale

    def scores(self, q, k):
        a = self.d_amp
        amp = torch.einsum("bqhe,bkhe->bhqk", q[..., :a], k[..., :a]) / math.sqrt(a)
        dist = tapa_distance(q.shape[1], k.shape[1], self.alpha, q.device).to(q.dtype)
        return amp * torch.cos(2 * math.pi * dist * self.phase_scores(q, k))


@register
class TAPA(Scheme):
    name = "tapa"
    label = "TAPA"
    translation_invariant = True
    acts_on = "logits"
    formula = ("score = q_A.k_A / sqrt(theta D) * cos(2 pi |m-n|^alpha q_P.k_P / sqrt((1-theta) D)); "
               "linear phase: q_P.k_P -> sum(q_P) + sum(k_P)")
    source = "Wang et al. 2025 (Meta), TAPA: token-aware phase attention (seed 000)"
    extrapolation = ("defined at any distance; |m-n|^alpha grows slowly (alpha 0.1: 128^0.1 = 1.6, 4096^0.1 = 2.3), "
                     "so longer distances mean moderately faster phase oscillation; the expected score decays "
                     "to 0 with distance (Thm 3.2) while its variance stays (Thm 3.3): no built-in distance bias")
    params = {"theta": (0.5, "share of each head's dims in the amplitude part (theta * d_head must be a whole number)"),
              "alpha": (0.1, "distance exponent in the phase"),
              "phase": ("quadratic", "'quadratic' (q_P.k_P, the paper's choice) or 'linear' (sum q_P + sum k_P)")}
    train_defaults = {"betas": ([0.9, 0.95], "the TAPA paper's AdamW betas (section 5). d score / d q_P = -amp sin(phase) "
                                             "2 pi |m-n|^alpha k_P / sqrt((1-theta) D) grows without bound with q and "
                                             "k; with the presets' betas (0.98, 0.9), beta1 > sqrt(beta2), so Adam's "
                                             "step is not bounded by lr under spiky gradients: W_Q went from 0.14 to "
                                             "23 in 300 steps and the loss to 2e4 (docs/schemes.md#tapa)")}
    attention_cls = TAPAAttention

    @property
    def d_amp(self) -> int:
        return int(round(self.kw["theta"] * self.cfg.d_head))

    def check(self):
        kw, dh = self.kw, self.cfg.d_head
        need(kw["phase"] in ("quadratic", "linear"),
             f"tapa phase={kw['phase']!r} is unknown; use 'quadratic' or 'linear'")
        need(isinstance(kw["theta"], (int, float)) and 0 < kw["theta"] < 1,
             f"tapa theta={kw['theta']!r} must be in (0, 1)")
        need(abs(kw["theta"] * dh - self.d_amp) < 1e-9 and 1 <= self.d_amp <= dh - 1,
             f"tapa theta={kw['theta']} splits d_head={dh} into {kw['theta'] * dh:g} amplitude dims; theta * d_head "
             f"must be a whole number in 1..{dh - 1}: choose theta in "
             f"{[round(a / dh, 4) for a in range(1, dh)][:8]}... or change d_head")
        need(isinstance(kw["alpha"], (int, float)) and kw["alpha"] > 0, f"tapa alpha={kw['alpha']!r} must be > 0")
