"""Spectral / Toeplitz analysis of the attention logits (seed 003, section 3 and App. B).

Logits: `hook_attn_scores` on the entries the mask allows (query and key non-pad, key <= query in the
decoder). There the additive mask is exactly 0, so these are the pre-softmax scores including any
positional bias (`hook_pos_bias`), before masking -- for every scheme, rotary or not.

Per head (pooled over the sampled examples):

    profile t_d       mean logit on diagonal d = k - q (the Toeplitz part, "relative-offset profile")
    explained_var     1 - sum (S - t_{k-q})^2 / sum (S - mean S)^2   share of logit variance the Toeplitz part explains
    explained_var_per_example   the same with the diagonal means fitted per example (content-relative
                      structure of each sequence counts as Toeplitz too), averaged over examples
    eig_min/eig_max/eig_range   eigenvalues of the symmetric part (T + T^T)/2 of the n x n Toeplitz matrix
                      T[i, j] = t_{j-i}, n = the longest sequence seen
    cond              condition number sigma_max / sigma_min of T

`hadamard_check` is the numerical check of Lemma B.1 / Proposition B.3 (no model needed).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from scipy.linalg import toeplitz

from .common import batches, cache_hooks, evaluating, rope_frequencies, split_xy, subsample, valid_pairs


def toeplitz_from_profile(profile: dict[int, float] | np.ndarray, n: int) -> np.ndarray:
    """T[i, j] = t_{j - i} from a profile array indexed by offset + (n - 1) (NaN -> 0)."""
    t = np.nan_to_num(np.asarray(profile, dtype=np.float64))
    col = t[n - 1::-1]  # offsets 0, -1, ..., -(n-1): T[i, 0] = t_{-i}
    row = t[n - 1:]  # offsets 0, 1, ..., n-1
    return toeplitz(col, row)


def toeplitz_spectrum(T: np.ndarray) -> dict[str, float]:
    sym = (T + T.T) / 2
    ev = np.linalg.eigvalsh(sym)
    sv = np.linalg.svd(T, compute_uv=False)
    return {"eig_min": float(ev[0]), "eig_max": float(ev[-1]), "eig_range": float(ev[-1] - ev[0]),
            "cond": float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf")}


def compute(model, data, n_examples: int | None = 256, seed: int = 0, batch_size: int = 16) -> pd.DataFrame:
    cfg = model.cfg
    x, _ = split_xy(data, "test")
    x = x[subsample(len(x), n_examples, seed)]
    Lyr, H, P = cfg.n_layers, cfg.n_heads, x.shape[1]
    n_off = 2 * P - 1
    acc = {k: torch.zeros(Lyr, H, n_off, dtype=torch.float64) for k in ("sum", "sq", "cnt")}
    ex_r2 = torch.zeros(Lyr, H, dtype=torch.float64)  # sum over examples of per-example R^2
    ex_n = torch.zeros(Lyr, H, dtype=torch.float64)
    names = [f"blocks.{l}.attn.hook_attn_scores" for l in range(Lyr)]
    max_len = 0
    with evaluating(model):
        for _, tok, _ in batches(x, batch_size, trim=False, device=cfg.device):
            store = cache_hooks(model, tok, list(names))
            B, n = tok.shape
            max_len = max(max_len, int((tok != 0).sum(1).max()))
            ok = valid_pairs(tok, cfg.arch).cpu()  # [B, q, k]
            off = (torch.arange(n)[None, :] - torch.arange(n)[:, None]) + (P - 1)  # [q, k]
            idx = off.expand(B, n, n)[ok]  # [E]
            ex_of = torch.arange(B)[:, None, None].expand(B, n, n)[ok]  # [E]
            flat_ex = ex_of * n_off + idx
            for l, nm in enumerate(names):
                s = store[nm].double().cpu().permute(0, 2, 3, 1)[ok]  # [E, H]
                for key, v in (("sum", s), ("sq", s * s), ("cnt", torch.ones_like(s))):
                    acc[key][l].index_add_(1, idx, v.T)
                # per-example Toeplitz fit: diagonal means within each example
                e_sum = torch.zeros(B * n_off, H, dtype=torch.float64).index_add_(0, flat_ex, s)
                e_sq = torch.zeros(B * n_off, H, dtype=torch.float64).index_add_(0, flat_ex, s * s)
                e_cnt = torch.zeros(B * n_off, dtype=torch.float64).index_add_(0, flat_ex, torch.ones(len(idx),
                                                                                                     dtype=torch.float64))
                e_sum, e_sq = e_sum.view(B, n_off, H), e_sq.view(B, n_off, H)
                e_cnt = e_cnt.view(B, n_off, 1)
                res = (e_sq - e_sum ** 2 / e_cnt.clamp(min=1)).sum(1)  # [B, H]
                tot_n = e_cnt.sum(1)
                tot = e_sq.sum(1) - e_sum.sum(1) ** 2 / tot_n.clamp(min=1)
                good = (tot > 1e-12) & (tot_n >= 2)
                r2 = torch.where(good, 1 - res / tot.clamp(min=1e-300), torch.zeros_like(tot))
                ex_r2[l] += r2.sum(0)
                ex_n[l] += good.double().sum(0)
    rows = []
    n_T = max(max_len, 1)
    offsets = np.arange(n_off) - (P - 1)
    for l in range(Lyr):
        for h in range(H):
            s, sq, c = (acc[k][l, h].numpy() for k in ("sum", "sq", "cnt"))
            N = c.sum()
            prof = np.where(c > 0, s / np.maximum(c, 1), np.nan)
            ss_tot = sq.sum() - s.sum() ** 2 / max(N, 1)
            ss_res = (sq - np.where(c > 0, s ** 2 / np.maximum(c, 1), 0)).sum()
            ev = float(1 - ss_res / ss_tot) if ss_tot > 1e-12 else float("nan")
            # Toeplitz matrix over the offsets -(n_T-1) .. n_T-1
            mid = P - 1
            spec = toeplitz_spectrum(toeplitz_from_profile(prof[mid - (n_T - 1): mid + n_T], n_T))
            summary = {"explained_var": ev,
                       "explained_var_per_example": float(ex_r2[l, h] / ex_n[l, h]) if ex_n[l, h] > 0 else np.nan,
                       "logit_var": float(ss_tot / max(N, 1)), "toeplitz_size": n_T, **spec}
            for i in np.flatnonzero(c > 0):
                rows.append({"layer": l, "head": h, "offset": int(offsets[i]), "mean_logit": float(prof[i]),
                             "count": int(c[i]), **summary})
    return pd.DataFrame(rows)


# ---- Lemma B.1 / Proposition B.3 check -------------------------------------------------------
def random_pd_toeplitz(n: int, rng: np.random.Generator, n_terms: int = 3) -> np.ndarray:
    """First column w_0..w_{n-1} >= 0 of a random positive-definite Toeplitz matrix: a positive mixture of
    Kac-Murdock-Szego sequences rho^|k| (each positive definite for 0 < rho < 1)."""
    p = rng.uniform(0.2, 1.0, n_terms)
    rho = rng.uniform(0.05, 0.95, n_terms)
    k = np.arange(n)
    return (p[:, None] * rho[:, None] ** k[None, :]).sum(0)


def _phases(kind: str, n: int, rng: np.random.Generator, d_head: int, base: float) -> np.ndarray:
    """Complex entries e_k (k = 0..n-1) of the Hermitian Toeplitz modulation E[i, j] = e_{j-i} (e_{-k} = conj e_k)."""
    k = np.arange(n)
    if kind == "random":  # unit modulus, independent random phases
        ph = rng.uniform(-np.pi, np.pi, n)
        ph[0] = 0.0
        return np.exp(1j * ph)
    if kind == "linear":  # one RoPE plane: phases k * theta (the lemma's equality case)
        return np.exp(1j * k * rng.uniform(0.05, np.pi))
    if kind == "rope":  # the RoPE mixture over the planes of one head: (1/P) sum_j e^{i k theta_j}
        theta = rope_frequencies(d_head, base)
        return np.exp(1j * k[:, None] * theta[None, :]).mean(1)
    raise ValueError(f"phase kind {kind!r} is unknown; use 'random', 'linear' or 'rope'")


def _hermitian_toeplitz(c: np.ndarray) -> np.ndarray:
    n = len(c)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    d = j - i
    return np.where(d >= 0, c[np.abs(d)], np.conj(c[np.abs(d)]))


def _symbol(c: np.ndarray, w: np.ndarray) -> np.ndarray:
    """f(w) = c_0 + 2 Re sum_{k>=1} c_k e^{i k w}: the symbol of the Hermitian Toeplitz matrix of c."""
    k = np.arange(1, len(c))
    return np.real(c[0]) + 2 * np.real(np.exp(1j * np.outer(np.atleast_1d(w), k)) @ c[1:])


def symbol_sup(c: np.ndarray, grid: int = 4096) -> float:
    """max_w |f(w)|: grid search, refined by a bounded scalar search around the best grid point."""
    from scipy.optimize import minimize_scalar

    w = np.linspace(0, 2 * np.pi, grid, endpoint=False)
    vals = np.abs(_symbol(c, w))
    i = int(vals.argmax())
    step = 2 * np.pi / grid
    res = minimize_scalar(lambda x: -abs(_symbol(c, x)[0]), bounds=(w[i] - step, w[i] + step), method="bounded",
                          options={"xatol": 1e-12})
    return float(max(vals[i], -res.fun))


def hadamard_check(sizes=(8, 32, 128), n_trials: int = 20, kinds=("random", "linear", "rope"), seed: int = 0,
                   d_head: int = 16, base: float = 10000.0) -> pd.DataFrame:
    """Numerical check of Lemma B.1 and the spectral-contraction claim (seed 003, App. B).

    For each trial: T = Toeplitz(w), w >= 0, positive definite; E = Hermitian Toeplitz modulation (unit
    modulus for 'random' and 'linear'); H = T o E (Hadamard). Symbols: g(w) of T, f(w) of H.
    Columns: eig_*_T/eig_*_H (eigenvalues), range_* (max - min), radius_* (max |eig|), cond_*
    (max |eig| / min |eig|), symbol_sup_T = g(0) = w_0 + 2 sum w_k, symbol_sup_H = max |f|,
    lemma_holds: max |f| <= g(0) (Lemma B.1), lemma_equality: |max|f| - g(0)| small,
    range_contracted: range_H <= range_T, radius_contracted: radius_H <= radius_T."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        for kind in kinds:
            for trial in range(n_trials):
                w = random_pd_toeplitz(n, rng)
                e = _phases(kind, n, rng, d_head, base)
                T = toeplitz(w)
                c = w * e
                Hm = _hermitian_toeplitz(c)
                ev_t = np.linalg.eigvalsh(T)
                ev_h = np.linalg.eigvalsh(Hm)
                g0 = float(w[0] + 2 * w[1:].sum())
                f_sup = symbol_sup(c)
                tol = 1e-9 * max(1.0, g0)
                rows.append({
                    "n": n, "kind": kind, "trial": trial,
                    "eig_min_T": ev_t[0], "eig_max_T": ev_t[-1], "range_T": ev_t[-1] - ev_t[0],
                    "radius_T": np.abs(ev_t).max(), "cond_T": np.abs(ev_t).max() / np.abs(ev_t).min(),
                    "eig_min_H": ev_h[0], "eig_max_H": ev_h[-1], "range_H": ev_h[-1] - ev_h[0],
                    "radius_H": np.abs(ev_h).max(),
                    "cond_H": np.abs(ev_h).max() / max(np.abs(ev_h).min(), 1e-300),
                    "symbol_sup_T": g0, "symbol_sup_H": f_sup,
                    "lemma_holds": bool(f_sup <= g0 + tol),
                    "lemma_equality": bool(abs(f_sup - g0) <= 1e-6 * max(1.0, g0)),
                    "range_contracted": bool(ev_h[-1] - ev_h[0] <= ev_t[-1] - ev_t[0] + tol),
                    "radius_contracted": bool(np.abs(ev_h).max() <= np.abs(ev_t).max() + tol),
                })
    return pd.DataFrame(rows)


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the Toeplitz share of logit variance by layer."""
    ph = df.drop_duplicates(["layer", "head"])
    w = ph.groupby("layer")["explained_var"].mean()
    return "Toeplitz share of logit variance by layer: " + ", ".join(f"{l}: {v:.2f}" for l, v in w.items())
