"""Attention for short sequences as one Triton kernel a (sequence, head): the `triton` backend of
`train.loop.sdpa_backend_context` (issue 41).

    z = dropout_p(softmax(q k^T / sqrt(d_k))) v        (Vaswani et al. 2017, eq. 1; SDPA's computation)

At the paper preset (128 positions, d_head 16) the flash kernels SDPA picks tile the head dimension by 64 and keep
the scores in blocks: on an H200 cuDNN's forward and backward were a third of RoPE's compiled step
(benchmarks/measured/h200-2026-11-28). Here a whole row of scores fits one block (keys <= 128), so a program holds
one head's keys and values and a block of BM query rows, computes the row's softmax exactly (no running maximum),
and the backward recomputes it from the stored log-sum-exp: FlashAttention-2's backward (Dao 2023, alg. 2) with one
key block, in [keys, queries] tiles, D_i = dO_i . O_i for the softmax's row sums. Head sizes are zero-padded to a
power of two >= 16 (zeros add nothing to a dot product), so MLA's wider queries and keys run too.

Dropout (p > 0): the weights kept where u >= p are scaled by 1 / (1 - p). The forward takes the key block in four
quarters and draws u with one philox call (10 rounds) for four weights, one in each quarter (`_fwd`, `_kept_q`); it
stores the keep mask as bits (1/32 of the weights' bytes), which the backward reads back (`_kept_t`): a quarter of
a philox call a weight in all, where drawing u for each weight in both passes took two
(benchmarks/measured/cpu-triton-2026-11-29). The seed is drawn from torch's generator on the device (no host
read). The same distribution as SDPA's dropout, other random numbers (as each SDPA backend draws its own): another
backend, a process option (run.json `sdpa_backend`), not a config field.

Calls it cannot run go to `F.scaled_dot_product_attention` unchanged: a mask or bias, more than 128 keys, query and
key lengths that differ, tensors spanning 2^31 elements or more (int32 indices), or neither CUDA nor Triton's
interpreter (`TRITON_INTERPRET=1`, set before this module is imported: how the CPU tests run the kernels).
"""
from __future__ import annotations

import contextlib
import math
import os

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from .attention import Attention, compute_dtype

MAX_KEYS = 128  # a whole row of scores in one block
# Query rows a program takes at a time and its warps, chosen per (positions, widths, dropout or not) by Triton's
# autotuner on the GPU (each tried once per process, a few seconds; the interpreter, for the CPU tests, takes the
# first). Only configs that spill no register at the paper's shapes, with or without dropout, compiled for sm_90
# (benchmarks/triton_resources.py; tests/test_triton_attention.py checks it): BM 32 at 2 warps, 64 at 4, 128 at 8
# or 16 spill in the backward.
_CONFIGS = [triton.Config({"BM": bm}, num_warps=w) for bm, w in ((32, 8), (64, 8), (16, 4))]
_TUNE = _CONFIGS[:1] if os.environ.get("TRITON_INTERPRET") == "1" else _CONFIGS


@triton.jit
def _kept_t(BITS, bh, L, rows, BM: tl.constexpr, BL: tl.constexpr):
    """The keep mask the forward stored as bits (`_kept_q`), read back transposed: [BL keys, BM query rows]."""
    NW: tl.constexpr = BL // 32
    words = tl.load(BITS + (bh * L + rows[None, :]) * NW + tl.arange(0, NW)[:, None])  # [NW, BM]
    bits = (words[:, None, :] >> tl.arange(0, 32)[None, :, None]) & 1  # [NW, 32, BM]: key 32 w + b
    return tl.reshape(bits, (BL, BM)) != 0


@triton.jit
def _quarter(K, V, kb, vb, sk_l, sv_l, q, t, L, DK, DV, scale, C: tl.constexpr, BDK: tl.constexpr,
             BDV: tl.constexpr):
    """Quarter t of the key block: its keys' scores for q ([BM, C], -inf past L) and its values [C, BDV]."""
    cols, ek, ev = t * C + tl.arange(0, C), tl.arange(0, BDK), tl.arange(0, BDV)
    cin = cols < L
    k = tl.load(K + kb + cols[:, None] * sk_l + ek[None, :], cin[:, None] & (ek[None, :] < DK), 0.0)
    v = tl.load(V + vb + cols[:, None] * sv_l + ev[None, :], cin[:, None] & (ev[None, :] < DV), 0.0)
    return tl.where(cin[None, :], tl.dot(q, tl.trans(k)) * scale, float("-inf")), v


