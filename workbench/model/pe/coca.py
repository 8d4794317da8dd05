"""CoCA: collinear constrained attention (Zhu et al. 2023/2024, codefuse-ai; seed 001), on top of RoPE.

    q_m = W_Q x_q[m]                                   hook_q       (strict: each plane tied, q_2j = q_2j+1)
    t_n = W_T x_kv[n]                                  hook_t       (raw coefficients, one per dim)
    c_n = dup(ReLU((t_n,2j + t_n,2j+1) / 2))           hook_k       one non-negative coefficient per rotary plane,
                                                                    duplicated over the plane's two dims
    k_{m,n} = c_n * q_m                                (the key of the pair (m, n): collinear with the query)
    a(m, n) = R(m) q_m . R(n) k_{m,n} / sqrt(d) = sum_j c_{n,j} |q_{m,j}|^2 cos((m - n) theta_j) / sqrt(d)

The N x N x d key tensor is never built. Writing |q_{m,j}|^2 e^{i m theta_j} and c_{n,j} e^{i n theta_j} as
interleaved (re, im) feature vectors turns the score into one dot product per pair (the paper's appendix C
contraction): `score_features` returns them, so the base class's SDPA fast path computes CoCA's score too.

Hooks: hook_q is the pre-rotation query, hook_k the per-plane key coefficient c_n (the pre-rotation key of the
pair (m, n) is hook_k[n] * hook_q[m], so its angle to the query is 0 in every plane: CoCA's defining property;
`pair_keys` builds it for sampled pairs), hook_rot_q = R(m) q_m and hook_rot_k = R(n) c_n (the dual form's
f(t_n, n), Theorem 1). The score is computed from hook_rot_q and hook_rot_k: |R(m) q_m|_j^2 = |q_{m,j}|^2, and
c_{n,j} e^{i n theta_j} is recovered from R(n) c_n (a plane of c is c_j (1, 1), i.e. sqrt(2) c_j e^{i pi/4}).

`strict=True` is CoCA-Strict (paper sections 3.2 and 5.3): the query is also constrained, q_2j = q_2j+1 (the
plane's two dims averaged and duplicated), the condition under which the paper's O(N d) dual implementation
Re<f(q_m, m), q_m o f(t_n, n)> equals the collinear score exactly. The default leaves the query free and computes
the exact collinear score above: the paper's formula for CoCA-Slack. It is NOT what the released slack model
computes: the official code (codefuse-ai) evaluates the dual form without tying the query's pair,

    a_released(m, n) = sum_d (R(m) q_m)_d * q_{m,d} * (R(n) c_n)_d / sqrt(d)     (`score="released"`)

which equals the collinear score only under CoCA-Strict (then both are sum_j c_{n,j} |q_{m,j}|^2 cos((m-n) theta_j)).
It is again a dot product of per-position features (f_q = R(m) q_m o q_m, f_k = R(n) c_n), so the SDPA fast path
applies. The released code pairs dims i and i + d/2 (half-split) where PE-Lab pairs 2j, 2j+1; the two layouts
differ by a fixed permutation of the query and t dims, i.e. of the columns of W_Q and W_T, whose i.i.d. init is
the same under any permutation, so PE-Lab keeps interleaved pairs (and its rotary analyses) for both scores. With
`score="released"` the key of a pair is not collinear with the query (`collinear` is False), so the initial-angle
analysis measures the angle to c_n.

Beyond the training length: the rotations are defined at any position and periodic. Since the initial angle between
query and key is 0 in every plane, each plane adds w_j cos((m - n) theta_j) with w_j >= 0: the anomalous "k border"
of RoPE (seed 001 section 2.3) cannot occur, which is what the paper credits for CoCA's extrapolation.
"""
from __future__ import annotations

import torch
from torch import nn

from ..attention import Attention, _init_uniform, heads
from ..tl import HookPoint
from .base import Scheme, need, need_base
from .registry import register
from .rope import inv_frequencies, rotate_pairs, table_dtype


def plane_mean_dup(x: torch.Tensor) -> torch.Tensor:
    """Average the two dims of every interleaved plane and write the mean into both: (a, b) -> ((a+b)/2, (a+b)/2)."""
    return ((x[..., 0::2] + x[..., 1::2]) / 2).repeat_interleave(2, dim=-1)


