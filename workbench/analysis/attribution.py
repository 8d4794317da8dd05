"""Attribution patching (AtP): a gradient estimate of activation patching, every site in one forward and backward
(Nanda 2023, "Attribution patching"; Syed et al. 2023; Kramár et al. 2024, AtP*). docs/analyses.md.

For the same counterfactual pairs and sites as `patching` (every head's `blocks.{l}.attn.hook_z[:, :, h]` and every
layer's `blocks.{l}.hook_resid_post`, at all, trigger and non-trigger positions), with LD = logit[label_cf] -
logit[label], the first-order Taylor estimate of patching site s from the counterfactual into the clean run is

    LD_patched(s) - LD_clean  ~  sum over the site's positions p and dims d of (a_cf - a_clean)[p, d] * dLD/da[p, d]

with a the site's activation and the gradient taken on the clean run. It is normalised as `patching` normalises
the real patch, effect(s) = mean_pairs(estimate) / mean_pairs(LD_cf - LD_clean), with the same bootstrap interval
(`patching.table_from_pairs`). One clean forward and backward and one counterfactual forward per batch give every
site at once, where patching runs a copy of the model's upper layers per site: a fast screen, exact only where
the path from the site to LD is linear (tests/test_attribution.py), and known to miss heads whose effect the
linear term misjudges (attention saturation, cancelling contributions: Kramár et al. 2024). So it is checked
against real patching: `check_against` joins a run's `patching` table, computed on the same pairs, and gives each
site's patched effect and each position set's rank correlation over heads.

With `ig_steps` M > 0 (AtP-IG) dLD/da is averaged over M points on the straight line of token embeddings from the
clean input to the counterfactual one (integrated gradients, Sundararajan et al. 2017; as EAP-IG, Hanna et al. 2024),
and `completeness` says whether that path is integrated (`completeness`).
"""
from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np
import pandas as pd
import torch

from .common import batches, run_data, tag
from .patching import SETS, _check, normalised, pairs_for, position_masks, table_from_pairs, zero_tolerance

CHECK_COLUMNS = ("patching_effect", "patching_lo", "patching_hi", "in_patching_ci", "rank_corr", "check")
NO_PATCHING = "no patching table for this run: compute `patching` (same n_pairs and seed), then attribution again"
ROUNDING = 1e-5  # an estimate this close to patching's interval counts as inside it (float32 rounding of an effect)
OTHER_PAIRS = ("the run's patching table was computed on other pairs (its mean clean / counterfactual LD differ): "
               "compute both with the same n_pairs and seed")


def path_points(ig_steps: int) -> list[float]:
    """Where the gradient is taken, as a fraction alpha of the way from the clean input to the counterfactual one:
    [0] (the clean run: plain AtP) for `ig_steps` 0, else the midpoints (k - 1/2) / ig_steps, k = 1..ig_steps."""
    if ig_steps < 0:
        raise ValueError(f"ig_steps={ig_steps} is negative: use 0 (plain AtP) or a number of interpolation steps")
    return [0.0] if ig_steps == 0 else [(k + 0.5) / ig_steps for k in range(ig_steps)]


@contextlib.contextmanager
def embedding_at(model, cf: torch.Tensor, alpha: float):
    """Inside the `with`, the token embedding (`hook_embed`) of a forward on the clean tokens is moved the fraction
    `alpha` toward the counterfactual tokens' embedding: e + alpha (e_cf - e). Clean and counterfactual rows have the
    same length and pads, so at alpha = 1 the forward is the counterfactual run (positions, mask and readout do not
    depend on the embedding)."""
    if alpha == 0:
        yield
        return
    with torch.no_grad():
        e_cf = model.embed(cf)
    with model.hooks(fwd_hooks=[("hook_embed", lambda e, hook: e + alpha * (e_cf - e))]):
        yield


@contextlib.contextmanager
def gradient_dropped(model, layer: int):
    """Inside the `with`, layer `layer`'s attention and MLP outputs (`hook_attn_out`, `hook_mlp_out`) are detached:
    the forward is unchanged, and no gradient flows back through that layer's contribution to the stream (GradDrop,
    Kramár et al. 2024, section 3.2); only its skip connection carries it."""
    names = [f"blocks.{layer}.hook_attn_out", f"blocks.{layer}.hook_mlp_out"]
    with model.hooks(fwd_hooks=[(n, lambda t, hook: t.detach()) for n in names]):
        yield


