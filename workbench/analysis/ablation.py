"""Head ablation (docs/paper.md §5): delta(l, h) = metric(clean) - metric(head h of layer l ablated).

Ablating a head replaces its `z` slice (`blocks.{l}.attn.hook_z[:, :, h]`, just before `W_O`) with zeros
(`mode="zero"`, the paper's choice), with the head's mean `z` over the non-pad test tokens
(`mode="mean"`), or with the head's `z` from another test example of the same length (`mode="resample"`,
resample ablation: the partner is a seeded derangement within each length group, so pads line up; examples
whose length no other test example shares are left out and `n_examples` says how many remain). Metrics: test accuracy and cross-entropy loss, per example, so every delta gets a
paired 95 % bootstrap interval over test examples (the same resamples for every head, so differences
between heads -- the deposit "gap" -- are paired too).

Fast sweep (`method="fast"`, default): per batch, one clean forward caches the residual stream before
every layer; for layer l the attention is computed once, its `z` is expanded into H copies (copy c has
head c ablated) right before `W_O`, and only the rest of layer l and the layers above run on the H
copies (batched). In the `paper` arch the keys/values of the layers above come from M, the same for every
copy, so they are projected once and shared (`share_kv`). Examples are sorted by length and each batch is
cut to its longest non-pad length. The predictions equal the naive loop's (`method="naive"`: one full
forward per head with a hook on `hook_z`) example by example and the losses agree to float rounding;
tests/test_analysis.py checks that and the agreement with
`transformer_lens.patching.get_act_patch_attn_head_out_all_pos`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from .common import (batches, bootstrap_means, cache_hooks, evaluating, lengths, percentile_interval, run_data,
                      split_xy, streams, subsample, tag)

METRICS = ("accuracy", "loss")
MODES = ("zero", "mean", "resample")
SIGN = {"accuracy": 1.0, "loss": -1.0}  # importance = SIGN * delta: positive = the head matters


def head_means(model, x: np.ndarray, batch_size: int = 64) -> torch.Tensor:
    """[n_layers, n_heads, d_head]: mean of every head's z over the non-pad tokens of `x`."""
    cfg = model.cfg
    total = torch.zeros(cfg.n_layers, cfg.n_heads, cfg.d_head, dtype=torch.float64)
    count = 0
    names = [f"blocks.{l}.attn.hook_z" for l in range(cfg.n_layers)]
    with evaluating(model):
        for _, tok, _ in batches(x, batch_size, trim=False, device=cfg.device):
            store = cache_hooks(model, tok, list(names))
            keep = (tok != 0).to(torch.float64)[:, :, None, None]
            for l, n in enumerate(names):
                total[l] += (store[n].double() * keep).sum((0, 1)).cpu()
            count += int((tok != 0).sum())
    return (total / max(count, 1)).float()


def resample_partners(x: np.ndarray, seed: int = 0) -> np.ndarray:
    """partner[i]: another example of the same non-pad length (a seeded derangement within each length
    group: a random cyclic order, each example paired with the next), -1 where the length is unique."""
    n = lengths(x)
    partner = np.full(len(x), -1, np.int64)
    rng = np.random.default_rng(seed)
    for length in np.unique(n):
        group = rng.permutation(np.flatnonzero(n == length))
        if len(group) > 1:
            partner[group] = np.roll(group, -1)
    return partner


def with_partners(x: np.ndarray, y: np.ndarray, seed: int = 0):
    """(x, y, partner, kept): the examples that have a same-length partner (`resample_partners`; `kept`: their
    indices in the input), with each partner as an index into the kept examples."""
    partner = resample_partners(x, seed)
    kept = np.flatnonzero(partner >= 0)
    if len(kept) == 0:
        raise ValueError("resample ablation needs test examples that share a length; every length here is "
                         "unique: use more examples or mode='zero' / 'mean'")
    old_to_new = np.full(len(x), -1)
    old_to_new[kept] = np.arange(len(kept))
    return x[kept], y[kept], old_to_new[partner[kept]], kept