@triton.jit
def _kept_q(r, thr, t, words, C: tl.constexpr, NW: tl.constexpr):
    """Quarter t's keep mask from its philox numbers r (top 24 bits >= thr), and the bit words with its bits set."""
    c = tl.arange(0, C)
    keep = (r >> 8).to(tl.int32) >= thr
    bits = tl.sum(keep.to(tl.int32) << ((t * C + c) % 32)[None, :], 1)
    return keep, words | tl.where(tl.arange(0, NW)[None, :] == (t * C) // 32, bits[:, None], 0)


@triton.autotune(configs=_TUNE, key=["L", "DK", "DV", "DROP"])
@triton.jit
def _fwd(Q, K, V, O, LSE, SEED, BITS, sq_b, sq_l, sq_h, sk_b, sk_l, sk_h, sv_b, sv_l, sv_h, so_b, so_l, so_h,
         H, L, DK, DV, scale, p, thr, BM: tl.constexpr, BL: tl.constexpr, BDK: tl.constexpr, BDV: tl.constexpr,
         DROP: tl.constexpr):
    """The key block in four quarters of C = BL / 4 keys (one philox call draws one weight of each): the row's
    softmax over all four, exact; o = sum over quarters of the dropped weights times the quarter's values."""
    C: tl.constexpr = BL // 4
    NW: tl.constexpr = BL // 32
    bh = tl.program_id(0)
    b, h = bh // H, bh % H
    rows = tl.program_id(1) * BM + tl.arange(0, BM)
    ek, ev = tl.arange(0, BDK), tl.arange(0, BDV)
    rin = rows < L
    q = tl.load(Q + b * sq_b + h * sq_h + rows[:, None] * sq_l + ek[None, :], rin[:, None] & (ek[None, :] < DK), 0.0)
    kb, vb = b * sk_b + h * sk_h, b * sv_b + h * sv_h
    s0, v0 = _quarter(K, V, kb, vb, sk_l, sv_l, q, 0, L, DK, DV, scale, C, BDK, BDV)
    s1, v1 = _quarter(K, V, kb, vb, sk_l, sv_l, q, 1, L, DK, DV, scale, C, BDK, BDV)
    s2, v2 = _quarter(K, V, kb, vb, sk_l, sv_l, q, 2, L, DK, DV, scale, C, BDK, BDV)
    s3, v3 = _quarter(K, V, kb, vb, sk_l, sv_l, q, 3, L, DK, DV, scale, C, BDK, BDV)
    m = tl.maximum(tl.maximum(tl.max(s0, 1), tl.max(s1, 1)), tl.maximum(tl.max(s2, 1), tl.max(s3, 1)))
    e0, e1 = tl.exp(s0 - m[:, None]), tl.exp(s1 - m[:, None])
    e2, e3 = tl.exp(s2 - m[:, None]), tl.exp(s3 - m[:, None])
    total = tl.sum(e0, 1) + tl.sum(e1, 1) + tl.sum(e2, 1) + tl.sum(e3, 1)
    if DROP:
        inv = (1.0 / (total * (1.0 - p)))[:, None]
        r0, r1, r2, r3 = tl.randint4x(tl.load(SEED), (bh * L + rows[:, None]) * C + tl.arange(0, C)[None, :])
        words = tl.zeros((BM, NW), dtype=tl.int32)
        keep0, words = _kept_q(r0, thr, 0, words, C, NW)
        keep1, words = _kept_q(r1, thr, 1, words, C, NW)
        keep2, words = _kept_q(r2, thr, 2, words, C, NW)
        keep3, words = _kept_q(r3, thr, 3, words, C, NW)
        tl.store(BITS + (bh * L + rows[:, None]) * NW + tl.arange(0, NW)[None, :], words, rin[:, None])
        w0, w1 = tl.where(keep0, e0 * inv, 0.0), tl.where(keep1, e1 * inv, 0.0)
        w2, w3 = tl.where(keep2, e2 * inv, 0.0), tl.where(keep3, e3 * inv, 0.0)
    else:
        inv = (1.0 / total)[:, None]
        w0, w1, w2, w3 = e0 * inv, e1 * inv, e2 * inv, e3 * inv
    o = tl.dot(w0.to(v0.dtype), v0)
    o = tl.dot(w1.to(v1.dtype), v1, o)
    o = tl.dot(w2.to(v2.dtype), v2, o)
    o = tl.dot(w3.to(v3.dtype), v3, o)
    tl.store(O + b * so_b + h * so_h + rows[:, None] * so_l + ev[None, :], o.to(O.dtype.element_ty),
             rin[:, None] & (ev[None, :] < DV))
    tl.store(LSE + bh * L + rows, m + tl.log(total), rin)


@triton.autotune(configs=_TUNE, key=["L", "DK", "DV", "DROP"])
@triton.jit
def _bwd(Q, K, V, O, DO, LSE, BITS, DQ, DKey, DVal, sq_b, sq_l, sq_h, sk_b, sk_l, sk_h, sv_b, sv_l, sv_h,
         so_b, so_l, so_h, sd_b, sd_l, sd_h, gk_b, gk_l, gk_h, gv_b, gv_l, gv_h, H, L, DK, DV, scale, p,
         BM: tl.constexpr, BL: tl.constexpr, BDK: tl.constexpr, BDV: tl.constexpr, DROP: tl.constexpr):
    """dV = P_d^T dO, dS = P * (dP_d - D), dK = dS^T Q / sqrt(d_k), dQ = dS K / sqrt(d_k), with P_d the dropped
    weights, dP_d = dO V^T through the same mask and D_i = dO_i . O_i (= sum_j P_ij dP_d,ij, dropout or not);
    computed in [keys, queries] tiles, which feed every product as they are (no BL x BM tile is transposed)."""
    bh = tl.program_id(0)
    b, h = bh // H, bh % H
    cols, ek, ev = tl.arange(0, BL), tl.arange(0, BDK), tl.arange(0, BDV)
    cin = cols < L
    kmask, vmask = cin[:, None] & (ek[None, :] < DK), cin[:, None] & (ev[None, :] < DV)
    k = tl.load(K + b * sk_b + h * sk_h + cols[:, None] * sk_l + ek[None, :], kmask, 0.0)
    v = tl.load(V + b * sv_b + h * sv_h + cols[:, None] * sv_l + ev[None, :], vmask, 0.0)
    kt = tl.trans(k)
    dk = tl.zeros((BL, BDK), dtype=tl.float32)
    dv = tl.zeros((BL, BDV), dtype=tl.float32)
    for m0 in range(0, L, BM):
        rows = m0 + tl.arange(0, BM)
        rin = rows < L
        qmask, omask = rin[:, None] & (ek[None, :] < DK), rin[:, None] & (ev[None, :] < DV)
        q = tl.load(Q + b * sq_b + h * sq_h + rows[:, None] * sq_l + ek[None, :], qmask, 0.0)
        do = tl.load(DO + b * sd_b + h * sd_h + rows[:, None] * sd_l + ev[None, :], omask, 0.0)
        o = tl.load(O + b * so_b + h * so_h + rows[:, None] * so_l + ev[None, :], omask, 0.0)
        delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)
        lse = tl.load(LSE + bh * L + rows, rin, 0.0)
        pt = tl.exp(tl.where(cin[:, None], tl.dot(k, tl.trans(q)) * scale, float("-inf")) - lse[None, :])
        dpt = tl.dot(v, tl.trans(do))  # d loss / d (dropped weights), transposed
        if DROP:
            keep = _kept_t(BITS, bh, L, tl.where(rin, rows, 0), BM, BL)
            pdt = tl.where(keep, pt / (1.0 - p), 0.0)
            dpt = tl.where(keep, dpt / (1.0 - p), 0.0)
        else:
            pdt = pt
        dv += tl.dot(pdt.to(do.dtype), do)
        dst = (pt * (dpt - delta[None, :])).to(q.dtype)  # softmax's backward: d loss / d scores, transposed
        dk += tl.dot(dst, q)
        dqt = tl.dot(kt, dst) * scale
        tl.store(DQ + b * gk_b + h * gk_h + rows[None, :] * gk_l + ek[:, None], dqt.to(DQ.dtype.element_ty),
                 tl.trans(qmask))
    tl.store(DKey + b * gk_b + h * gk_h + cols[:, None] * gk_l + ek[None, :], (dk * scale).to(DKey.dtype.element_ty),
             kmask)
    tl.store(DVal + b * gv_b + h * gv_h + cols[:, None] * gv_l + ev[None, :], dv.to(DVal.dtype.element_ty), vmask)


