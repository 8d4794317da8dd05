"""MLA: DeepSeek-V3 multi-head latent attention with a decoupled RoPE part (DeepSeek-AI 2024; seed 003).

Per layer, with x_q the query input and x_kv the key/value input (`paper` arch: x_q = LN1(x_l), x_kv = M):

    c_q  = x_q  W_DQ                    [batch, pos, d_cq]       hook_q_latent
    c_kv = x_kv W_DKV                   [batch, pos, d_c]        hook_kv_latent
    q_c  = c_q W_UQ[h],  q_r = c_q W_QR[h]         (per head: content part + rotary part)
    k_c  = c_kv W_UK[h], k_r = x_kv W_KR           (ONE rotary key, shared by every head)
    v    = c_kv W_UV[h]
    q = [q_c ; q_r],  k = [k_c ; k_r]   [batch, pos, head, d_head + d_rope]      hook_q, hook_k
    q' = [q_c ; R(m) q_r], k' = [k_c ; R(n) k_r]                                 hook_rot_q, hook_rot_k
    score = q'_m . k'_n / sqrt(d_head + d_rope)

R is a true RoPE rotation on interleaved pairs (rope.py), theta_i = base^(-2i/d_rope). The authors' MLA script
mixes sin and cos of different frequencies; PE-Lab does not by default.

The core paper's released MLA script, each an option (`workbench train --fidelity authors-mla` sets them all):
`shared_rope_q=True`: one rotary query q_r = c_q W_QR per token, shared by every head (like the rotary key);
`rope_read="authors"`: plane i is turned by (c_i, s_i) read with stride 2 from the table T(p) = [sin(p theta) ;
cos(p theta)] (s_i = T[2i], c_i = T[2i+1]), so sine and cosine come from different frequencies (or a sine serves as
a cosine) and c_i^2 + s_i^2 != 1: not a rotation, not norm-preserving, and q'.k' is no longer a function of m - n;
`score_scale_dim=2*d_head`: score = q'.k' / sqrt(score_scale_dim) (the authors' 1/sqrt(2 d_head));
`input_pe="learned-zero"`: a trained absolute position embedding, zero at init, added to the token embeddings.
The authors write the rotated halves as [evens ; odds] rather than interleaved; q and k share that permutation,
so the scores are the same. Content dims per head are d_head = d_model / n_heads
(as DeepSeek's d_h), the rotary dims d_rope default to d_head/2 rounded down to an even number (DeepSeek's
d_h^R = d_h / 2), values keep d_head so W_O is [head, d_head, d_model]. The RMSNorms DeepSeek applies to the
latents are left out (the classifier already normalises the query input). Position enters only through the
d_rope rotary dims: in the rotary part q'_m . k'_n depends on m - n only, the content part is position-free.

Beyond the training length: the rotary dims behave as RoPE (rotations are defined at any position; the angles of
the low-frequency planes were never seen in training), the content dims do not see position at all.
"""
from __future__ import annotations

import torch
from torch import nn

from ..attention import Attention, _init_uniform
from ..tl import HookPoint
from .base import Scheme, need, need_base
from .learned import LearnedPE
from .registry import register
from .rope import inv_frequencies, rotate_pairs, table_dtype

DEFAULT_D_C = 128
ROPE_READS = ("rotation", "authors")
INPUT_PES = ("none", "learned-zero")


