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
from .rope import RoPE, RotaryAttention


class FoPEAttention(RotaryAttention):
    """`inv_freq` keeps RoPE's theta_j; `clipped` [planes] marks the zero-frequency planes; `cos_coef` /
    `sin_coef` [head, planes_in, planes_out] are the Fourier coefficients (saved in the state dict)."""

    def __init__(self, cfg, layer, scheme):
        super().__init__(cfg, layer, scheme)
        kw, n = scheme.kw, self.d_rot // 2
        floor = 2 * math.pi / cfg.max_len
        self.register_buffer("clipped", (self.inv_freq < floor) if kw["clip"] else torch.zeros(n, dtype=torch.bool),
                             persistent=False)
        gen = torch.Generator().manual_seed(int(cfg.seed) * 1009 + layer)
        eye = torch.eye(n).expand(cfg.n_heads, n, n)
        self.cos_coef = nn.Parameter(eye + kw["sigma"] * torch.randn(cfg.n_heads, n, n, generator=gen),
                                     requires_grad=bool(kw["trainable"]))
        self.sin_coef = nn.Parameter(eye + kw["sigma"] * torch.randn(cfg.n_heads, n, n, generator=gen),
                                     requires_grad=bool(kw["trainable"]))

    def frequencies(self) -> torch.Tensor:
        """omega_i after clipping: theta_i, or 0 for clipped planes."""
        return torch.where(self.clipped, torch.zeros_like(self.inv_freq), self.inv_freq)

    def cos_sin(self, n_pos: int, dtype: torch.dtype):
        # Not cached: the coefficients may train, and load_state_dict may replace them.
        pos = torch.arange(n_pos, device=self.inv_freq.device, dtype=torch.float32)
        ang = pos[:, None] * self.frequencies()[None, :]  # [pos, planes]
        C = torch.einsum("pi,hij->phj", ang.cos().to(self.cos_coef.dtype), self.cos_coef)  # [pos, head, planes]
        S = torch.einsum("pi,hij->phj", ang.sin().to(self.sin_coef.dtype), self.sin_coef)
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
    }
    attention_cls = FoPEAttention

    def check(self):
        super().check()
        kw = self.kw
        need(isinstance(kw["sigma"], (int, float)) and kw["sigma"] >= 0, f"fope sigma={kw['sigma']!r} must be >= 0")
        need(isinstance(kw["clip"], bool), f"fope clip={kw['clip']!r} must be true or false")
        need(isinstance(kw["trainable"], bool), f"fope trainable={kw['trainable']!r} must be true or false")
