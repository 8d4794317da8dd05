"""Multi-head attention with TransformerLens hook points; schemes subclass it to add position.

A scheme overrides one or more of four steps, each with its own hooks:

    q, k, v  = project(x_q, x_kv)              hook_q, hook_k, hook_v     [batch, pos, head, d_head]
    q', k'   = rotate(q, k)                    hook_rot_q, hook_rot_k     (identity unless rotary)
    b        = pos_bias(n_q, n_k)              hook_pos_bias              [head, q_pos, k_pos] or None
    s        = scores(q', k') + b + mask       hook_attn_scores           [batch, head, q_pos, k_pos]
               (default: f_q . f_k / sqrt(width) with f_q, f_k = score_features(q', k') = (q', k'))
    z        = softmax(s) v                    hook_pattern, hook_z
    out      = sum_h z_h W_O[h] + b_O

When nothing observes the scores or the pattern and the scheme's scores are dot products of its score features
(`dot_product_scores`), the same computation runs through `torch.nn.functional.scaled_dot_product_attention`.
The mask is None when nothing is masked (no pad mask, not causal: SDPA may then take its flash kernels) and is
otherwise built once per forward in the compute dtype (`compute_dtype`), not cast again in each layer.
Attention dropout in training (p > 0) takes that path only when the run asks for it (`train.fused_attention`,
set on the model by `use_fused_dropout`): SDPA's `dropout_p` drops the same share of the weights but draws
other random numbers than the explicit path, so it changes results and is a config field.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .tl import HookPoint

MASK_VALUE = -1e9  # finite, so a fully masked row gives a uniform pattern rather than NaN
# On CPU, SDPA is slower than the explicit path only for tiny score matrices: below d_head x key positions = 256
# (d_head 8 at 24 positions: 0.94-1.08x); from d_head 8 at 48 positions on it is 1.2-2.9x faster
# (benchmarks/bench_attention.py, docs/training.md). On CUDA SDPA (flash / memory-efficient kernels) always pays.
SDPA_CPU_MIN_WORK = 256


def _init_uniform(t: torch.Tensor, fan_in: int) -> None:
    bound = 1.0 / math.sqrt(fan_in)
    nn.init.uniform_(t, -bound, bound)


class Dropout(nn.Module):
    """Inverted dropout, x * (u >= p) / (1 - p) with u ~ U[0, 1): the same op as nn.Dropout, but drawing the
    mask with `rand_like` is about twice as fast as `bernoulli_` on CPU (benchmarks/bench_train.py)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        return x * (torch.rand_like(x) >= self.p) * (1.0 / (1.0 - self.p))


def make_bias(module: nn.Module, name: str, *shape: int) -> None:
    """A zero-initialised bias: a trained parameter, or a fixed zero buffer when `cfg.attn_bias` is False."""
    if module.cfg.attn_bias:
        setattr(module, name, nn.Parameter(torch.zeros(*shape)))
    else:
        module.register_buffer(name, torch.zeros(*shape), persistent=False)


