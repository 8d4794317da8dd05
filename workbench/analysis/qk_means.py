"""q/k per-dimension means (seed 004, Fig. 7 and App. A.1).

For every layer, the mean of the pre-rotation query and key (`hook_q`, `hook_k`) in every dimension, over the
non-pad tokens of sampled test examples, averaged over heads. For rotary schemes the dimensions of a plane
whose frequency does not complete a full cycle within the training length L (theta_j L / (2 pi) < 1, FoPE's
"under-trained" band) are marked. Non-rotary models get the same means (still meaningful: a large mean is a
position-independent bias of q or k) with `marks_apply = False`.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .common import batches, cache_hooks, evaluating, rotary_planes, split_xy, subsample, train_length


def _frequencies(model, layer: int, width: int) -> np.ndarray:
    """[n_heads, width//2] rotation frequency per plane (NaN where the plane does not rotate)."""
    if not getattr(model.scheme, "rotary", False):
        return np.full((model.cfg.n_heads, width // 2), np.nan)
    planes = rotary_planes(model.blocks[layer].attn, model.cfg.n_heads, width)
    return planes.theta


def compute(model, data, n_examples: int | None = 512, seed: int = 0, batch_size: int = 64,
            train_len: int | None = None) -> pd.DataFrame:
    x, _ = split_xy(data, "test")
    x = x[subsample(len(x), n_examples, seed)]
    cfg = model.cfg
    L = int(train_len or train_length(model, data))
    names = {(l, w): f"blocks.{l}.attn.hook_{w}" for l in range(cfg.n_layers) for w in ("q", "k")}
    sums: dict = {}
    sq: dict = {}
    count = 0
    with evaluating(model):
        for _, tok, _ in batches(x, batch_size, trim=False, device=cfg.device):
            store = cache_hooks(model, tok, list(names.values()))
            keep = (tok != 0)
            for key, n in names.items():
                t = store[n][keep].double()  # [tokens, head, d]
                sums[key] = sums.get(key, 0) + t.sum(0)
                sq[key] = sq.get(key, 0) + (t ** 2).sum(0)
            count += int(keep.sum())
    rotary = bool(getattr(model.scheme, "rotary", False))
    rows = []
    for (l, w), s in sums.items():
        mean = (s / count).cpu().numpy()  # [head, d]
        var = (sq[(l, w)] / count).cpu().numpy() - mean ** 2
        H, width = mean.shape
        theta = _frequencies(model, l, width)  # [head, plane]
        for d in range(width):
            th = theta[:, d // 2]
            th_rot = th[~np.isnan(th)]
            freq = float(th_rot[0]) if len(th_rot) else float("nan")
            cycles = freq * L / (2 * math.pi) if len(th_rot) else float("nan")
            rows.append({
                "layer": l, "tensor": w, "dim": d, "plane": d // 2,
                "mean": float(mean[:, d].mean()), "abs_mean": float(np.abs(mean[:, d]).mean()),
                "std": float(np.sqrt(np.clip(var[:, d], 0, None)).mean()),
                "theta": freq, "cycles": cycles,
                "undertrained": bool(len(th_rot) and cycles < 1.0),
                "n_rotary_heads": int(len(th_rot)), "marks_apply": rotary,
                "train_len": L, "n_tokens": count,
            })
    return pd.DataFrame(rows)


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the mean |q/k mean| in the under-trained
    dimensions against the rest."""
    u = df[df.undertrained]
    rest = df[~df.undertrained]
    if len(u):
        return (f"mean |q/k mean| in under-trained dims {u.abs_mean.mean():.3f} vs {rest.abs_mean.mean():.3f} "
                f"elsewhere ({int(u.dim.nunique())} of {int(df.dim.nunique())} dims under-trained)")
    return f"mean |q/k mean| {df.abs_mean.mean():.3f} over {int(df.dim.nunique())} dims (no under-trained marks)"
