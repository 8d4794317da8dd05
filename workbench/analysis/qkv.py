"""Where a head's patching effect enters: its queries, its keys or its values, by attribution patching with the
AtP* correction for queries and keys (Kramár et al. 2024, "AtP*: an efficient and scalable method for localizing
LLM behaviour to components", section 3.1), checked against real patching of the largest. docs/analyses.md.

Position enters attention through q and k (a rotation, a bias on their scores), content through v. For the pairs,
position sets and normalisation of `patching` (same `n_pairs` and `seed`), each head's `blocks.{l}.attn.hook_q`,
`hook_k` and `hook_v` [batch, pos, head, d_head] is patched from the counterfactual run into the clean one at the
set's positions (query positions for q, key positions for k and v). Two estimates of LD_patched - LD_clean:

    AtP   (linear)        sum over the set's positions and dims of (a_cf - a_clean) . dLD/da
    AtP*  (q and k)       sum over query and key positions of (A' - A) . dLD/dA

where A = softmax(s) is the clean attention pattern, s its scores (bias and mask included), and A' the pattern
recomputed exactly with the patched queries (or keys): s' = s + scores(rotate(q', k)) - scores(rotate(q, k)), rows
(columns) outside the set unchanged. AtP* is exact through the softmax, where a query or key patch saturates (a
pattern that moves from one key to another is all but flat in the linear term), and linear from the pattern on; for
v the two are the same. Effects are `patching.normalised`: mean over pairs / mean(LD_cf - LD_clean), with its
bootstrap interval. The `check_per_site` rows of largest |AtP*| of each site are patched for real (one forward a row:
`patch_effect`, its interval, and whether each estimate lies inside it; None: every row, the exact table). Kramár et
al.'s second fix, GradDrop (against cancellation across layers), is built for head outputs and the stream
(`attribution`, grad_drop=True), not for q, k and v. Measured: a good screen in the `paper`
arch (keys and values from the embedding), a weak one in the decoder, where queries and keys read the stream and a
moved pattern acts through later attention (docs/analyses.md): there, trust the real patches.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .attribution import _spearman, forward_keeping, largest, over_pairs, with_real
from .patching import SETS, _check, normalised, pairs_for, position_masks

SITES = ("query", "key", "value")
PLURAL = {"query": "queries", "key": "keys", "value": "values"}
PATCH_COLUMNS = ("patch_effect", "patch_lo", "patch_hi", "in_patch_ci", "atp_in_patch_ci")
_HOOK = {"query": "q", "key": "k", "value": "v"}


def _names(l: int, *parts: str) -> list[str]:
    return [f"blocks.{l}.attn.hook_{p}" for p in parts]


def estimates(model, clean: torch.Tensor, cf: torch.Tensor, trig: torch.Tensor, y: torch.Tensor,
              y_cf: torch.Tensor):
    """(LD_clean [B], LD_cf [B], AtP [L, 3, n_sets, H, B], AtP* [L, 3, n_sets, H, B]) for one batch of pairs; the
    second axis is `SITES` (query, key, value), each entry an estimated LD_patched - LD_clean."""
    cfg = model.cfg
    L, H, B = cfg.n_layers, cfg.n_heads, len(clean)
    keep = [n for l in range(L) for n in _names(l, "q", "k", "v", "pattern", "attn_scores")]
    grad_names = [n for l in range(L) for n in _names(l, "q", "k", "v", "pattern")]
    b = torch.arange(B, device=clean.device)
    cf_logits, cf_acts = forward_keeping(model, cf, [n for l in range(L) for n in _names(l, "q", "k", "v")],
                                         grad=False)
    logits, acts = forward_keeping(model, clean, keep, grad=True)
    ld = logits[b, y_cf] - logits[b, y]
    grads = torch.autograd.grad(ld.sum(), [acts[n] for n in grad_names], allow_unused=True)
    grads = {n: torch.zeros_like(acts[n]) if g is None else g for n, g in zip(grad_names, grads)}
    pm = position_masks(trig, clean, pads=not model.cfg.pads_are_inert).to(clean.device)  # [S, B, pos]
    S = pm.shape[0]
    lin = torch.empty(L, len(SITES), S, H, B, dtype=torch.float64)
    star = torch.empty_like(lin)
    with torch.no_grad():
        for l in range(L):
            q, k, v, pattern, s = (acts[n].detach() for n in _names(l, "q", "k", "v", "pattern", "attn_scores"))
            g_pattern = grads[f"blocks.{l}.attn.hook_pattern"]
            attn = model.blocks[l].attn
            raw = attn.scores(*attn.rotate(q, k))
            for i, site in enumerate(SITES):
                name = _names(l, _HOOK[site])[0]
                a_cf, a = cf_acts[name], acts[name].detach()
                per_pos = ((a_cf - a) * grads[name]).sum(-1)  # [B, pos, H]
                lin[l, i] = torch.einsum("sbp,bph->shb", pm.to(per_pos.dtype), per_pos).double().cpu()
                if site == "value":
                    star[l, i] = lin[l, i]
                    continue
                patched = attn.scores(*attn.rotate(a_cf, k)) if site == "query" else attn.scores(*attn.rotate(q, a_cf))
                for j in range(S):
                    w = pm[j][:, None, :, None] if site == "query" else pm[j][:, None, None, :]  # rows or columns
                    s_new = s + w.to(s.dtype) * (patched - raw)
                    shift = ((torch.softmax(s_new, -1) - pattern) * g_pattern).sum((-1, -2))  # [B, H]
                    star[l, i, j] = shift.T.double().cpu()
        ld_cf = (cf_logits[b, y_cf] - cf_logits[b, y]).double().cpu()
    return ld.detach().double().cpu(), ld_cf, lin, star


def patched(model, clean: torch.Tensor, cf: torch.Tensor, trig: torch.Tensor, y: torch.Tensor,
            y_cf: torch.Tensor, chosen: list[tuple[str, int, int, int]]) -> list[torch.Tensor]:
    """The real LD_patched - LD_clean [B] of each chosen (site, layer, head, set index): head's q, k or v at the
    set's positions replaced by the counterfactual run's, the rest of the forward recomputed (one forward each)."""
    b = torch.arange(len(clean), device=clean.device)
    names = sorted({_names(l, _HOOK[site])[0] for site, l, _, _ in chosen})
    pm = position_masks(trig, clean, pads=not model.cfg.pads_are_inert).to(clean.device).bool()
    out = []
    with torch.no_grad():
        _, cf_acts = forward_keeping(model, cf, names, grad=False)
        lg = model(clean)
        ld = lg[b, y_cf] - lg[b, y]
        for site, l, h, j in chosen:
            name = _names(l, _HOOK[site])[0]

            def swap(a, hook, h=h, m=pm[j], src=cf_acts[name]):
                a = a.clone()
                a[:, :, h] = torch.where(m[..., None], src[:, :, h], a[:, :, h])
                return a

            lg = model.run_with_hooks(clean, fwd_hooks=[(name, swap)])
            out.append((lg[b, y_cf] - lg[b, y] - ld).double().cpu())
    return out


def per_pair(model, pairs, batch_size: int = 64) -> dict[str, np.ndarray]:
    """ld_clean, ld_cf [N]; `atp` and `atp_star` [L, 3, n_sets, H, N], the two estimated LD shifts."""
    _check(model, pairs)
    cfg = model.cfg
    N, shape = len(pairs), (cfg.n_layers, len(SITES), len(SETS), cfg.n_heads, len(pairs))
    res = {"ld_clean": np.zeros(N), "ld_cf": np.zeros(N), "atp": np.zeros(shape), "atp_star": np.zeros(shape)}

    def step(idx, clean, cf, trig, y, y_cf):
        ld, ld_cf, lin, star = estimates(model, clean, cf, trig, y, y_cf)
        res["ld_clean"][idx], res["ld_cf"][idx] = ld.numpy(), ld_cf.numpy()
        res["atp"][..., idx], res["atp_star"][..., idx] = lin.numpy(), star.numpy()

    over_pairs(model, pairs, batch_size, step)
    return res


def patch_per_pair(model, pairs, chosen: list[tuple[str, int, int, int]], batch_size: int = 64) -> np.ndarray:
    """[len(chosen), N]: the real LD shift of each chosen patch (`patched`)."""
    out = np.zeros((len(chosen), len(pairs)))

    def step(idx, clean, cf, trig, y, y_cf):
        out[:, idx] = np.stack([r.numpy() for r in patched(model, clean, cf, trig, y, y_cf, chosen)])

    over_pairs(model, pairs, batch_size, step)
    return out


def table(res: dict[str, np.ndarray], n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """One row per (site, layer, head, positions) of `per_pair`'s estimates: `effect` (AtP*) and `atp` (linear),
    each with its bootstrap interval (`patching.normalised`); the real-patch columns NaN until `add_patches`."""
    L, n_sites, S, H, N = res["atp"].shape
    keys = [(site, l, h, positions) for l in range(L) for site in SITES for positions in SETS for h in range(H)]
    df = pd.DataFrame(keys, columns=["site", "layer", "head", "positions"])
    star = normalised(res["atp_star"].reshape(-1, N).T, res, n_boot=n_boot, seed=seed, level=level)
    lin = normalised(res["atp"].reshape(-1, N).T, res, n_boot=n_boot, seed=seed, level=level)
    df["effect"], df["ci_lo"], df["ci_hi"], df["ld_shift"] = (star[k] for k in ("effect", "ci_lo", "ci_hi",
                                                                               "ld_shift"))
    df["atp"], df["atp_lo"], df["atp_hi"] = lin["effect"], lin["ci_lo"], lin["ci_hi"]
    df["ld_clean"], df["ld_cf"] = res["ld_clean"].mean(), res["ld_cf"].mean()
    df["n_pairs"], df["n_boot"], df["level"], df["note"] = N, n_boot, level, star["note"]
    for c in PATCH_COLUMNS:
        df[c] = np.nan
    return df


def chosen(df: pd.DataFrame, rows: list[int]) -> list[tuple[str, int, int, int]]:
    """The (site, layer, head, set index) of each row, as `patched` takes them."""
    return [(df.at[i, "site"], int(df.at[i, "layer"]), int(df.at[i, "head"]), SETS.index(df.at[i, "positions"]))
            for i in rows]


def add_patches(df: pd.DataFrame, res: dict[str, np.ndarray], rows: list[int], real: np.ndarray,
                n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """`df` with the real patches `real` [len(rows), N] of `rows` normalised beside their estimates: `patch_effect`,
    `patch_lo`, `patch_hi`, and `in_patch_ci` / `atp_in_patch_ci` (AtP* / AtP inside that interval, to 1e-5)."""
    return with_real(df, res, rows, real, "patch", {"effect": "in_patch_ci", "atp": "atp_in_patch_ci"},
                     n_boot=n_boot, seed=seed, level=level)


def agreement(df: pd.DataFrame) -> pd.DataFrame:
    """Per site, over the rows patched for real: how many, and for AtP* and AtP each the Spearman correlation
    with the real patch, the estimates inside its interval and the largest |estimate - patch|."""
    out = []
    for site, sub in df[df["patch_effect"].notna()].groupby("site", sort=False):
        row = {"site": site, "checked": len(sub)}
        for est, ins, name in (("effect", "in_patch_ci", "atp_star"), ("atp", "atp_in_patch_ci", "atp")):
            row[f"{name}_rank_corr"] = _spearman(sub[est].to_numpy(float), sub["patch_effect"].to_numpy(float))
            row[f"{name}_inside"] = int(sub[ins].sum())
            row[f"{name}_max_miss"] = float((sub[est] - sub["patch_effect"]).abs().max())
        out.append(row)
    return pd.DataFrame(out)


def shares(df: pd.DataFrame, positions: str = "all", value: str = "effect") -> pd.DataFrame:
    """Per site at `positions`: the sum over heads of |value| (`total`; `value` "effect" = AtP*, "atp", or
    "patch_effect" = the real patches, when every row was patched), its share of the three sites' sum, the signed
    sum (`net`), and the head of largest |value| with its value: where the heads' effect enters, one row a site."""
    sub = df[df["positions"] == positions].assign(mag=lambda d: d[value].abs(), effect=lambda d: d[value])
    out = []
    for site in SITES:
        s = sub[sub["site"] == site]
        top = s.loc[s["mag"].idxmax()] if s["mag"].notna().any() else None
        out.append({"site": site, "total": float(s["mag"].sum()), "net": float(s["effect"].sum()),
                    "top_head": None if top is None else f"L{int(top.layer)}.H{int(top['head'])}",
                    "top_effect": float("nan") if top is None else float(top["effect"])})
    res = pd.DataFrame(out)
    whole = res["total"].sum()
    res["share"] = res["total"] / whole if whole > 0 else float("nan")
    return res