def forward_keeping(model, tokens: torch.Tensor, names: list[str], grad: bool):
    """(logits, {hook name: activation}); with `grad` the activations are kept in the graph (leaves where the
    model's weights need no gradient), so LD can be differentiated with respect to them."""
    acts: dict[str, torch.Tensor] = {}

    def keep(t, hook):
        if grad and not t.requires_grad:
            t = t.detach().requires_grad_()
        acts[hook.name] = t if grad else t.detach()
        return t

    with torch.set_grad_enabled(grad):
        logits = model.run_with_hooks(tokens, fwd_hooks=[(n, keep) for n in names])
    return logits, acts


def path_gradients(model, clean: torch.Tensor, cf: torch.Tensor, y: torch.Tensor, y_cf: torch.Tensor,
                   names: list[str], ig_steps: int = 0):
    """(clean logits, the clean run's activations at `names` (detached), dLD/d(activation) at each name averaged
    over `path_points(ig_steps)`: the clean run's gradient for 0, else the integrated-gradients average along the
    straight line of token embeddings from clean to counterfactual (Sundararajan et al. 2017; EAP-IG, Hanna et al.
    2024)). The activations are those of the clean run whatever the steps."""
    b = torch.arange(len(clean), device=clean.device)
    alphas = path_points(ig_steps)
    grads = {n: 0.0 for n in names}
    logits = acts = None
    for a in alphas:
        with embedding_at(model, cf, a):
            lg, at = forward_keeping(model, clean, names, grad=True)
        g = torch.autograd.grad((lg[b, y_cf] - lg[b, y]).sum(), [at[n] for n in names], allow_unused=True)
        g = [torch.zeros_like(at[n]) if gi is None else gi for n, gi in zip(names, g)]  # None: cut off (GradDrop)
        grads = {n: grads[n] + gi / len(alphas) for n, gi in zip(names, g)}
        if a == 0:
            logits, acts = lg.detach(), {n: t.detach() for n, t in at.items()}
    if acts is None:
        logits, acts = forward_keeping(model, clean, names, grad=False)
    return logits, acts, grads


def _site_names(model) -> tuple[list[str], list[str]]:
    """The sites `estimates` reads: every layer's hook_z, and every layer's hook_resid_post."""
    L = model.cfg.n_layers
    return [f"blocks.{l}.attn.hook_z" for l in range(L)], [f"blocks.{l}.hook_resid_post" for l in range(L)]


def counterfactual_run(model, cf: torch.Tensor):
    """(logits, activations) of the counterfactual forward at the sites `estimates` reads (and hook_embed)."""
    z_names, r_names = _site_names(model)
    return forward_keeping(model, cf, z_names + r_names + ["hook_embed"], grad=False)


def estimates(model, clean: torch.Tensor, cf: torch.Tensor, trig: torch.Tensor, y: torch.Tensor,
              y_cf: torch.Tensor, ig_steps: int = 0, cf_run=None):
    """(LD_clean [B], LD_cf [B], estimated LD_patched - LD_clean [L, n_sets, H + 1, B], the token embedding's
    estimate [B]) for one batch of pairs; index H of the third axis is the layer's residual stream. The last is
    (e_cf - e_clean) . dLD/de, which integrated gradients make LD_cf - LD_clean as the steps grow (completeness).
    `cf_run`: the batch's `counterfactual_run`, when the caller already has it (GradDrop's repeated estimates)."""
    cfg = model.cfg
    L, H = cfg.n_layers, cfg.n_heads
    z_names, r_names = _site_names(model)
    names = z_names + r_names + ["hook_embed"]
    b = torch.arange(len(clean), device=clean.device)
    cf_logits, cf_acts = cf_run or counterfactual_run(model, cf)
    logits, acts, grads = path_gradients(model, clean, cf, y, y_cf, names, ig_steps)
    ld = logits[b, y_cf] - logits[b, y]
    pm = position_masks(trig, clean, pads=not model.cfg.pads_are_inert).to(clean.device)  # [S, B, pos]
    est = torch.empty(L, pm.shape[0], H + 1, len(clean), dtype=torch.float64)
    with torch.no_grad():
        for l, (zn, rn) in enumerate(zip(z_names, r_names)):
            dz = ((cf_acts[zn] - acts[zn]) * grads[zn]).sum(-1)  # [B, pos, H]
            dr = ((cf_acts[rn] - acts[rn]) * grads[rn]).sum(-1)  # [B, pos]
            w = pm.to(dz.dtype)
            est[l, :, :H] = torch.einsum("sbp,bph->shb", w, dz).double().cpu()
            est[l, :, H] = torch.einsum("sbp,bp->sb", w, dr).double().cpu()
        ld_cf = (cf_logits[b, y_cf] - cf_logits[b, y]).double().cpu()
        embed = ((cf_acts["hook_embed"] - acts["hook_embed"]) * grads["hook_embed"]).sum((1, 2)).double().cpu()
    return ld.detach().double().cpu(), ld_cf, est, embed


