"""Initial angles between query and key in every rotary plane (seed 001, CoCA, sections 2.2-2.3).

For a query at position m and a key at position n, plane j (dims 2j, 2j+1) of the pre-rotation vectors
q_j = hook_q[m], k_j = hook_k[n] has the initial angle Theta_j in [0, 2 pi), measured counter-clockwise from
k_j to q_j. After RoPE the angle is Theta_j + (m - n) theta_j and the score term is |q_j||k_j| cos(that).
The paper's four scenarios:

    (b) m > n, Theta_j < pi    (c) m < n, Theta_j > pi      normal: the term decreases with distance
    (a) m < n, 0 < Theta_j < pi                             anomalous, tau = Theta_j / theta_j
    (d) m > n, pi < Theta_j < 2 pi                          anomalous, tau = (2 pi - Theta_j) / theta_j

In the anomalous scenarios the term *increases* with distance for the tau closest tokens, so attention to
them is abnormally low. Theta_j = 0 is normal (tau would be 0). In the causal decoder only m > n occurs.
CoCA's key of a pair is hook_k[n] * hook_q[m] (collinear with the query), so Theta_j = 0 by construction
(up to rounding, which is snapped to 0 below 1e-6 rad); planes where q_j or k_j is 0 have no angle and are
left out (counted in `n_zero`).

Reference level: for every statistic the table also holds `uniform_<stat>`, its expectation if Theta_j were
uniform on [0, 2 pi) and independent of the pair, over the same sampled pairs (`uniform_reference`). Then
tau ~ U(0, pi / theta_j) in both anomalous scenarios, each scenario has probability 1/2 given the sign of
m - n, and a pair is affected with probability max(0, pi - |m - n| theta_j) / (2 pi).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from .common import (batches, cache_hooks, evaluating, lengths, NotApplicable, rotary_planes, split_xy, subsample,
                      train_length)


def rotary_schemes() -> str:
    from workbench.model import list_schemes

    return ", ".join(n for n, cls in list_schemes().items() if getattr(cls, "rotary", False))
SNAP = 1e-6


def sample_pairs(x: np.ndarray, n_pairs: int, arch: str, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(example, m, n) index arrays of `n_pairs` random (query, key) pairs of distinct non-pad positions
    (key before query in the causal decoder), spread evenly over the examples."""
    rng = np.random.default_rng(seed)
    lens = lengths(x)
    ok = np.flatnonzero(lens >= 2)
    if len(ok) == 0:
        raise NotApplicable("no example has two non-pad tokens, so there is no (query, key) pair to measure")
    ex = ok[rng.integers(0, len(ok), n_pairs)]
    n_len = lens[ex]
    m = rng.integers(0, n_len)
    off = rng.integers(1, n_len)  # 1 .. len-1
    if arch == "decoder":  # key strictly before the query
        m = rng.integers(1, n_len)
        n = rng.integers(0, m)
    else:
        n = (m + off) % n_len
    order = np.lexsort((n, m, ex))
    return ex[order], m[order], n[order]


