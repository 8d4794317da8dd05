"""RoPE: rotary position embedding on interleaved pairs (Su et al. 2021), with partial variants.

Plane i (dims 2i, 2i+1) of q and k at position p is rotated by p * theta_i, theta_i = base^(-2i/d_rot),
so q'_m . k'_n depends on (m - n) only. Partial RoPE (seed 003, section 5): `rope_layers` picks the layers,
`rope_heads` the number of leading heads per layer that rotate (the rest are NoPE), `rotary_fraction`
the share of each head's dimensions that rotate.
"""
from __future__ import annotations

import torch

from ..attention import Attention
from .base import Scheme, need, need_base
from .registry import register


def inv_frequencies(n_planes: int, d_rot: int, base: float) -> torch.Tensor:
    """theta_i = base^(-2i / d_rot), i = 0 .. n_planes-1."""
    return base ** (-torch.arange(0, 2 * n_planes, 2, dtype=torch.float32) / d_rot)


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs: (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos); cos/sin repeat per pair. Computed
    in cos/sin's dtype (`table_dtype`: fp32 at least), returned in x's. x_perp = (-x1, x0) exactly either way: under
    torch.compile as a flip times (-1, 1), which inductor fuses into fewer kernels (benchmarks/step_traffic.py: 4 %
    fewer bytes a paper-preset RoPE step), in eager as a stack of the two slices (1.4x faster on CPU)."""
    if torch.compiler.is_compiling():
        sign = torch.arange(2, device=x.device, dtype=x.dtype) * 2 - 1
        x_perp = (x.unflatten(-1, (-1, 2)).flip(-1) * sign).flatten(-2)
    else:
        x_perp = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return (x * cos + x_perp * sin).to(x.dtype)


def table_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype rotary tables are built and applied in for inputs of `dtype`: fp32 at least (a bf16 cos / sin
    keeps 3 significant digits), so a bf16 q under autocast rotates as an fp32 one and is rounded once."""
    return torch.promote_types(dtype, torch.float32)


def head_mask(cfg, layer: int, rope_heads, rope_layers) -> torch.Tensor:
    """Bool [n_heads]: which heads of `layer` rotate."""
    mask = torch.zeros(cfg.n_heads, dtype=torch.bool)
    if rope_layers is not None and layer not in rope_layers:
        return mask
    k = cfg.n_heads if rope_heads is None else (rope_heads if isinstance(rope_heads, int) else rope_heads[layer])
    mask[:k] = True
    return mask


class RotaryAttention(Attention):
    """`rot_offset`, `d_rot`: the rotary dims of hook_q/hook_k are [rot_offset, rot_offset + d_rot)."""

    rot_offset = 0

    def __init__(self, cfg, layer, scheme):
        super().__init__(cfg, layer, scheme)
        kw = scheme.kw
        self.d_rot = scheme.d_rot
        self.register_buffer("inv_freq", inv_frequencies(self.d_rot // 2, self.d_rot, kw["base"]), persistent=False)
        self.register_buffer("rot_heads", head_mask(cfg, layer, kw["rope_heads"], kw["rope_layers"]),
                             persistent=False)
        self._cache: dict = {}

    def angles(self, n_pos: int) -> torch.Tensor:
        """[n_pos, n_planes]: p * theta_i."""
        pos = torch.arange(n_pos, device=self.inv_freq.device, dtype=torch.float32)
        return pos[:, None] * self.inv_freq[None, :]

    def cos_sin(self, n_pos: int, dtype: torch.dtype):
        key = (n_pos, dtype, self.inv_freq.device)
        if key not in self._cache:
            ang = self.angles(n_pos).repeat_interleave(2, dim=-1)  # [pos, d_rot]
            h, dh = self.cfg.n_heads, self.cfg.d_head
            cos = torch.ones(n_pos, h, dh, device=ang.device, dtype=ang.dtype)  # fp64 in a .double() model
            sin = torch.zeros(n_pos, h, dh, device=ang.device, dtype=ang.dtype)
            rot = self.rot_heads
            cos[:, rot, : self.d_rot] = ang.cos()[:, None, :]
            sin[:, rot, : self.d_rot] = ang.sin()[:, None, :]
            self._cache = {key: (cos.to(dtype), sin.to(dtype))}
        return self._cache[key]

    def rotate(self, q, k):
        cos_q, sin_q = self.cos_sin(q.shape[1], table_dtype(q.dtype))
        cos_k, sin_k = self.cos_sin(k.shape[1], table_dtype(k.dtype))
        return rotate_pairs(q, cos_q, sin_q), rotate_pairs(k, cos_k, sin_k)


@register
class RoPE(Scheme):
    name = "rope"
    label = "RoPE"
    translation_invariant = True
    acts_on = "q,k"
    formula = "q'_m = R(m theta) q_m, k'_n = R(n theta) k_n, theta_i = base^(-2i/d_rot); q'_m.k'_n = f(m - n)"
    source = "Su et al. 2021 (RoFormer); partial RoPE: seed 003 section 5"
    extrapolation = "rotations are defined for any position; angles past training are unseen (low planes never complete a cycle)"
    rotary = True
    params = {"base": (10000.0, "frequency base"),
              "rotary_fraction": (1.0, "share of each head's dims that rotate (rounded down to pairs)"),
              "rope_heads": (None, "int or per-layer list: number of leading heads with RoPE (rest NoPE)"),
              "rope_layers": (None, "list of layers with RoPE (other layers NoPE); None = all")}
    attention_cls = RotaryAttention

    @property
    def d_rot(self) -> int:
        return 2 * int(self.kw["rotary_fraction"] * self.cfg.d_head / 2)

    def check(self):
        cfg, kw = self.cfg, self.kw
        need(cfg.d_head % 2 == 0, f"rotary schemes need an even d_head; d_model={cfg.d_model} / "
             f"n_heads={cfg.n_heads} = {cfg.d_head}. Change n_heads or d_model so d_head is even")
        need_base(self.name, kw["base"])
        need(0 < kw["rotary_fraction"] <= 1 and self.d_rot >= 2,
             f"rotary_fraction={kw['rotary_fraction']} must be in (0, 1] and leave at least one rotary pair")
        rh = kw["rope_heads"]
        if isinstance(rh, list):
            need(len(rh) == cfg.n_layers, f"rope_heads has {len(rh)} entries; give one per layer ({cfg.n_layers})")
        for k in ([] if rh is None else rh if isinstance(rh, list) else [rh]):
            need(isinstance(k, int) and 0 <= k <= cfg.n_heads, f"rope_heads entry {k!r} must be in 0..{cfg.n_heads}")
        rl = kw["rope_layers"]
        need(rl is None or isinstance(rl, list), f"rope_layers={rl!r} is not a list of layers: give a JSON list, "
             f"e.g. --set model.scheme_kwargs.rope_layers=[0,1] (layers 0..{cfg.n_layers - 1}), or leave it out")
        for l in rl or []:
            need(isinstance(l, int) and 0 <= l < cfg.n_layers, f"rope_layers entry {l!r} must be in 0..{cfg.n_layers - 1}")
