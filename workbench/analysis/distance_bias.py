"""Distance bias (seed 000, TAPA App. 15; seed 004, FoPE Fig. 8).

`compute`: for sampled (example, query m) and two keys of the same row -- n_s at a short distance
|m - n_s| in [short_min, short_max] and n_l at a long distance |m - n_l| in [long_min, long_max] -- the
difference Delta = S[m, n_s] - S[m, n_l] of the pre-softmax logits (`hook_attn_scores` on allowed entries,
positional bias included), per layer and head, as a histogram on shared bin edges (`shared_edges`: an extreme
head does not set them; its differences beyond them count in the end bins). A distribution shifted
to positive values means the head favours near tokens whatever their content (TAPA's "distance bias").
The TAPA paper uses distances [0, 100] vs [10000, 10100]; here the defaults scale with the training length
L: short [0, L/10], long [L/2, L-1].

`rope_expected_score`: expected RoPE score vs. distance for q, k with i.i.d. N(mu, 1) entries (mu = 0, 0.1, 1),
analytic and Monte Carlo; no model needed.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from .common import (batches, cache_hooks, evaluating, lengths, NotApplicable, rope_frequencies, split_xy, subsample,
                      train_length)


def sample_triples(x: np.ndarray, n_pairs: int, short: tuple[int, int], long: tuple[int, int], arch: str,
                   seed: int, max_tries: int = 50) -> tuple[np.ndarray, ...]:
    """(example, m, n_short, n_long): query and two keys of the same row at a short and a long distance.
    In the decoder the keys come before the query (n <= m)."""
    rng = np.random.default_rng(seed)
    lens = lengths(x)
    ok = np.flatnonzero(lens > long[0])
    if len(ok) == 0:
        raise NotApplicable(f"no test example is longer than the long-range distance {long[0]}; "
                            "lower long_min (or use a dataset with longer sequences)")
    out = [[], [], [], []]
    have = 0
    for _ in range(max_tries):
        k = 4 * (n_pairs - have)
        ex = ok[rng.integers(0, len(ok), k)]
        n_len = lens[ex]
        m = rng.integers(0, n_len)
        ds = rng.integers(short[0], short[1] + 1, k)
        dl = rng.integers(long[0], long[1] + 1, k)
        if arch == "decoder":
            ns, nl = m - ds, m - dl
        else:
            ss = rng.choice([-1, 1], k)
            sl = rng.choice([-1, 1], k)
            ns, nl = m + ss * ds, m + sl * dl
        good = (ns >= 0) & (ns < n_len) & (nl >= 0) & (nl < n_len)
        take = np.flatnonzero(good)[: n_pairs - have]
        for lst, arr in zip(out, (ex, m, ns, nl)):
            lst.append(arr[take])
        have += len(take)
        if have >= n_pairs:
            break
    if have == 0:
        raise NotApplicable("no (query, near key, far key) triple fits in the test sequences; "
                            "widen the distance ranges")
    return tuple(np.concatenate(o) for o in out)


def compute(model, data, n_pairs: int = 10000, n_examples: int | None = 512, seed: int = 0, batch_size: int = 16,
            short: tuple[int, int] | None = None, long: tuple[int, int] | None = None, n_bins: int = 40,
            train_len: int | None = None) -> pd.DataFrame:
    cfg = model.cfg
    x, _ = split_xy(data, "test")
    x = x[subsample(len(x), n_examples, seed)]
    L = int(train_len or train_length(model, data))
    short = tuple(short) if short is not None else (0, max(1, L // 10))
    long = tuple(long) if long is not None else (L // 2, L - 1)
    if short[1] >= long[0]:
        raise ValueError(f"short range {short} must end before the long range {long} starts")
    ex, m, ns, nl = sample_triples(x, n_pairs, short, long, cfg.arch, seed)
    names = [f"blocks.{l}.attn.hook_attn_scores" for l in range(cfg.n_layers)]
    diffs = {l: [] for l in range(cfg.n_layers)}
    with evaluating(model):
        for idx, tok, _ in batches(x, batch_size, trim=False, device=cfg.device):
            sel = np.flatnonzero(np.isin(ex, idx))
            if len(sel) == 0:
                continue
            store = cache_hooks(model, tok, list(names))
            b = torch.as_tensor(np.searchsorted(idx, ex[sel]))
            mm, a, c = (torch.as_tensor(v[sel]) for v in (m, ns, nl))
            for l, nm in enumerate(names):
                s = store[nm].cpu()  # [B, H, q, k]
                diffs[l].append((s[b, :, mm, a] - s[b, :, mm, c]).double().numpy())  # [P, H]
    D = {l: np.concatenate(v) for l, v in diffs.items()}
    edges = shared_edges(D, n_bins)
    rows = []
    for l, d in D.items():
        for h in range(d.shape[1]):
            v = d[:, h]
            counts, _ = np.histogram(np.clip(v, edges[0], edges[-1]), bins=edges)
            summary = {"mean_diff": float(v.mean()), "std_diff": float(v.std()), "median_diff": float(np.median(v)),
                       "share_positive": float((v > 0).mean()), "n_pairs": int(len(v)),
                       "short_min": short[0], "short_max": short[1], "long_min": long[0], "long_max": long[1]}
            for i in range(n_bins):
                rows.append({"layer": l, "head": h, "bin_lo": float(edges[i]), "bin_hi": float(edges[i + 1]),
                             "count": int(counts[i]), "density": float(counts[i] / max(len(v), 1)), **summary})
    return pd.DataFrame(rows)


OUTLIER_SPREAD = 20.0  # a head whose central 98 % spans this many times the median head's is left out of the edges


def shared_edges(diffs: dict[int, np.ndarray], n_bins: int) -> np.ndarray:
    """Bin edges shared by every head: n_bins equal bins over the 0.1-99.9 % quantiles of the pooled differences
    of the heads whose central 98 % (1-99 % quantiles) spans at most OUTLIER_SPREAD x the median head's. One head
    with logits in the thousands would otherwise stretch the bins so far that every other head's differences fall
    in one bin (a shipped RoPE run: bins 361 wide); its own differences beyond the edges count in the end bins."""
    heads = [d[:, h] for d in diffs.values() for h in range(d.shape[1])]
    spread = np.array([np.subtract(*np.quantile(v, [0.99, 0.01])) for v in heads])
    typical = np.median(spread)
    kept = [v for v, w in zip(heads, spread) if w <= OUTLIER_SPREAD * typical] if typical > 0 else heads
    lo, hi = np.quantile(np.concatenate(kept), [0.001, 0.999])
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, n_bins + 1)


def rope_expected_score(means=(0.0, 0.1, 1.0), d_head: int = 128, base: float = 10000.0, max_distance: int = 512,
                        n_samples: int = 1000, seed: int = 0, std: float = 1.0) -> pd.DataFrame:
    """Expected RoPE score q'_m . k'_n vs. distance Delta = m - n for q, k with i.i.d. N(mu, std^2) entries.

    Analytic: E[score(Delta)] = sum_j E[(q0 k0 + q1 k1)] cos(Delta theta_j) + E[(q0 k1 - q1 k0)] sin(...)
              = 2 mu^2 sum_j cos(Delta theta_j)   (q and k independent; no 1/sqrt(d) scaling).
    Monte Carlo: mean and standard deviation over `n_samples` (q, k) draws, as in FoPE Fig. 8 (1k samples).
    mu = 1 with std 0 is RoPE's "ideal" curve (q = k = 1)."""
    rng = np.random.default_rng(seed)
    theta = rope_frequencies(d_head, base)
    dist = np.arange(max_distance + 1)
    cos, sin = np.cos(np.outer(dist, theta)), np.sin(np.outer(dist, theta))  # [D, planes]
    rows = []
    for mu in means:
        q = rng.normal(mu, std, (n_samples, d_head))
        k = rng.normal(mu, std, (n_samples, d_head))
        a = q[:, 0::2] * k[:, 0::2] + q[:, 1::2] * k[:, 1::2]  # [S, planes]
        b = q[:, 0::2] * k[:, 1::2] - q[:, 1::2] * k[:, 0::2]
        scores = a @ cos.T + b @ sin.T  # [S, D]: sum_j a_j cos(D theta_j) + b_j sin(D theta_j)
        analytic = 2 * mu ** 2 * cos.sum(1)
        for i, d in enumerate(dist):
            rows.append({"distance": int(d), "q_mean": float(mu), "expected_score": float(analytic[i]),
                         "mc_mean": float(scores[:, i].mean()), "mc_std": float(scores[:, i].std()),
                         "mc_se": float(scores[:, i].std() / math.sqrt(n_samples)), "n_samples": n_samples,
                         "d_head": d_head, "base": base, "std": std})
    return pd.DataFrame(rows)


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the mean logit(near) - logit(far) by layer."""
    ph = df.drop_duplicates(["layer", "head"])
    w = ph.groupby("layer")["mean_diff"].mean()
    return "mean logit(near) - logit(far) by layer: " + ", ".join(f"{l}: {v:+.2f}" for l, v in w.items())