def plane_angles(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Initial angle Theta in [0, 2 pi) from k to q per plane, and |q_j| |k_j|. q, k: [..., width]."""
    q0, q1 = q[..., 0::2], q[..., 1::2]
    k0, k1 = k[..., 0::2], k[..., 1::2]
    ang = np.arctan2(k0 * q1 - k1 * q0, k0 * q0 + k1 * q1)  # (-pi, pi]
    ang = np.where(np.abs(ang) < SNAP, 0.0, ang)
    return np.mod(ang, 2 * math.pi), np.hypot(q0, q1) * np.hypot(k0, k1)


def uniform_reference(delta: np.ndarray, weight: np.ndarray, theta: float, L: int) -> dict[str, float]:
    """Expected value of each statistic of one (layer, head, plane) under Theta ~ U[0, 2 pi), for pairs with
    query-minus-key offsets `delta` and weights |q_j||k_j| `weight` (see the module docstring)."""
    cnt = max(len(delta), 1)
    off = delta != 0
    p = 0.5 * off  # P(anomalous | pair)
    T = math.pi / theta  # tau ~ U(0, T) given anomalous
    c = float(L - 1)
    return {"uniform_share_anomalous": float(p.sum() / cnt),
            "uniform_share_a": float(0.5 * (delta < 0).sum() / cnt),
            "uniform_share_d": float(0.5 * (delta > 0).sum() / cnt),
            "uniform_weighted_share_anomalous": float((weight * p).sum() / weight.sum()) if weight.sum() > 0
            else float("nan"),
            "uniform_share_affected": float((off * np.maximum(0.0, math.pi - np.abs(delta) * theta)).sum()
                                            / (2 * math.pi * cnt)),
            "uniform_tau_mean": T / 2, "uniform_tau_median": T / 2,
            "uniform_tau_capped_mean": T / 2 if c >= T else c - c * c / (2 * T),
            "uniform_angle_resultant": math.sqrt(math.pi) / (2 * math.sqrt(cnt)),  # E|mean of n unit vectors|
            "uniform_mean_cos": 0.0}


def compute(model, data, n_pairs: int = 4096, n_examples: int | None = 512, seed: int = 0,
            batch_size: int = 64, train_len: int | None = None) -> pd.DataFrame:
    scheme = model.scheme
    if not getattr(scheme, "rotary", False):
        raise NotApplicable(f"initial angles are defined between rotary planes; scheme {scheme.name!r} does not "
                            f"rotate q and k. Use a rotary scheme: {rotary_schemes()}")
    cfg = model.cfg
    x, _ = split_xy(data, "test")
    x = x[subsample(len(x), n_examples, seed)]
    L = int(train_len or train_length(model, data))
    ex, m, n = sample_pairs(x, n_pairs, cfg.arch, seed)
    names = [f"blocks.{l}.attn.hook_{w}" for l in range(cfg.n_layers) for w in ("q", "k")]
    q_all = {l: [] for l in range(cfg.n_layers)}
    k_all = {l: [] for l in range(cfg.n_layers)}
    with evaluating(model):
        for idx, tok, _ in batches(x, batch_size, trim=False, device=cfg.device):
            sel = np.flatnonzero(np.isin(ex, idx))
            if len(sel) == 0:
                continue
            local = np.searchsorted(idx, ex[sel])  # idx is sorted (no trimming)
            store = cache_hooks(model, tok, list(names))
            b = torch.as_tensor(local, device=tok.device)
            mm, nn_ = torch.as_tensor(m[sel], device=tok.device), torch.as_tensor(n[sel], device=tok.device)
            for l in range(cfg.n_layers):
                attn = model.blocks[l].attn
                q = store[f"blocks.{l}.attn.hook_q"]
                k = store[f"blocks.{l}.attn.hook_k"]
                qm = q[b, mm]
                kn = k[b, nn_] * qm if getattr(attn, "collinear", False) else k[b, nn_]  # CoCA: c_n * q_m
                q_all[l].append(qm.double().cpu().numpy())
                k_all[l].append(kn.double().cpu().numpy())
    delta = (m - n).astype(np.int64)  # query minus key position
    rows = []
    any_plane = False
    for l in range(cfg.n_layers):
        q = np.concatenate(q_all[l])  # [P, H, width]
        k = np.concatenate(k_all[l])
        H, width = q.shape[1], q.shape[2]
        planes = rotary_planes(model.blocks[l].attn, H, width)
        ang, mag = plane_angles(q, k)  # [P, H, planes]
        for h in range(H):
            for j in np.flatnonzero(planes.rotates[h]):
                any_plane = True
                th = planes.theta[h, j]
                a, w = ang[:, h, j], mag[:, h, j]
                ok = w > 1e-12
                a, w, d = a[ok], w[ok], delta[ok]
                scen_a = (d < 0) & (a > 0) & (a < math.pi)
                scen_d = (d > 0) & (a > math.pi)
                anom = scen_a | scen_d
                tau = np.where(scen_a, a / th, np.where(scen_d, (2 * math.pi - a) / th, 0.0))
                affected = anom & (np.abs(d) < tau)
                cnt = max(len(a), 1)
                rows.append({
                    "layer": l, "head": h, "plane": int(j), "theta": float(th),
                    "cycles": float(th * L / (2 * math.pi)),
                    "n_pairs": int(len(a)), "n_zero": int((~ok).sum()),
                    "share_anomalous": float(anom.sum() / cnt),
                    "share_a": float(scen_a.sum() / cnt), "share_d": float(scen_d.sum() / cnt),
                    "weighted_share_anomalous": float(w[anom].sum() / w.sum()) if w.sum() > 0 else float("nan"),
                    "share_affected": float(affected.sum() / cnt),
                    "tau_mean": float(tau[anom].mean()) if anom.any() else 0.0,
                    "tau_median": float(np.median(tau[anom])) if anom.any() else 0.0,
                    "tau_capped_mean": float(np.minimum(tau[anom], L - 1).mean()) if anom.any() else 0.0,
                    "angle_circmean": float(np.mod(np.angle(np.exp(1j * a).mean()), 2 * math.pi)) if len(a) else
                    float("nan"),
                    "angle_resultant": float(np.abs(np.exp(1j * a).mean())) if len(a) else float("nan"),
                    "angle_abs_max": float(np.abs(np.angle(np.exp(1j * a))).max()) if len(a) else float("nan"),
                    "mean_cos": float(np.cos(a).mean()) if len(a) else float("nan"),
                    "train_len": L,
                    **uniform_reference(d, w, th, L),
                })
    if not any_plane:
        raise NotApplicable("no head of this model rotates any plane (partial RoPE with rope_heads=0 or empty "
                            f"rope_layers?); initial angles need rotating heads ({rotary_schemes()})")
    return pd.DataFrame(rows)


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the share of anomalous pairs by layer."""
    w = df.groupby("layer")["share_anomalous"].mean()
    return "share of anomalous pairs by layer: " + ", ".join(f"{l}: {v:.2f}" for l, v in w.items())