def _blocks(L: int, dk: int, dv: int) -> dict:
    """The block sizes: every key position (BL, >= 64: a quarter of it is a product's width, >= 16) and the
    zero-padded widths (BDK, BDV), powers of two >= 16."""
    return {"BL": max(64, triton.next_power_of_2(L)), "BDK": max(16, triton.next_power_of_2(dk)),
            "BDV": max(16, triton.next_power_of_2(dv))}


_TIMINGS: dict[str, dict[str, dict[str, list[float]]]] = {"forward": {}, "backward": {}}
_NOTED: dict[str, object] = {}  # per kernel, the autotuner's timings object last read (it makes a new one per tuning)


def _note_timings(name: str, kernel) -> None:
    """Keep what the autotuner measured for the key it tuned last (Triton keeps only the latest `configs_timings`),
    once per key: {config: its timings in ms}. Called after every launch: a call that tuned nothing reads one
    attribute and returns."""
    timings = getattr(kernel, "configs_timings", None)
    if not timings or timings is _NOTED.get(name) or not kernel.cache:
        return
    _NOTED[name] = timings
    ms = {str(c): list(t) if isinstance(t, (list, tuple)) else [t] for c, t in timings.items()}
    _TIMINGS[name].setdefault(str(next(reversed(kernel.cache))), ms)


