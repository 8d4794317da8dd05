"""Trigger attention (docs/paper.md §5): what each head's attention pattern (`hook_pattern`) does with the triggers.

Per (layer, head), averaged over test examples (95 % percentile bootstrap interval over examples):

* `t2_to_t1` (Task 1): the weight from the second trigger (query) to the first (key); `t1_to_t2`: back (the
  pair whose distance is the label, `trigger_pair`);
* `to_triggers`: the attention mass a non-pad query puts on trigger keys, averaged over queries; `uniform` is
  the same under uniform attention over the keys the model attends (the share of them that are triggers; pad
  keys count where the model does not mask them, `attn_pad_mask` false as in the authors' script);
* `by_distance`: the mean weight on key j from query i as a function of |i - j| (over pairs of non-pad
  positions; `distance` column; no interval), `uniform` = the mean of 1 / #keys the model attends over the same
  pairs.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .common import (batches, bootstrap_means, cache_hooks, evaluating, NotApplicable, percentile_interval, split_xy,
                      subsample, trigger_pair, valid_pairs)


def trigger_positions(tok: torch.Tensor, y: torch.Tensor | None, triggers: np.ndarray, task: str | None):
    """(is_trigger [B, pos], p1 [B] or None, p2 [B] or None): Task 1's trigger pair (`trigger_pair`: the w1 whose
    w2 lies the label's distance after it)."""
    trig = torch.as_tensor(np.asarray(triggers), device=tok.device)
    is_trig = torch.isin(tok, trig)
    if task != "trigger-distance" or len(triggers) < 2:
        return is_trig, None, None
    if y is None:
        raise ValueError("Task 1's trigger pair is found by its label (the distance): pass a labelled test split")
    return (is_trig, *trigger_pair(tok, y, triggers))


def compute(model, data, n_examples: int = 1000, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
            batch_size: int = 64) -> pd.DataFrame:
    """The trigger-attention table of `model` on up to `n_examples` test examples of `data`."""
    triggers = getattr(data, "trigger_ids", None)
    if triggers is None or len(triggers) == 0:
        raise NotApplicable("trigger attention needs a task with trigger tokens (trigger-distance or "
                            "trigger-count): pass the run's Dataset")
    task = getattr(getattr(data, "spec", None), "task", None)
    x, y = split_xy(data, "test")
    keep = subsample(len(x), n_examples, seed)
    x, y = x[keep], (None if y is None else y[keep])
    cfg = model.cfg
    L, H, P = cfg.n_layers, cfg.n_heads, x.shape[1]
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(L)]
    per_ex = {k: [] for k in ("t2_to_t1", "t1_to_t2", "to_triggers", "uniform_to_triggers")}
    dist_sum = np.zeros((L, H, P))
    dist_n, dist_uni = np.zeros(P), np.zeros(P)
    with evaluating(model):
        for _, tok, lab in batches(x, batch_size, y, trim=cfg.pads_are_inert, device=cfg.device):
            store = cache_hooks(model, tok, names)
            B, n = tok.shape
            vis = valid_pairs(tok, cfg.arch).double()  # [B, q, k]: the (word, word) pairs measured
            seen = (model.mask(tok)[:, 0] == 0).double()  # [B, q, k]: the keys the model attends (pads too, unmasked)
            real = tok != 0
            is_trig, p1, p2 = trigger_positions(tok, lab, triggers, task)
            b = torch.arange(B, device=tok.device)
            nq = real.sum(1).clamp(min=1).double()
            # each (q, k) pair's distance |q - k|: the by-distance sums are one scatter-add over the flattened pairs
            d = (torch.arange(n, device=tok.device)[:, None] - torch.arange(n, device=tok.device)[None, :]).abs()
            idx = d.flatten()
            t21, t12, to = (np.zeros((B, L, H)) for _ in range(3))
            for l, name in enumerate(names):  # one layer at a time: [B, H, q, k] in float64, not all L at once
                pat = store[name].double()
                if p1 is not None:
                    t21[:, l] = pat[b, :, p2, p1].cpu().numpy()
                    t12[:, l] = pat[b, :, p1, p2].cpu().numpy()
                mass = (pat * is_trig[:, None, None, :]).sum(-1)  # [B, H, q]
                to[:, l] = ((mass * real[:, None]).sum(-1) / nq[:, None]).cpu().numpy()
                pair_sum = (pat * vis[:, None]).sum(0).reshape(H, n * n)  # [H, q*k], visible pairs only
                dist_sum[l, :, :n] += torch.zeros(H, n, dtype=torch.float64, device=tok.device) \
                    .index_add_(1, idx, pair_sum).cpu().numpy()
            if p1 is not None:
                per_ex["t2_to_t1"].append(t21)
                per_ex["t1_to_t2"].append(t12)
            per_ex["to_triggers"].append(to)
            share = (seen * is_trig[:, None, :]).sum(-1) / seen.sum(-1).clamp(min=1)  # [B, q]
            per_ex["uniform_to_triggers"].append(((share * real).sum(-1) / nq).cpu().numpy())
            inv = vis / seen.sum(-1, keepdim=True).clamp(min=1)  # uniform attention over the keys the model sees
            dist_n[:n] += torch.bincount(idx, vis.sum(0).flatten(), minlength=n).cpu().numpy()
            dist_uni[:n] += torch.bincount(idx, inv.sum(0).flatten(), minlength=n).cpu().numpy()
    rows = []
    uni = np.concatenate(per_ex["uniform_to_triggers"]).mean()
    for measure in ("t2_to_t1", "t1_to_t2", "to_triggers"):
        if not per_ex[measure]:
            continue
        v = np.concatenate(per_ex[measure])  # [N, L, H]
        flat = v.reshape(len(v), -1)
        mean = flat.mean(0)
        lo = hi = np.full_like(mean, np.nan)
        if n_boot > 0:
            lo, hi = percentile_interval(bootstrap_means(flat, n_boot, seed), level)
        for l in range(L):
            for h in range(H):
                i = l * H + h
                rows.append({"layer": l, "head": h, "measure": measure, "distance": -1, "value": mean[i],
                             "ci_lo": lo[i], "ci_hi": hi[i],
                             "uniform": uni if measure == "to_triggers" else np.nan, "n_examples": len(v)})
    for delta in np.flatnonzero(dist_n):
        for l in range(L):
            for h in range(H):
                rows.append({"layer": l, "head": h, "measure": "by_distance", "distance": int(delta),
                             "value": dist_sum[l, h, delta] / dist_n[delta], "ci_lo": np.nan, "ci_hi": np.nan,
                             "uniform": dist_uni[delta] / dist_n[delta], "n_examples": len(x)})
    return pd.DataFrame(rows)


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the head that attends most to the trigger."""
    t = df[df.measure == ("t2_to_t1" if (df.measure == "t2_to_t1").any() else "to_triggers")]
    r = t.loc[t["value"].idxmax()]
    return f"most {r.measure}: layer {int(r.layer)}, head {int(r['head'])}, {r.value:.2f}"