def partner_z(model, tokens: torch.Tensor) -> torch.Tensor:
    """[n_layers, B, pos, H, dh]: every head's z on `tokens` (the resample fill of their partners)."""
    names = [f"blocks.{l}.attn.hook_z" for l in range(model.cfg.n_layers)]
    store = cache_hooks(model, tokens, names)
    return torch.stack([store[n] for n in names])


def _fill(model, z_fill: torch.Tensor | None, layer: int, like: torch.Tensor) -> torch.Tensor:
    """What replaces a head's z: 0, or z_fill[layer] ([H, dh] means, or [B, pos, H, dh] resampled z)."""
    if z_fill is None:
        return torch.zeros((), dtype=like.dtype, device=like.device)
    return z_fill[layer].to(like.device, like.dtype)


def ablated_logits_fast(model, tokens: torch.Tensor, z_fill: torch.Tensor | None = None, share_kv: bool = True):
    """(clean logits [B, C], ablated logits [n_layers, n_heads, B, C]) for one batch, fast path.

    `share_kv` (paper arch only): the layers above the ablated one project keys/values from M once per batch
    instead of once per copy."""
    cfg = model.cfg
    L, H, B = cfg.n_layers, cfg.n_heads, tokens.shape[0]
    memory, mask, resid, x = streams(model, tokens)
    clean = model.head(x, tokens)
    out = torch.empty(L, H, B, clean.shape[-1], dtype=clean.dtype, device=clean.device)
    keep = 1.0 - torch.eye(H, device=clean.device, dtype=memory.dtype)  # [copy, head]
    keep = keep[:, None, None, :, None]  # [copy, 1, 1, head, 1]
    share_kv = share_kv and cfg.arch == "paper"
    mem_rep = None if share_kv else memory.repeat(H, 1, 1)
    mask_rep, tok_rep = mask.repeat(H, 1, 1, 1), tokens.repeat(H, 1)

    def repeat_copies(t, hook):  # [B, ...] -> [H*B, ...] (copy-major, like the stream)
        return t.repeat(H, *([1] * (t.dim() - 1))) if t.shape[0] == B else t

    for l, block in enumerate(model.blocks):
        fill = _fill(model, z_fill, l, memory)

        def expand_z(z, hook, fill=fill):  # [B, pos, H, dh] -> [H*B, pos, H, dh], copy c without head c
            zc = z.unsqueeze(0) * keep + (1.0 - keep) * fill
            return zc.reshape(H * z.shape[0], *z.shape[1:])

        def split_copies(a, hook):  # [H*B, pos, d] -> [H, B, pos, d]: broadcasts against the clean x
            return a.reshape(H, -1, *a.shape[1:])

        def merge_copies(r, hook):  # [H, B, pos, d] -> [H*B, pos, d]
            return r.reshape(-1, *r.shape[2:])

        hooks = [(f"blocks.{l}.attn.hook_z", expand_z), (f"blocks.{l}.hook_attn_out", split_copies),
                 (f"blocks.{l}.hook_resid_mid", merge_copies)]
        with model.hooks(fwd_hooks=hooks):
            y = block(resid[l], memory, mask)
        if share_kv:
            # paper arch: keys and values come from M, the same for every copy -> project (and rotate) them once
            # at batch B and hand every copy the same rotated k and v at hook_rot_k / hook_v (hook_k, hook_t,
            # the latents stay at batch B)
            up = [(f"blocks.{u}.attn.hook_{w}", repeat_copies) for u in range(l + 1, L) for w in ("rot_k", "v")]
            with model.hooks(fwd_hooks=up):
                for block_up in model.blocks[l + 1:]:
                    y = block_up(y, memory, mask_rep)
        else:
            for block_up in model.blocks[l + 1:]:
                y = block_up(y, mem_rep, mask_rep)
        out[l] = model.head(y, tok_rep).reshape(H, B, -1)
    return clean, out