def pair_keys(q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """The pre-rotation key of every pair: q [b, m, h, d], c [b, n, h, d] -> k [b, m, n, h, d] = c_n * q_m.

    N x N x d memory: for diagnostics on small inputs (initial angles), never used by the forward pass."""
    return q[:, :, None] * c[:, None, :]


class CoCAAttention(Attention):
    """CoCA attention; `inv_freq` holds theta_j; `collinear = True` tells analyses that the key of a pair
    (m, n) is hook_k[n] * hook_q[m] (see `pair_keys`)."""

    def __init__(self, cfg, layer, scheme):
        super().__init__(cfg, layer, scheme)
        self.released = scheme.kw["score"] == "released"
        self.collinear = not self.released
        del self.W_K, self.b_K  # the key is built from the query and t = W_T x
        h, d, dh = cfg.n_heads, cfg.d_model, cfg.d_head
        self.W_T = nn.Parameter(torch.empty(h, d, dh))
        self.b_T = nn.Parameter(torch.zeros(h, dh))
        _init_uniform(self.W_T, d)
        self.strict = bool(scheme.kw["strict"])
        self.rot_offset, self.d_rot = 0, dh
        self.register_buffer("inv_freq", inv_frequencies(dh // 2, dh, scheme.kw["base"]), persistent=False)
        self.hook_t = HookPoint()

    # ---- steps ---------------------------------------------------------------------------------------
    def project(self, x_q, x_kv):
        q = heads(x_q, self.W_Q, self.b_Q)
        if self.strict:
            q = plane_mean_dup(q)
        t = self.hook_t(heads(x_kv, self.W_T, self.b_T))
        c = torch.relu(plane_mean_dup(t))
        v = heads(x_kv, self.W_V, self.b_V)
        return q, c, v

    def angles(self, n_pos: int) -> torch.Tensor:
        """[n_pos, 1, d/2]: p * theta_j."""
        pos = torch.arange(n_pos, device=self.inv_freq.device, dtype=torch.float32)
        return (pos[:, None] * self.inv_freq[None, :])[:, None, :]

    def rotate(self, q, k):
        out = []
        for x in (q, k):
            ang, dt = self.angles(x.shape[1]).repeat_interleave(2, dim=-1), table_dtype(x.dtype)
            out.append(rotate_pairs(x, ang.cos().to(dt), ang.sin().to(dt)))
        return tuple(out)

    def score_features(self, rq: torch.Tensor, rk: torch.Tensor):
        """Features f_q, f_k [b, pos, h, d] with f_q[m] . f_k[n] = sum_j c_{n,j} |q_{m,j}|^2 cos((m-n) theta_j).

        f_q plane j = |rq_{m,j}|^2 (cos m theta_j, sin m theta_j); f_k plane j = c_{n,j} (cos n theta_j,
        sin n theta_j), read off rk = R(n) c_n as ((r0 + r1) / 2, (r1 - r0) / 2)."""
        ang = self.angles(rq.shape[1])
        sq = rq[..., 0::2] ** 2 + rq[..., 1::2] ** 2  # |q_{m,j}|^2 (a rotation keeps it)
        f_q = torch.stack((sq * ang.cos().to(rq.dtype), sq * ang.sin().to(rq.dtype)), -1).flatten(-2)
        if self.released:  # (R(m) q_m) o q_m with q_m = R(-m) R(m) q_m, against R(n) c_n
            full, dt = ang.repeat_interleave(2, dim=-1), table_dtype(rq.dtype)
            q = rotate_pairs(rq, full.cos().to(dt), -full.sin().to(dt))
            return rq * q, rk
        r0, r1 = rk[..., 0::2], rk[..., 1::2]
        f_k = torch.stack(((r0 + r1) / 2, (r1 - r0) / 2), -1).flatten(-2)
        return f_q, f_k


@register
class CoCA(Scheme):
    name = "coca"
    label = "CoCA"
    translation_invariant = True
    acts_on = "q,k"
    formula = ("t_n = W_T x_n, c_n = dup(ReLU(mean_pair(t_n))), k_{m,n} = c_n * q_m, then RoPE; "
               "a(m,n) = sum_j c_{n,j} |q_{m,j}|^2 cos((m-n) theta_j) / sqrt(d)")
    source = "Zhu et al. 2024 (codefuse-ai), CoCA: collinear constrained attention (seed 001)"
    extrapolation = ("defined at any position; the query-key initial angle is 0 in every plane, so the score is "
                     "sum_j w_j cos((m-n) theta_j) with w_j >= 0 and the k-border anomaly of RoPE cannot occur; "
                     "past training the angles are unseen but periodic")
    rotary = True
    params = {"base": (10000.0, "RoPE frequency base"),
              "strict": (False, "CoCA-Strict: also tie the query within each plane (q_2j = q_2j+1); "
                                "default CoCA-Slack"),
              "score": ("collinear", "'collinear' (the exact collinear score, the paper's formula) or 'released' "
                                     "(the official code's dual form without tying the query pair)")}
    attention_cls = CoCAAttention

    def check(self):
        cfg = self.cfg
        need(cfg.d_head % 2 == 0, f"coca is rotary and needs an even d_head; d_model={cfg.d_model} / "
             f"n_heads={cfg.n_heads} = {cfg.d_head}. Change n_heads or d_model so d_head is even")
        need(isinstance(self.kw["strict"], bool), f"coca strict={self.kw['strict']!r} must be true or false")
        need_base("coca", self.kw["base"])
        need(self.kw["score"] in ("collinear", "released"),
             f"coca score={self.kw['score']!r} is unknown; use 'collinear' or 'released'")