def tuned() -> dict:
    """The block of query rows and the warps the autotuner chose, per kernel and key (L, d_k, d_v, dropout,
    dtypes), with every config's measured ms (`_note_timings`); with one config to choose from (the interpreter),
    {"only": it}."""
    return {name: {str(k): {"chosen": str(c), "ms": _TIMINGS[name].get(str(k), {})} for k, c in kernel.cache.items()}
            if len(kernel.configs) > 1 else {"only": str(kernel.configs[0])}
            for name, kernel in (("forward", _fwd), ("backward", _bwd))}


def _unit_last(*ts: torch.Tensor) -> list[torch.Tensor]:
    """Each tensor with its last dim contiguous (the kernels index it as 0, 1, 2, ...), copied only where not."""
    return [t if t.stride(-1) == 1 else t.contiguous() for t in ts]


def _strides(t: torch.Tensor) -> tuple[int, int, int]:
    return t.stride(0), t.stride(1), t.stride(2)


def _bits(B: int, H: int, L: int, BL: int, p: float, like: torch.Tensor) -> torch.Tensor:
    """Dropout's keep bits, [batch * head, pos, BL / 32] int32 (bit j % 32 of word j // 32: key j kept; `_kept_q`);
    an empty one without dropout."""
    return torch.empty((B * H, L, BL // 32) if p > 0 else (0,), dtype=torch.int32, device=like.device)


@torch.library.custom_op("pelab::triton_attention", mutates_args=())
def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seed: torch.Tensor, p: float
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k [batch, pos, head, d_k], v [batch, pos, head, d_v] (any strides; a last dim that is not contiguous is
    copied) -> (z [batch, pos, head, d_v], contiguous; the rows' log-sum-exp [batch * head, pos], fp32; dropout's
    keep bits, `_bits`)."""
    q, k, v = _unit_last(q, k, v)
    B, L, H, dk = q.shape
    dv = v.shape[-1]
    z = torch.empty(B, L, H, dv, dtype=q.dtype, device=q.device)
    lse = torch.empty(B * H, L, dtype=torch.float32, device=q.device)
    kw = _blocks(L, dk, dv)
    bits = _bits(B, H, L, kw["BL"], p, q)
    grid = lambda meta: (B * H, triton.cdiv(L, meta["BM"]))  # noqa: E731 (a block of query rows a program)
    _fwd[grid](q, k, v, z, lse, seed, bits, *_strides(q), *_strides(k), *_strides(v), *_strides(z), H, L, dk, dv,
               1.0 / math.sqrt(dk), p, int(p * 2 ** 24), DROP=p > 0, **kw)
    _note_timings("forward", _fwd)
    return z, lse, bits


@_attention.register_fake
def _(q, k, v, seed, p):
    B, L, H, dk = q.shape
    return (q.new_empty(B, L, H, v.shape[-1]), q.new_empty(B * H, L, dtype=torch.float32),
            _bits(B, H, L, _blocks(L, dk, v.shape[-1])["BL"], p, q))


@torch.library.custom_op("pelab::triton_attention_backward", mutates_args=())
def _attention_backward(dz: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, z: torch.Tensor,
                        lse: torch.Tensor, bits: torch.Tensor, p: float
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients of q, k, v (their shapes and dtypes) given dz, from the forward's output, log-sum-exp and
    keep bits."""
    dz, q, k, v, z = _unit_last(dz, q, k, v, z)
    B, L, H, dk = q.shape
    dv = v.shape[-1]
    kw = _blocks(L, dk, dv)
    gq, gk, gv = (torch.empty(t.shape, dtype=t.dtype, device=t.device) for t in (q, k, v))  # contiguous
    _bwd[(B * H,)](q, k, v, z, dz, lse, bits, gq, gk, gv, *_strides(q), *_strides(k), *_strides(v), *_strides(z),
                   *_strides(dz), *_strides(gk), *_strides(gv), H, L, dk, dv, 1.0 / math.sqrt(dk), p, DROP=p > 0,
                   **kw)
    _note_timings("backward", _bwd)
    return gq, gk, gv


@_attention_backward.register_fake
def _(dz, q, k, v, z, lse, bits, p):
    return (torch.empty(q.shape, dtype=q.dtype, device=q.device), torch.empty(k.shape, dtype=k.dtype, device=k.device),
            torch.empty(v.shape, dtype=v.dtype, device=v.device))


def _setup(ctx, inputs, output):
    q, k, v, _seed, p = inputs
    ctx.save_for_backward(q, k, v, *output)
    ctx.p = p


def _backward(ctx, dz, _dlse, _dbits):
    q, k, v, z, lse, bits = ctx.saved_tensors
    return (*_attention_backward(dz, q, k, v, z, lse, bits, ctx.p), None, None)


_attention.register_autograd(_backward, setup_context=_setup)


def _addressable(*ts) -> bool:
    """Every element of each tensor lies less than 2^31 elements from its first: the kernels index in int32 (a
    layer's keys and values of the paper arch are views into all six layers', 12 x d_model wide, so a batch of
    about 5,500 at 128 positions would already pass it)."""
    return all(sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride())) < 2 ** 31 for t in ts)