def over_pairs(model, pairs, batch_size: int, step: Callable) -> None:
    """`step(idx, clean, cf, trig, y, y_cf)` on each length-trimmed batch of pairs (`trig`: the trigger mask), in
    eval mode; gradients stay on (the steps differentiate)."""
    cfg = model.cfg
    y, y_cf = torch.as_tensor(pairs.clean_y), torch.as_tensor(pairs.cf_y)
    was = model.training
    model.eval()
    try:
        for idx, tok, _ in batches(pairs.clean_x, batch_size, trim=cfg.pads_are_inert, device=cfg.device):
            width = tok.shape[1]
            cf = torch.as_tensor(pairs.cf_x[idx, :width], device=cfg.device)
            trig = torch.as_tensor(pairs.trigger_mask[idx, :width], device=cfg.device)
            a = torch.as_tensor(idx)
            step(idx, tok, cf, trig, y[a].to(tok.device), y_cf[a].to(tok.device))
    finally:
        model.train(was)


def inside(effect: pd.Series, lo: pd.Series, hi: pd.Series) -> pd.Series:
    """1.0 where `effect` lies in [lo, hi] (to `ROUNDING`), 0.0 where not, NaN where either is missing."""
    ok = (effect >= lo - ROUNDING) & (effect <= hi + ROUNDING)
    return ok.where(lo.notna() & effect.notna()).astype(float)


def largest(values: pd.Series, k: int) -> list:
    """Index of the k entries of largest |value|, NaNs left out (the rows a table checks for real)."""
    top = values.abs().sort_values(ascending=False, na_position="last").index[:k]
    return [i for i in top if np.isfinite(values[i])]