def ablated_logits_naive(model, tokens: torch.Tensor, z_fill: torch.Tensor | None = None):
    """The reference: one full forward per (layer, head) with a hook on hook_z."""
    cfg = model.cfg
    clean = model(tokens)
    out = torch.empty(cfg.n_layers, cfg.n_heads, *clean.shape, dtype=clean.dtype, device=clean.device)
    for l in range(cfg.n_layers):
        for h in range(cfg.n_heads):
            def ablate(z, hook, l=l, h=h):
                z = z.clone()
                z[:, :, h] = 0.0 if z_fill is None else z_fill[l][..., h, :].to(z.device, z.dtype)
                return z

            out[l, h] = model.run_with_hooks(tokens, fwd_hooks=[(f"blocks.{l}.attn.hook_z", ablate)])
    return clean, out


def per_example(model, x: np.ndarray, y: np.ndarray, mode: str = "zero", method: str = "fast",
                batch_size: int | None = None, trim: bool = True, share_kv: bool = True, seed: int = 0) -> dict[str, np.ndarray]:
    """Per-example outcomes: clean_correct/clean_loss [N], correct/loss [L, H, N], pred [L, H, N].

    In resample mode N counts only the examples that have a same-length partner (`kept`: their indices)."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is unknown; use one of {MODES}")
    if method not in ("fast", "naive"):
        raise ValueError(f"method={method!r} is unknown; use 'fast' or 'naive'")
    cfg = model.cfg
    if batch_size is None:  # fast: H copies of each example; ~64 sequences a forward keep them in a CPU's cache,
        per_forward = 64 if cfg.device == "cpu" else 1024  # a GPU wants wide forwards (launches, not cache)
        batch_size = max(1, per_forward // cfg.n_heads) if method == "fast" else 128
    trim = trim and cfg.pads_are_inert
    z_fill = head_means(model, x) if mode == "mean" else None
    kept = np.arange(len(x))
    if mode == "resample":
        x, y, partner, kept = with_partners(x, y, seed)
    L, H, N = cfg.n_layers, cfg.n_heads, len(x)
    res = {"clean_correct": np.zeros(N, bool), "clean_loss": np.zeros(N, np.float32),
           "clean_pred": np.zeros(N, np.int64),
           "correct": np.zeros((L, H, N), bool), "loss": np.zeros((L, H, N), np.float32),
           "pred": np.zeros((L, H, N), np.int64)}
    with evaluating(model):
        for idx, tok, lab in batches(x, batch_size, y, trim=trim, device=cfg.device):
            if mode == "resample":  # partners have the same length: the batch's trimmed width fits them
                ptok = torch.as_tensor(x[partner[idx], :tok.shape[1]], device=cfg.device)
                z_fill = partner_z(model, ptok)
            if method == "fast":
                clean, abl = ablated_logits_fast(model, tok, z_fill, share_kv=share_kv)
            else:
                clean, abl = ablated_logits_naive(model, tok, z_fill)
            res["clean_pred"][idx] = clean.argmax(-1).cpu().numpy()
            res["clean_correct"][idx] = (clean.argmax(-1) == lab).cpu().numpy()
            res["clean_loss"][idx] = F.cross_entropy(clean, lab, reduction="none").cpu().numpy()
            flat = abl.reshape(L * H * len(idx), -1)
            pred = flat.argmax(-1).reshape(L, H, -1)
            res["pred"][:, :, idx] = pred.cpu().numpy()
            res["correct"][:, :, idx] = (pred == lab).cpu().numpy()
            res["loss"][:, :, idx] = F.cross_entropy(flat, lab.repeat(L * H), reduction="none").reshape(
                L, H, -1).cpu().numpy()
    res["z_fill"] = z_fill.numpy() if mode == "mean" else None
    res["kept"] = kept
    return res


def table_from_examples(res: dict[str, np.ndarray], mode: str = "zero", n_boot: int = 1000, seed: int = 0,
                        level: float = 0.95) -> pd.DataFrame:
    """The tidy delta table from per-example outcomes (see docs/analyses.md for the columns)."""
    L, H, N = res["correct"].shape
    clean = {"accuracy": res["clean_correct"].astype(np.float64), "loss": res["clean_loss"].astype(np.float64)}
    ablated = {"accuracy": res["correct"].astype(np.float64), "loss": res["loss"].astype(np.float64)}
    # per-example paired differences, columns ordered (metric, layer, head)
    diffs = np.concatenate([(clean[m][None, None] - ablated[m]).reshape(L * H, N) for m in METRICS], 0).T
    reps = bootstrap_means(diffs, n_boot, seed) if n_boot > 0 else np.zeros((0, diffs.shape[1]))
    point = diffs.mean(0)
    if n_boot > 0:
        lo, hi = percentile_interval(reps, level)
    else:
        lo = hi = np.full_like(point, np.nan)
    rows = []
    for mi, m in enumerate(METRICS):
        sl = slice(mi * L * H, (mi + 1) * L * H)
        imp_point = SIGN[m] * point[sl].reshape(L, H)
        imp_reps = SIGN[m] * reps[:, sl].reshape(-1, L, H)
        for l in range(L):
            order = np.argsort(-imp_point[l], kind="stable")
            top = order[0]
            second_val = imp_point[l, order[1]] if H > 1 else 0.0
            gap = imp_point[l, top] - second_val
            if n_boot > 0:
                g = imp_reps[:, l, top] - (imp_reps[:, l, order[1]] if H > 1 else 0.0)
                glo, ghi = percentile_interval(g, level)
            else:
                glo = ghi = np.nan
            for h in range(H):
                k = mi * L * H + l * H + h
                rows.append({
                    "layer": l, "head": h, "metric": m, "mode": mode,
                    "clean": clean[m].mean(), "ablated": ablated[m][l, h].mean(),
                    "delta": point[k], "ci_lo": lo[k], "ci_hi": hi[k], "importance": SIGN[m] * point[k],
                    "n_examples": N, "n_boot": n_boot, "level": level,
                    "layer_gap": gap, "layer_gap_lo": float(glo), "layer_gap_hi": float(ghi),
                })
    return pd.DataFrame(rows)


def compute(model, data, mode: str = "zero", n_boot: int = 1000, seed: int = 0, level: float = 0.95,
            method: str = "fast", batch_size: int | None = None, max_examples: int | None = None,
            trim: bool = True, share_kv: bool = True) -> pd.DataFrame:
    """Ablation sweep over every head of every layer on the test split of `data`."""
    x, y = split_xy(data, "test")
    if y is None:
        raise ValueError("head ablation needs labels: pass a Dataset or an (x, y) tuple")
    idx = subsample(len(x), max_examples, seed)
    x, y = x[idx], y[idx]
    res = per_example(model, x, y, mode=mode, method=method, batch_size=batch_size, trim=trim, share_kv=share_kv,
                      seed=seed)
    return table_from_examples(res, mode=mode, n_boot=n_boot, seed=seed, level=level)




def table_name(mode: str) -> str:
    return "ablation" if mode == "zero" else f"ablation_{mode}"


def run(run, mode: str = "zero", device: str = "cpu", **params) -> pd.DataFrame:
    """Load the run's model on `device` and its dataset, sweep, save as table `ablation` (`ablation_mean`,
    `ablation_resample` for the other modes), with the device in column `analysed_on` (fp32 on either; a GPU's
    sums round differently)."""
    model = run.load_model(device)
    df = tag(compute(model, run_data(run), mode=mode, **params), run)
    df.insert(len(df.columns), "analysed_on", torch.device(device).type)
    run.save_table(table_name(mode), df)
    return df


def run_resample(run_, **params) -> pd.DataFrame:
    """Resample ablation of a run, stored as `ablation_resample`."""
    return run(run_, mode="resample", **params)


# ---- aggregation over seeds ------------------------------------------------------------------
def aggregate_seeds(tables: list[pd.DataFrame], level: float = 0.95) -> pd.DataFrame:
    """Mean and interval over seeds of several runs' ablation tables (same configuration).

    delta = mean over seeds; ci_lo/ci_hi = Student-t interval of that mean over seeds (with a single
    seed: that seed's bootstrap interval). The layer gap is recomputed for the top and second heads of
    the mean deltas, per seed, and given the same kind of interval. Columns as `compute`, plus
    `n_seeds`, `delta_sd` and `interval` ("t over seeds" | "bootstrap")."""
    from scipy import stats

    if not tables:
        raise ValueError("aggregate_seeds needs at least one ablation table")
    keys = ["layer", "head", "metric", "mode"]
    frames = []
    for i, t in enumerate(tables):
        t = t.copy()
        t["_seed"] = i
        frames.append(t)
    all_ = pd.concat(frames, ignore_index=True)
    n = len(tables)
    g = all_.groupby(keys, sort=True)
    spec = {"delta": ("delta", "mean"), "delta_sd": ("delta", "std")}
    for col, how in (("clean", "mean"), ("ablated", "mean"), ("n_examples", "sum")):
        if col in all_.columns:
            spec[col] = (col, how)
    out = g.agg(**spec).reset_index()
    out["importance"] = out["metric"].map(SIGN) * out["delta"]
    if n == 1:
        one = tables[0].set_index(keys)
        out["ci_lo"] = one.loc[[tuple(r) for r in out[keys].values], "ci_lo"].values
        out["ci_hi"] = one.loc[[tuple(r) for r in out[keys].values], "ci_hi"].values
        out["interval"] = "bootstrap"
    else:
        half = stats.t.ppf(0.5 + level / 2, n - 1) * out["delta_sd"].fillna(0) / np.sqrt(n)
        out["ci_lo"], out["ci_hi"] = out["delta"] - half, out["delta"] + half
        out["interval"] = "t over seeds"
    out["n_seeds"] = n
    out["level"] = level
    # layer gap (importance top - second, heads chosen on the mean) with its interval over seeds
    gap_rows = []
    for (l, m, mode), sub in out.groupby(["layer", "metric", "mode"]):
        order = sub.sort_values(["importance", "head"], ascending=[False, True])["head"].tolist()
        top, second = order[0], (order[1] if len(order) > 1 else None)
        per_seed = []
        for t in tables:
            s = t[(t.layer == l) & (t.metric == m) & (t["mode"] == mode)].set_index("head")["importance"]
            per_seed.append(s[top] - (s[second] if second is not None else 0.0))
        per_seed = np.asarray(per_seed)
        gap = per_seed.mean()
        if n == 1:
            t0 = tables[0]
            r = t0[(t0.layer == l) & (t0.metric == m) & (t0["mode"] == mode)].iloc[0]
            glo, ghi = r["layer_gap_lo"], r["layer_gap_hi"]
        else:
            half = stats.t.ppf(0.5 + level / 2, n - 1) * per_seed.std(ddof=1) / np.sqrt(n)
            glo, ghi = gap - half, gap + half
        gap_rows.append({"layer": l, "metric": m, "mode": mode, "layer_gap": gap,
                         "layer_gap_lo": glo, "layer_gap_hi": ghi})
    out = out.merge(pd.DataFrame(gap_rows), on=["layer", "metric", "mode"], how="left")
    for key in ("scheme", "task"):
        if key in all_.columns and all_[key].nunique(dropna=False) == 1:
            out.insert(0, key, all_[key].iloc[0])
    return out


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the head whose ablation drops accuracy most, with
    its interval."""
    acc = df[df.metric == "accuracy"]
    r = acc.loc[acc["delta"].idxmax()]
    return (f"largest accuracy drop: layer {int(r.layer)}, head {int(r['head'])}, delta {r.delta:.3f} "
            f"[{r.ci_lo:.3f}, {r.ci_hi:.3f}] (clean accuracy {r.clean:.3f}, {int(r.n_examples)} examples)")