def authors_cos_sin(angles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The authors' stride-2 read of T = [sin(angles) ; cos(angles)] (angles [pos, n]): cos_i = T[2i+1],
    sin_i = T[2i], i = 0..n-1, each [pos, n]."""
    table = torch.cat((angles.sin(), angles.cos()), -1)
    return table[:, 1::2], table[:, 0::2]


class MLAAttention(Attention):
    """Latent attention; `rot_offset`/`d_rot` say which dims of hook_q/hook_k rotate (the last d_rope)."""

    def __init__(self, cfg, layer, scheme):
        super().__init__(cfg, layer, scheme)
        for name in ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"):  # replaced by the latent projections
            delattr(self, name)
        h, d, dh = cfg.n_heads, cfg.d_model, cfg.d_head
        d_c, d_cq, d_rope = scheme.d_c, scheme.d_cq, scheme.d_rope
        self.d_c, self.d_cq, self.d_rope = d_c, d_cq, d_rope
        self.rot_offset, self.d_rot = dh, d_rope
        self.W_DQ = nn.Parameter(torch.empty(d, d_cq))
        self.W_UQ = nn.Parameter(torch.empty(h, d_cq, dh))
        self.shared_rope_q = bool(scheme.kw["shared_rope_q"])
        self.W_QR = nn.Parameter(torch.empty(d_cq, d_rope) if self.shared_rope_q else torch.empty(h, d_cq, d_rope))
        self.W_DKV = nn.Parameter(torch.empty(d, d_c))
        self.W_UK = nn.Parameter(torch.empty(h, d_c, dh))
        self.W_UV = nn.Parameter(torch.empty(h, d_c, dh))
        self.W_KR = nn.Parameter(torch.empty(d, d_rope))
        for w, fan_in in ((self.W_DQ, d), (self.W_UQ, d_cq), (self.W_QR, d_cq), (self.W_DKV, d),
                          (self.W_UK, d_c), (self.W_UV, d_c), (self.W_KR, d)):
            _init_uniform(w, fan_in)
        self.register_buffer("inv_freq", inv_frequencies(d_rope // 2, d_rope, scheme.kw["base"]), persistent=False)
        self.hook_q_latent, self.hook_kv_latent = HookPoint(), HookPoint()

    def project(self, x_q, x_kv):
        c_q = self.hook_q_latent(x_q @ self.W_DQ)
        c_kv = self.hook_kv_latent(x_kv @ self.W_DKV)
        q_c = torch.einsum("bpc,hce->bphe", c_q, self.W_UQ)
        if self.shared_rope_q:
            q_r = (c_q @ self.W_QR).unsqueeze(2).expand(-1, -1, self.cfg.n_heads, -1)
        else:
            q_r = torch.einsum("bpc,hce->bphe", c_q, self.W_QR)
        k_c = torch.einsum("bpc,hce->bphe", c_kv, self.W_UK)
        v = torch.einsum("bpc,hce->bphe", c_kv, self.W_UV)
        k_r = (x_kv @ self.W_KR).unsqueeze(2).expand(-1, -1, self.cfg.n_heads, -1)
        return torch.cat((q_c, q_r), -1), torch.cat((k_c, k_r), -1), v

    def cos_sin(self, n_pos: int, dtype: torch.dtype):
        """cos, sin [pos, 1, d_rope] (each plane's value on both of its dims)."""
        pos = torch.arange(n_pos, device=self.inv_freq.device, dtype=torch.float32)
        ang = pos[:, None] * self.inv_freq[None, :]  # [pos, planes]
        cos, sin = authors_cos_sin(ang) if self.scheme.kw["rope_read"] == "authors" else (ang.cos(), ang.sin())
        return (cos.repeat_interleave(2, -1)[:, None, :].to(dtype), sin.repeat_interleave(2, -1)[:, None, :].to(dtype))

    def rotate(self, q, k):
        o = self.rot_offset
        cq, sq = self.cos_sin(q.shape[1], table_dtype(q.dtype))
        ck, sk = self.cos_sin(k.shape[1], table_dtype(k.dtype))
        return (torch.cat((q[..., :o], rotate_pairs(q[..., o:], cq, sq)), -1),
                torch.cat((k[..., :o], rotate_pairs(k[..., o:], ck, sk)), -1))

    def score_features(self, q, k):
        """(q' sqrt(width / score_scale_dim), k'), so that the base `dot / sqrt(width)` (and SDPA, which takes
        values of another width) gives q'.k' / sqrt(score_scale_dim); width = d_head + d_rope by default."""
        scale_dim = self.scheme.kw["score_scale_dim"]
        if scale_dim is None:
            return q, k
        return q * (q.shape[-1] / scale_dim) ** 0.5, k


@register
class MLA(Scheme):
    name = "mla"
    label = "MLA"
    translation_invariant = True
    acts_on = "q,k"
    formula = ("c_q = W_DQ x_q, c_kv = W_DKV x_kv; q = [W_UQ c_q ; R(m) W_QR c_q], k = [W_UK c_kv ; R(n) W_KR x_kv] "
               "(rotary key shared by all heads), v = W_UV c_kv; score = q.k / sqrt(d_head + d_rope)")
    source = "DeepSeek-AI 2024 (DeepSeek-V2/V3 multi-head latent attention); seed 003 (MLA runs)"
    extrapolation = ("only the decoupled d_rope dims carry position, with RoPE's behaviour: defined at any "
                     "position, unseen angles past training; the content dims are position-free. With "
                     "input_pe='learned-zero' it cannot: the trained position table has no rows past max_len")
    rotary = True
    params = {"d_c": (DEFAULT_D_C, "kv latent width; the default 128 is clamped to d_model//2 on small models, "
                                   "an explicit value must be in 1..d_model"),
              "d_cq": (None, "query latent width (None = d_c)"),
              "d_rope": (None, "rotary dims per head (even; None = d_head//2 rounded down to even, at least 2)"),
              "base": (10000.0, "RoPE frequency base of the rotary part"),
              "shared_rope_q": (False, "one rotary query per token shared by all heads (the authors' script); "
                                       "default: per-head rotary queries as DeepSeek"),
              "rope_read": ("rotation", "'rotation' (true RoPE) or 'authors' (stride-2 read of a [sin ; cos] "
                                        "table: mismatched frequencies, not a rotation)"),
              "score_scale_dim": (None, "score = q.k / sqrt(score_scale_dim); None = d_head + d_rope "
                                        "(the authors: 2 d_head)"),
              "input_pe": ("none", "'none' or 'learned-zero' (a trained absolute position embedding, zero init, "
                                   "added to the input: the authors' script; cannot run past max_len)")}
    attention_cls = MLAAttention

    def __init__(self, cfg):
        super().__init__(cfg)
        self.can_extrapolate = self.kw["input_pe"] == "none"  # a trained position table ends at max_len

    def input_pe(self):
        return LearnedPE(self.cfg.max_len, self.cfg.d_model, zero_init=True) if self.kw["input_pe"] == "learned-zero" \
            else None

    @property
    def d_c(self) -> int:
        given = self.cfg.scheme_kwargs.get("d_c")
        return int(given) if given is not None else max(1, min(DEFAULT_D_C, self.cfg.d_model // 2))

    @property
    def d_cq(self) -> int:
        return self.d_c if self.kw["d_cq"] is None else int(self.kw["d_cq"])

    @property
    def d_rope(self) -> int:
        if self.kw["d_rope"] is not None:
            return int(self.kw["d_rope"])
        return max(2, 2 * (self.cfg.d_head // 4))

    def check(self):
        d = self.cfg.d_model
        for key in ("d_c", "d_cq", "d_rope"):
            v = self.kw[key]
            need(v is None or (isinstance(v, int) and not isinstance(v, bool)),
                 f"mla {key}={v!r} must be an integer (or None for the default)")
        need(1 <= self.d_c <= d, f"mla d_c={self.d_c} must be in 1..d_model={d}; a latent wider than the "
             f"stream compresses nothing. Choose d_c <= {d} (the paper uses d_model/2)")
        need(1 <= self.d_cq <= d, f"mla d_cq={self.d_cq} must be in 1..d_model={d}")
        need(self.d_rope >= 2 and self.d_rope % 2 == 0,
             f"mla d_rope={self.d_rope} must be an even number >= 2 (rotary dims come in pairs); "
             f"change d_rope, e.g. to {max(2, self.d_rope - self.d_rope % 2)}")
        need_base("mla", self.kw["base"])
        need(isinstance(self.kw["shared_rope_q"], bool), f"mla shared_rope_q={self.kw['shared_rope_q']!r} must be "
             "true or false")
        need(self.kw["rope_read"] in ROPE_READS, f"mla rope_read={self.kw['rope_read']!r} is unknown; use one of "
             f"{ROPE_READS}")
        v = self.kw["score_scale_dim"]
        need(v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
             f"mla score_scale_dim={v!r} must be a positive integer or None (= d_head + d_rope)")
        need(self.kw["input_pe"] in INPUT_PES, f"mla input_pe={self.kw['input_pe']!r} is unknown; use one of "
             f"{INPUT_PES}")