def with_real(df: pd.DataFrame, res: dict[str, np.ndarray], rows: list, real: np.ndarray, prefix: str,
              inside_cols: dict[str, str], n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """`df` with the real patches `real` [len(rows), N] of `rows` normalised as the estimates are
    (`patching.normalised`) into `{prefix}_effect`, `{prefix}_lo`, `{prefix}_hi`, and for each estimate column of
    `inside_cols` whether it lies inside that interval (`inside`) in the named column; other rows keep theirs."""
    df = df.copy()
    if not rows:
        return df
    r = normalised(real.T, res, n_boot=n_boot, seed=seed, level=level)
    for col, key in (("effect", "effect"), ("lo", "ci_lo"), ("hi", "ci_hi")):
        df.loc[rows, f"{prefix}_{col}"] = r[key]
    for est, col in inside_cols.items():
        df.loc[rows, col] = inside(df.loc[rows, est], df.loc[rows, f"{prefix}_lo"], df.loc[rows, f"{prefix}_hi"])
    return df


def per_pair(model, pairs, batch_size: int = 64, ig_steps: int = 0,
             grad_drop: bool = False) -> dict[str, np.ndarray]:
    """Per-pair logit differences as `patching.per_pair` gives them, with `ld_patched` [L, n_sets, H + 1, N] the
    first-order estimate LD_clean + sum (a_cf - a_clean) . dLD/da instead of a patched forward (dLD/da averaged
    along the path for `ig_steps` > 0), and `embed_shift` [N] the token embedding's estimate. With `grad_drop`,
    also `dropped` [L, L, n_sets, H + 1, N]: the estimated shifts with the gradient through layer k dropped
    (`gradient_dropped`), k first."""
    _check(model, pairs)
    cfg = model.cfg
    L, H, N = cfg.n_layers, cfg.n_heads, len(pairs)
    if grad_drop and ig_steps:
        raise ValueError("grad_drop and ig_steps > 0 together would take L x ig_steps backward passes a batch: "
                         "choose one")
    if grad_drop and L < 2:
        raise ValueError("grad_drop needs at least 2 layers (its estimate averages over the L - 1 layers it can drop "
                         "without cutting a site off)")
    res = {"ld_clean": np.zeros(N), "ld_cf": np.zeros(N), "ld_patched": np.zeros((L, len(SETS), H + 1, N)),
           "embed_shift": np.zeros(N)}
    if grad_drop:
        res["dropped"] = np.zeros((L, L, len(SETS), H + 1, N))

    def step(idx, clean, cf, trig, y, y_cf):
        cf_run = counterfactual_run(model, cf)  # one counterfactual forward a batch, however many estimates
        ld, ld_cf, est, embed = estimates(model, clean, cf, trig, y, y_cf, ig_steps, cf_run)
        res["ld_clean"][idx], res["ld_cf"][idx], res["embed_shift"][idx] = ld.numpy(), ld_cf.numpy(), embed.numpy()
        res["ld_patched"][..., idx] = (ld[None, None, None] + est).numpy()
        for k in range(L if grad_drop else 0):
            with gradient_dropped(model, k):
                res["dropped"][k][..., idx] = estimates(model, clean, cf, trig, y, y_cf, cf_run=cf_run)[2].numpy()

    over_pairs(model, pairs, batch_size, step)
    return res


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two vectors (NaN with fewer than 3 finite pairs or a constant one)."""
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return float("nan")
    ra, rb = (pd.Series(v[ok]).rank().to_numpy() for v in (a, b))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def check_against(atp: pd.DataFrame, patched: pd.DataFrame | None) -> pd.DataFrame:
    """`atp` with the real patching of each site beside its estimate: `patching_effect`, `patching_lo`,
    `patching_hi`, `in_patching_ci` (the estimate inside patching's interval, to `ROUNDING`), `rank_corr`
    (Spearman over the heads of each position set) and `check` (empty when joined, else why not: no patching table,
    or one computed on other pairs, recognised by its mean clean / counterfactual LD)."""
    out = atp.drop(columns=[c for c in CHECK_COLUMNS if c in atp.columns])
    keys = ["site", "layer", "head", "positions"]
    note = ""
    if patched is None or not len(patched):
        note = NO_PATCHING
    else:
        same = all(np.isclose(float(patched[c].iloc[0]), float(atp[c].iloc[0]), rtol=1e-6, atol=1e-6)
                   for c in ("ld_clean", "ld_cf")) and int(patched["n_pairs"].iloc[0]) == int(atp["n_pairs"].iloc[0])
        if not same:
            note = OTHER_PAIRS
    if note:
        for c in CHECK_COLUMNS[:-1]:
            out[c] = np.nan
        out["check"] = note
        return out
    p = patched[keys + ["effect", "ci_lo", "ci_hi"]].rename(
        columns={"effect": "patching_effect", "ci_lo": "patching_lo", "ci_hi": "patching_hi"})
    out = out.merge(p, on=keys, how="left")
    out["in_patching_ci"] = inside(out["effect"], out["patching_lo"], out["patching_hi"])
    out["rank_corr"] = np.nan
    for pos in SETS:
        rows = (out["site"] == "head") & (out["positions"] == pos)
        out.loc[out["positions"] == pos, "rank_corr"] = _spearman(out.loc[rows, "effect"].to_numpy(float),
                                                                  out.loc[rows, "patching_effect"].to_numpy(float))
    out["check"] = ""
    return out


def completeness(res: dict[str, np.ndarray]) -> float:
    """The token embedding's estimate over the whole counterfactual difference, mean(embed_shift) / mean(LD_cf -
    LD_clean): 1 when the gradients integrate the model's path from clean to counterfactual (integrated gradients'
    completeness; the midpoint rule's error falls as 1 / ig_steps^2), anything for plain AtP, where it says how far
    from linear the whole model is between the two inputs. NaN where the counterfactual does not move LD."""
    den = float(np.mean(res["ld_cf"] - res["ld_clean"]))
    return float(np.mean(res["embed_shift"]) / den) if abs(den) > zero_tolerance(res) else float("nan")


def grad_drop_scores(res: dict[str, np.ndarray]) -> np.ndarray:
    """GradDrop (Kramár et al. 2024, section 3.2) of every site, in `table_from_pairs`' row order: the mean, over
    the layers k whose drop leaves the site connected, of |effect with the gradient through layer k dropped|, each
    effect normalised as `patching` normalises (NaN where the counterfactual moves nothing). Dropping a head's own
    layer cuts it off (0), so a head averages over the other L - 1; a stream site (after its layer's outputs) over
    all L. A magnitude, no sign: a site whose paths cancel in AtP scores on the paths apart."""
    dropped = res["dropped"]  # [k, L, S, K, N]
    L, _, S, K, N = dropped.shape
    total = sum(np.abs(normalised(dropped[k].reshape(-1, N).T, res, n_boot=0)["effect"]) for k in range(L))
    connected = np.where(np.arange(K) < K - 1, L - 1, L)  # heads, then the stream
    return (total.reshape(L, S, K) / connected).ravel()


def compute(model, data, n_pairs: int = 256, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
            batch_size: int = 64, ig_steps: int = 0, grad_drop: bool = False) -> pd.DataFrame:
    """The AtP estimate of every head's (and every layer's stream) patching effect on `data`'s counterfactual
    pairs: `patching`'s table, columns and pairs alike (same `n_pairs` and `seed`, same pairs), `effect` estimated;
    `method` "atp", or "atp_ig" with `ig_steps` > 0 (the gradient integrated along the inputs' path: `path_gradients`),
    `ig_steps` and `completeness` (see `completeness`) as columns; with `grad_drop`, the column `grad_drop`
    (`grad_drop_scores`: L more backward passes a batch), else NaN."""
    pairs = pairs_for(data, n_pairs, seed)
    res = per_pair(model, pairs, batch_size=batch_size, ig_steps=ig_steps, grad_drop=grad_drop)
    df = table_from_pairs(res, n_boot=n_boot, seed=seed, level=level)
    df.insert(0, "method", "atp_ig" if ig_steps else "atp")
    df["ig_steps"], df["completeness"] = ig_steps, completeness(res)
    df["grad_drop"] = grad_drop_scores(res) if grad_drop else np.nan
    return df


def run(run, **params) -> pd.DataFrame:
    """Load the run's model and dataset, estimate, check against the run's `patching` table when it has one, save
    as table `attribution`."""
    df = tag(compute(run.load_model(), run_data(run), **params), run)
    patched = run.load_table("patching") if "patching" in run.tables() else None
    df = check_against(df, patched)
    run.save_table("attribution", df)
    return df


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the largest estimated head effect and its check
    against patching."""
    h = df[(df.site == "head") & (df.positions == "all")]
    if h["effect"].isna().all():
        return f"undefined: {df['note'].iloc[0]}"
    r = h.loc[h["effect"].idxmax()]
    check = (f"rank correlation with patching over heads {h['rank_corr'].iloc[0]:+.2f}, "
             f"{int(h['in_patching_ci'].sum())} of {int(h['in_patching_ci'].notna().sum())} estimates inside "
             "patching's interval" if not df["check"].iloc[0] else df["check"].iloc[0])
    ig = (f"; {int(df['ig_steps'].iloc[0])} IG steps, completeness {df['completeness'].iloc[0]:.3f}"
          if "ig_steps" in df.columns and df["ig_steps"].iloc[0] else "")
    gd = ""
    if "grad_drop" in h.columns and h["grad_drop"].notna().any():
        g = h.loc[h["grad_drop"].idxmax()]
        gd = f"; largest GradDrop score: layer {int(g.layer)}, head {int(g['head'])}, {g.grad_drop:.2f}"
    return (f"largest estimated head effect: layer {int(r.layer)}, head {int(r['head'])}, {r.effect:.2f}; "
            f"{check}{ig}{gd}")