def heads(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x [batch, pos, d_model] @ W [head, d_model, d_head] + b -> [batch, pos, head, d_head], as one matmul; the
    bias added in the product's dtype (`add_bias`)."""
    h, d, e = W.shape
    return add_bias(x @ W.transpose(0, 1).reshape(d, h * e), b.flatten()).unflatten(-1, (h, e))


def add_bias(y: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """y + b in y's dtype: under bf16 autocast the product y is bf16 and an fp32 bias would promote the sum (and
    its gradient) to fp32, twice the bytes for every later read; nn.Linear casts its bias the same way. In fp32
    the cast is a no-op: the same op on the same values."""
    return y + b.to(y.dtype)


def compute_dtype(t: torch.Tensor) -> torch.dtype:
    """The dtype SDPA computes in for inputs like `t`: the autocast dtype where autocast is on, else t's."""
    where = t.device.type
    return torch.get_autocast_dtype(where) if torch.is_autocast_enabled(where) else t.dtype


def additive(mask: torch.Tensor | None, bias: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """mask + bias in `dtype` (either may be None: nothing to add)."""
    if bias is None:
        return None if mask is None else mask.to(dtype)
    return bias.to(dtype) if mask is None else mask.to(dtype) + bias.to(dtype)


def observed(hook: HookPoint) -> bool:
    """True when a TransformerLens hook or an nnsight trace is attached to this hook point."""
    return bool(hook._forward_hooks or hook._forward_pre_hooks or "forward" in hook.__dict__)


class Attention(nn.Module):
    """Plain (position-free) multi-head attention; the `nope` scheme uses it as is."""

    dot_product_scores = True  # scores = score_features dot product / sqrt(width), so SDPA may compute them
    fused_dropout = False  # attention dropout inside SDPA (train.fused_attention; see use_fused_dropout)
    sdpa = staticmethod(F.scaled_dot_product_attention)  # (q, k, v, mask, p); a CUDA pack folds it (train.packed)

    def __init__(self, cfg: ModelConfig, layer: int, scheme=None):
        super().__init__()
        self.cfg, self.layer, self.scheme = cfg, layer, scheme
        h, d, dh = cfg.n_heads, cfg.d_model, cfg.d_head
        self.W_Q = nn.Parameter(torch.empty(h, d, dh))
        self.W_K = nn.Parameter(torch.empty(h, d, dh))
        self.W_V = nn.Parameter(torch.empty(h, d, dh))
        self.W_O = nn.Parameter(torch.empty(h, dh, d))
        for name in ("b_Q", "b_K", "b_V"):
            make_bias(self, name, h, dh)
        make_bias(self, "b_O", d)
        for w in (self.W_Q, self.W_K, self.W_V):
            _init_uniform(w, d)
        _init_uniform(self.W_O, d)
        self.attn_dropout = Dropout(cfg.dropout_at("attn_weights"))
        for name in ("q", "k", "v", "rot_q", "rot_k", "pos_bias", "attn_scores", "pattern", "z"):
            setattr(self, f"hook_{name}", HookPoint())

    # ---- the four steps a scheme may override -------------------------------------------
    def project(self, x_q: torch.Tensor, x_kv: torch.Tensor):
        return heads(x_q, self.W_Q, self.b_Q), heads(x_kv, self.W_K, self.b_K), heads(x_kv, self.W_V, self.b_V)

    def rotate(self, q: torch.Tensor, k: torch.Tensor):
        return q, k

    def pos_bias(self, n_q: int, n_k: int) -> torch.Tensor | None:
        return None

    def score_features(self, q: torch.Tensor, k: torch.Tensor):
        """Per-position features whose dot product / sqrt(width) is the score; plain attention: (q', k')."""
        return q, k

    def scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        f_q, f_k = self.score_features(q, k)
        return torch.einsum("bqhe,bkhe->bhqk", f_q, f_k) / math.sqrt(f_q.shape[-1])

    # ---- forward ---------------------------------------------------------------------------
    def forward(self, x_q: torch.Tensor, x_kv: torch.Tensor, mask: torch.Tensor | None,
                kv: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """`mask`: additive [batch, 1, q_pos, k_pos] (0 where allowed, MASK_VALUE where not), or None (nothing
        masked). `kv`: this layer's (k, v) already projected from x_kv (`PEClassifier.memory_kv`), or None."""
        q, k, v = self.project(x_q, x_kv) if kv is None else (heads(x_q, self.W_Q, self.b_Q), *kv)
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        rq, rk = self.rotate(q, k)
        rq, rk = self.hook_rot_q(rq), self.hook_rot_k(rk)
        bias = self.pos_bias(q.shape[1], k.shape[1])
        if bias is not None:
            bias = self.hook_pos_bias(bias).unsqueeze(0)
        if self.fast_path_ok(k.shape[1], k.device):
            f_q, f_k = self.score_features(rq, rk)
            p = self.attn_dropout.p if self.training else 0.0
            add = additive(mask, bias, compute_dtype(f_q) if mask is None else mask.dtype)
            if add is not None and not torch.is_autocast_enabled(f_q.device.type):
                add = add.to(f_q.dtype)  # under autocast SDPA casts it (a no-op: built in that dtype)
            z = self.sdpa(f_q.transpose(1, 2), f_k.transpose(1, 2), v.transpose(1, 2), add, p).transpose(1, 2)
        else:
            s = self.scores(rq, rk)
            add = additive(mask, bias, torch.promote_types(s.dtype, torch.float32))
            s = self.hook_attn_scores(s if add is None else s + add)
            pattern = self.hook_pattern(torch.softmax(s, dim=-1))
            z = torch.einsum("bhqk,bkhe->bqhe", self.attn_dropout(pattern), v)
        z = self.hook_z(z)
        return add_bias(z.flatten(-2) @ self.W_O.flatten(0, 1), self.b_O)

    def fast_path_ok(self, n_k: int | None = None, device: torch.device | None = None) -> bool:
        """SDPA may compute this layer (nothing observes scores or pattern; no attention dropout due in training
        unless `fused_dropout`) and, given the key length and device, is the faster path there (CPU:
        d_head * n_k >= SDPA_CPU_MIN_WORK)."""
        if n_k is not None and device is not None and device.type == "cpu" and \
                self.cfg.d_head * n_k < SDPA_CPU_MIN_WORK:
            return False
        dropout_due = self.training and self.attn_dropout.p > 0
        return (self.cfg.use_sdpa and self.dot_product_scores and (self.fused_dropout or not dropout_due)
                and not observed(self.hook_attn_scores) and not observed(self.hook_pattern))


def use_fused_dropout(model: nn.Module, on: bool) -> None:
    """Let (on) or forbid every attention layer of `model` to apply its attention dropout inside SDPA in
    training: the run's `train.fused_attention`. Equal results at dropout 0; other random draws at p > 0."""
    for m in model.modules():
        if isinstance(m, Attention):
            m.fused_dropout = bool(on)
