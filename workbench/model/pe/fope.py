"""FoPE: Fourier position embedding (Hua et al. 2025, seed 004), a RoPE whose planes are Fourier series.

RoPE rotates plane j of a head at position p by the single frequency theta_j (cos p theta_j, sin p theta_j).
FoPE replaces the pair with Fourier series over all of the head's RoPE frequencies omega_i:

    C_{h,j}(p) = sum_i A^cos_{h,i,j} cos(p omega_i),    S_{h,j}(p) = sum_i A^sin_{h,i,j} sin(p omega_i)
    plane j of q, k at p:  (x_0, x_1) -> (x_0 C - x_1 S, x_0 S + x_1 C)

with per-head coefficient matrices A^cos, A^sin = I + N(0, sigma) (identity: each plane keeps its dominant
frequency; the noise adds the other frequencies as harmonics), frozen unless `trainable=True` (the paper's
implementation does not train them). Clip floor to zero: a plane whose frequency theta_j < 2 pi / L
(L = max_len, the training length) never completes a cycle in training; it becomes a zero-frequency plane (no
rotation at all: C = 1, S = 0), and in the other planes' series its frequency omega_i is 0 too (a constant term).
`clip=False` keeps every frequency. With sigma = 0 and clip = False, FoPE is exactly RoPE.

Choices where the paper leaves room: the series run over the head's own RoPE frequencies (D = number of planes,
the paper's M <= D with {omega_m} a subset of {omega}); coefficients are used as initialised (the official code
also divides each column by its sum, which the spec's "identity + N(0, sigma)" does not ask for); the noise is
drawn from a generator seeded by (seed, layer), so FoPE leaves the model's other initial weights identical to
RoPE's with the same seed. The RoPE options (rotary_fraction, rope_heads, rope_layers) work as in `rope`.

`construction="official"` follows the authors' released OLMo-based code instead (seed 004's repository; docs/paper.md
section 3): the clipped frequencies are dropped from the series' inputs (the series run over the n_in kept
frequencies only), only the first n_out = min(n_in, d_rot/4) planes get a Fourier series, and every remaining plane
gets 1 as both its "cos" and its "sin" coefficient (C = S = 1: a fixed 45-degree turn scaled by sqrt(2), the same at
every position, so those planes carry no position but are not left as they are); the coefficient matrices
[head, n_in, n_out] start at a "step identity" (A[i * ceil(n_in/n_out), i] = 1) plus Xavier-normal noise with gain
sigma, i.e. std sigma sqrt(2 / (n_in n_out + n_heads n_out)) (torch's fans of a [head, in, out] tensor), and stay
frozen; no column normalisation. The released code turns q and k by -p omega rather than +p omega; both get the same
turn, so the scores are those of the +p convention with the sine series negated, a sign the noise does not
prefer: PE-Lab keeps +p.

Beyond the training length: every plane that still rotates completed at least one cycle within L, and the clipped
planes carry no position, so no plane meets a low-frequency phase it never saw (RoPE's failure mode); the series are
defined at any position.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .base import need
from .registry import register
from .rope import RoPE, RotaryAttention, inv_frequencies


class FoPEAttention(RotaryAttention):
    """`inv_freq` keeps RoPE's theta_j; `clipped` [planes] marks the zero-frequency planes; `cos_coef` /
    `sin_coef` [head, planes_in, planes_out] are the Fourier coefficients (saved in the state dict)."""

    def __init__(self, cfg, layer, scheme):
        super().__init__(cfg, layer, scheme)
        kw, n, h = scheme.kw, self.d_rot // 2, cfg.n_heads
        floor = 2 * math.pi / cfg.max_len
        self.register_buffer("clipped", (self.inv_freq < floor) if kw["clip"] else torch.zeros(n, dtype=torch.bool),
                             persistent=False)
        self.official = kw["construction"] == "official"
        gen = torch.Generator().manual_seed(int(cfg.seed) * 1009 + layer)
        if self.official:
            n_in, n_out = scheme.official_widths(self.inv_freq)
            step = math.ceil(n_in / n_out)
            eye = torch.zeros(n_in, n_out)
            rows = torch.arange(n_out) * step
            eye[rows[rows < n_in], torch.arange(n_out)[rows < n_in]] = 1.0
            std = kw["sigma"] * math.sqrt(2.0 / (n_in * n_out + h * n_out))
        else:
            n_in = n_out = n
            eye, std = torch.eye(n), kw["sigma"]
        self.cos_coef = nn.Parameter(eye + std * torch.randn(h, n_in, n_out, generator=gen),
                                     requires_grad=bool(kw["trainable"]))
        self.sin_coef = nn.Parameter(eye + std * torch.randn(h, n_in, n_out, generator=gen),
                                     requires_grad=bool(kw["trainable"]))

    def series_inputs(self) -> torch.Tensor:
        """The series' input frequencies omega_i: theta_i, or 0 for clipped planes (official: clipped dropped)."""
        if self.official:
            return self.inv_freq[~self.clipped]
        return torch.where(self.clipped, torch.zeros_like(self.inv_freq), self.inv_freq)

    def frequencies(self) -> torch.Tensor:
        """Per plane, the frequency its identity coefficient carries (0: the plane carries no position); what the
        analyses read as the plane's theta_j."""
        if not self.official:
            return self.series_inputs()
        freq, kept = torch.zeros_like(self.inv_freq), self.series_inputs()
        n_out = self.cos_coef.shape[-1]
        rows = torch.arange(n_out, device=freq.device) * math.ceil(len(kept) / n_out)
        ok = rows < len(kept)
        freq[:n_out][ok] = kept[rows[ok]]
        return freq

    def cos_sin(self, n_pos: int, dtype: torch.dtype):
        # Not cached: the coefficients may train, and load_state_dict may replace them.
        pos = torch.arange(n_pos, device=self.inv_freq.device, dtype=torch.float32)
        ang = pos[:, None] * self.series_inputs()[None, :]  # [pos, series inputs]
        C = torch.einsum("pi,hij->phj", ang.cos().to(self.cos_coef.dtype), self.cos_coef)  # [pos, head, outputs]
        S = torch.einsum("pi,hij->phj", ang.sin().to(self.sin_coef.dtype), self.sin_coef)
        if self.official:  # planes past the series: 1 for both coefficients
            rest = C.new_ones(n_pos, self.cfg.n_heads, self.d_rot // 2 - C.shape[-1])
            C, S = torch.cat((C, rest), -1), torch.cat((S, rest), -1)
        else:
            keep = ~self.clipped
            C = torch.where(keep, C, torch.ones_like(C))
            S = torch.where(keep, S, torch.zeros_like(S))
        rot = self.rot_heads[None, :, None]  # heads without RoPE (partial RoPE) stay unrotated
        C = torch.where(rot, C, torch.ones_like(C)).repeat_interleave(2, dim=-1)
        S = torch.where(rot, S, torch.zeros_like(S)).repeat_interleave(2, dim=-1)
        pad = self.cfg.d_head - self.d_rot  # rotary_fraction < 1: the tail dims stay unrotated
        if pad:
            C = torch.cat((C, C.new_ones(n_pos, self.cfg.n_heads, pad)), -1)
            S = torch.cat((S, S.new_zeros(n_pos, self.cfg.n_heads, pad)), -1)
        return C.to(dtype), S.to(dtype)


@register
class FoPE(RoPE):
    name = "fope"
    label = "FoPE"
    translation_invariant = False  # A's off-diagonal terms mix frequencies: q'.k' depends on m and n, not m - n
    acts_on = "q,k"
    formula = ("plane j at p: (x0 C - x1 S, x0 S + x1 C), C_j(p) = sum_i A^cos_ij cos(p w_i), "
               "S_j(p) = sum_i A^sin_ij sin(p w_i), A = I + N(0, sigma) per head; w_i = theta_i, "
               "or 0 (no rotation) if theta_i < 2 pi / L")
    source = "Hua et al. 2025, FoPE: Fourier position embedding (seed 004)"
    extrapolation = ("every plane that rotates completed at least one cycle in training (clip floor), the "
                     "clipped planes carry no position at all, so past training no plane sees an unseen "
                     "low-frequency phase; the Fourier series are defined at any position")
    params = RoPE.params | {
        "sigma": (0.3, "std of the N(0, sigma) noise added to the identity coefficient matrices (paper: 0.3 at 60M)"),
        "clip": (True, "clip frequencies below 2 pi / max_len to zero (no rotation)"),
        "trainable": (False, "train the Fourier coefficients (the paper freezes them)"),
        "construction": ("paper", "'paper' (the formula above) or 'official' (the released code: clipped "
                                  "frequencies dropped from the inputs, series on min(kept, d_rot/4) planes, C = S = 1 "
                                  "on the rest, step identity + Xavier-normal init with gain sigma)"),
    }
    attention_cls = FoPEAttention

    def official_widths(self, inv_freq) -> tuple[int, int]:
        """(n_in, n_out) of construction='official': kept frequencies, planes with a series."""
        floor = 2 * math.pi / self.cfg.max_len
        n_in = int((inv_freq >= floor).sum()) if self.kw["clip"] else len(inv_freq)
        return n_in, min(n_in, self.d_rot // 4)

    def check(self):
        super().check()
        kw = self.kw
        need(isinstance(kw["sigma"], (int, float)) and kw["sigma"] >= 0, f"fope sigma={kw['sigma']!r} must be >= 0")
        need(isinstance(kw["clip"], bool), f"fope clip={kw['clip']!r} must be true or false")
        need(isinstance(kw["trainable"], bool), f"fope trainable={kw['trainable']!r} must be true or false")
        need(kw["construction"] in ("paper", "official"),
             f"fope construction={kw['construction']!r} is unknown; use 'paper' or 'official'")
        if kw["construction"] == "official":
            n_in, n_out = self.official_widths(inv_frequencies(self.d_rot // 2, self.d_rot, kw["base"]))
            need(n_out >= 1, f"fope construction='official' leaves no plane with a Fourier series ({n_in} kept "
                 f"frequencies, d_rot/4 = {self.d_rot // 4}); raise d_head or max_len, or use construction='paper'")