def runs_here(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> bool:
    """True when the kernel can take this call ([batch, head, pos, d] as SDPA's): no mask, as many queries as keys,
    at most MAX_KEYS of them, every index within int32 (`_addressable`; the philox counters too), on CUDA or under
    Triton's interpreter."""
    B, H, L, _ = q.shape
    return (mask is None and k.shape[2] == L and L <= MAX_KEYS and B * H * MAX_KEYS ** 2 < 2 ** 31
            and _addressable(q, k, v) and (q.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
              dropout_p: float = 0.0) -> torch.Tensor:
    """`F.scaled_dot_product_attention(q, k, v, mask, dropout_p)` ([batch, head, pos, d]), by the kernel where
    `runs_here`, in the autocast dtype where autocast is on (as SDPA computes)."""
    if not runs_here(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    dtype = compute_dtype(q)
    qb, kb, vb = (t.to(dtype).transpose(1, 2) for t in (q, k, v))  # [batch, pos, head, d]: the model's layout
    seed = (torch.randint(0, 2 ** 31 - 1, (1,), device=q.device) if dropout_p > 0
            else torch.zeros(1, dtype=torch.int64, device=q.device))
    return _attention(qb, kb, vb, seed, float(dropout_p))[0].transpose(1, 2)


@contextlib.contextmanager
def triton_attention():
    """Every attention layer's SDPA call (`Attention.sdpa`) goes to `attention` while inside."""
    before = Attention.__dict__["sdpa"]
    Attention.sdpa = staticmethod(attention)
    try:
        yield
    finally:
        Attention.sdpa = before