def exact(df: pd.DataFrame, positions: str = "all") -> bool:
    """Every row at `positions` whose estimate is defined was patched for real (`check_per_site=None`): its shares
    can be read from the real patches."""
    sub = df[(df["positions"] == positions) & df["effect"].notna()]
    return bool(len(sub)) and bool(sub["patch_effect"].notna().all())


def check_line(df: pd.DataFrame) -> str:
    """How the estimates of the rows patched for real fared, in words."""
    c = df[df["patch_effect"].notna()]
    if not len(c):
        return "not checked against real patching"
    return (f"{int(c['in_patch_ci'].sum())} of {len(c)} AtP* and {int(c['atp_in_patch_ci'].sum())} of {len(c)} AtP "
            "estimates inside the real patch's interval")


def compute(model, data, n_pairs: int = 256, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
            batch_size: int = 64, check_per_site: int | None = 7) -> pd.DataFrame:
    """`table` of every head's query, key and value estimates on `data`'s counterfactual pairs (`patching`'s pairs:
    same `n_pairs` and `seed`), the `check_per_site` rows of largest |AtP*| of each site (query, key, value: values
    often dominate, and queries and keys are where AtP* and AtP differ; None: every row, the exact table) patched
    for real (`add_patches`; NaN for the others). The real patches take the pairs a second time, one forward a
    checked row."""
    pairs = pairs_for(data, n_pairs, seed)
    res = per_pair(model, pairs, batch_size=batch_size)
    df = table(res, n_boot=n_boot, seed=seed, level=level)
    per_site = len(df) if check_per_site is None else check_per_site
    rows = [i for site in SITES for i in largest(df.loc[df["site"] == site, "effect"], per_site)]
    real = patch_per_pair(model, pairs, chosen(df, rows), batch_size) if rows else None
    return add_patches(df, res, rows, real, n_boot=n_boot, seed=seed, level=level)


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the largest query / key / value effect and the
    split of the summed effects."""
    if df["effect"].isna().all():
        return f"undefined: {df['note'].iloc[0]}"
    r = df.loc[df["effect"].abs().idxmax()]
    split = ", ".join(f"{s.site} {s.share:.0%}" for s in shares(df).itertuples())
    return (f"largest: layer {int(r.layer)}, head {int(r['head'])}, {r.site} ({r.positions} positions), "
            f"{r.effect:+.3f} [{r.ci_lo:+.3f}, {r.ci_hi:+.3f}]; sum of |AtP*| over heads: {split}; "
            f"{check_line(df)}")
