"""Self-repair: how much of a head's direct effect the rest of the model makes up when the head is ablated
(McGrath et al. 2023, "The Hydra effect: emergent self-repair in language model computations"; Rushing & Nanda
2024, "Explorations of self-repair in language models", which split it into downstream heads, MLPs and the final
LayerNorm). docs/analyses.md.

The measure m is, per test example, logit(label) - logit of the clean run's runner-up class (`measure="runner_up"`,
the default: a flipped prediction turns it negative), or the margin logit(label) - mean over classes of the logits
(`measure="margin"`, `dla`'s dla_vs_mean; on the trigger-distance task it moves with whole groups of neighbouring
classes, and it grew by 25 logits under the ablation of the head whose ablation cost 34 points of accuracy), and
`dla.components` splits it exactly into one direct term per component (embedding, every head, attention biases,
MLPs, bias), with the final LayerNorm's scale frozen. Ablate head (l, h) (its z replaced by 0, its mean or another
example's, as `ablation` does) and recompute everything after it; then per example

    total         = m(clean) - m(ablated)                                 (the effect ablation measures)
    direct        = -d_h,   d_c = term_c(ablated run, clean scale) - term_c(clean run, clean scale)
                    (zero ablation, measure="margin": the head's direct logit attribution, dla_vs_mean)
    via_heads     = sum of d_c over the heads of layers > l    (how much later heads' direct terms rose)
    via_mlps      = sum of d_c over the MLPs of layers >= l
    via_layernorm = sum_c term_c(ablated run, its own scale) - sum_c term_c(ablated run, clean scale)
    self_repair   = direct - total = via_heads + via_mlps + via_layernorm

(every other component is upstream of the head or a bias, so its d_c is 0; tests/test_self_repair.py checks the
identity against the logits). `repaired` = self_repair / direct = 1 - total / direct (means over examples): the share
of the direct effect made up downstream, 0 without repair, 1 when ablation moves nothing, above 1 when the model
over-compensates. The downstream change holds two things this split cannot tell apart: compensation, and the head's
own indirect effect (later components reading what it writes). Self-repair reads as repair for a head whose role is
direct (large `direct`); for a head that mainly feeds later ones, a negative value (|total| > |direct|) is its
indirect effect. Where a head's direct effect is small, `repaired` is undefined (NaN below `min_direct` logits). An
ablation drop that self-repair shrinks under-counts the head's role: one reason a deposit pattern (zero ablation,
docs/paper.md §5) can miss a head.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from workbench.model.attention import compute_dtype

from .common import batches, bootstrap_means, cache_hooks, evaluating, labelled_test, percentile_interval
from .ablation import MODES, head_means, partner_z, with_partners
from .dla import components, runner_up, store_names

PARTS = ("direct", "total", "via_heads", "via_mlps", "via_layernorm", "self_repair")


MEASURES = ("margin", "runner_up")


def margins(model, store: dict[str, torch.Tensor], tokens: torch.Tensor, labels: torch.Tensor,
            scale: torch.Tensor | None = None,
            against: torch.Tensor | None = None) -> tuple[list[tuple[str, int, int]], torch.Tensor, torch.Tensor]:
    """(component labels, terms [B, n] of each component in logit(label) - mean logit, or - logit(against) when
    given (a class per example), the bias last; scale)."""
    names, comp, bias, scale = components(model, store, tokens, scale)
    W_U = model.unembed.weight
    C = model.cfg.n_classes  # the mean over the classes, not over all outputs (`unembed_vocab`: the vocab)
    u = W_U[labels] - (W_U[:C].mean(0) if against is None else W_U[against])  # [B, d]: the measure's direction
    terms = torch.einsum("bnd,bd->bn", comp, u)
    other = bias[:, :C].mean(-1) if against is None else bias.gather(1, against[:, None])[:, 0]
    b = bias.gather(1, labels[:, None])[:, 0] - other
    return names + [("bias", -1, -1)], torch.cat([terms, b[:, None]], 1), scale


def _z_hook(layer_fill: torch.Tensor | None, H: int):
    """A hook on hook_z of a batch of H copies (copy-major): copy c gets head c replaced by the fill (0, its mean
    [H, dh], or the resample partners' z [B, pos, H, dh])."""
    def hook(z, hook):
        z = z.clone().reshape(H, -1, *z.shape[1:])  # [copy, B, pos, head, dh]
        c = torch.arange(H, device=z.device)
        if layer_fill is None:
            z[c, :, :, c] = 0.0
        else:  # z[c, :, :, c] is [copy, B, pos, dh]
            z[c, :, :, c] = layer_fill[:, None, None] if layer_fill.dim() == 2 else layer_fill.permute(2, 0, 1, 3)
        return z.reshape(-1, *z.shape[2:])
    return hook


def _from_layer(model, tokens: torch.Tensor, clean: dict[str, torch.Tensor], l: int,
                hook) -> tuple[dict, torch.Tensor]:
    """(the `store_names`, the logits) of the H copies of `tokens` (copy-major) with `hook` on layer l's z: what lies
    below layer l is the clean run's, repeated; layer l and those above are recomputed from the clean stream before
    layer l."""
    H = model.cfg.n_heads
    rep = lambda t: t.repeat(H, *([1] * (t.dim() - 1)))  # noqa: E731
    below = ["blocks.0.hook_resid_pre"] + [f"blocks.{k}.{n}" for k in range(l) for n in ("attn.hook_z",
                                                                                      "hook_mlp_out")]
    store = {n: rep(clean[n]) for n in below}

    def save(t, hook):
        store[hook.name] = t
        return t

    names = [n for n in store_names(model) if n not in store]
    memory, tok = store["blocks.0.hook_resid_pre"], rep(tokens)  # block 0's input is the embedded input M
    mask = model.attn_mask(tok, compute_dtype(memory))  # as the forward makes it
    with model.hooks(fwd_hooks=[(f"blocks.{l}.attn.hook_z", hook)] + [(n, save) for n in names]):
        x = rep(clean[f"blocks.{l}.hook_resid_pre"])
        for block in model.blocks[l:]:
            x = block(x, memory, mask)
        logits = model.head(x, tok)
    return store, logits


def measured(logits: torch.Tensor, labels: torch.Tensor, against: torch.Tensor | None,
             n_classes: int) -> torch.Tensor:
    """[B]: the measure read off the logits, logit(label) - the mean of the n_classes classes' logits, or -
    logit(against) when given: what the terms of `margins` sum to (with the run's own final-LayerNorm scale)."""
    other = logits[:, :n_classes].mean(-1) if against is None else logits.gather(1, against[:, None])[:, 0]
    return logits.gather(1, labels[:, None])[:, 0] - other


def per_batch(model, tokens: torch.Tensor, labels: torch.Tensor, z_fill: torch.Tensor | None = None,
              measure: str = "runner_up") -> dict:
    """For one batch: {part: [L, H, B]} for `PARTS` (logits), and `moved` [L, H, B, n]: each component's d_c (how
    much its direct term rose when the head was ablated, clean scale), with `components` its labels. z_fill: None
    (zero), [L, H, dh] means, or [L, B, pos, H, dh] resample partners' z. One forward of H copies a layer, from that
    layer up. `measure`: "runner_up" (logit(label) - logit of the clean run's runner-up class, held for the ablated
    runs) or "margin" (logit(label) - mean logit)."""
    cfg = model.cfg
    L, H, B = cfg.n_layers, cfg.n_heads, len(tokens)
    clean = cache_hooks(model, tokens, store_names(model) + [f"blocks.{l}.hook_resid_pre" for l in range(1, L)])
    against = None
    if measure == "runner_up":
        against = runner_up(model.head(clean[f"blocks.{L - 1}.hook_resid_post"], tokens), labels)
    comps, m0, s0 = margins(model, clean, tokens, labels, against=against)
    m0 = m0.double().cpu()
    kind = np.array([c for c, _, _ in comps])
    layer = np.array([l for _, l, _ in comps])
    rep_tok, rep_lab = tokens.repeat(H, 1), labels.repeat(H)
    rep_against = None if against is None else against.repeat(H)
    rep_scale = None if s0 is None else s0.repeat(H, 1)
    out = {p: torch.empty(L, H, B, dtype=torch.float64) for p in PARTS}
    moved = torch.empty(L, H, B, len(comps), dtype=torch.float64)
    for l in range(L):
        fill = None if z_fill is None else z_fill[l].to(tokens.device, clean["blocks.0.hook_resid_pre"].dtype)
        st, logits = _from_layer(model, tokens, clean, l, _z_hook(fill, H))
        _, frozen, _ = margins(model, st, rep_tok, rep_lab, rep_scale, against=rep_against)
        frozen = frozen.reshape(H, B, -1).double().cpu()
        # the ablated runs' measure at their own final-LayerNorm scale; without a final LayerNorm it is the frozen sum
        own = frozen.sum(-1) if s0 is None else \
            measured(logits, rep_lab, rep_against, cfg.n_classes).reshape(H, B).double().cpu()
        d = frozen - m0[None]  # [copy, B, n]
        moved[l] = d
        own_term = [comps.index(("head", l, h)) for h in range(H)]  # copy h's own head
        out["direct"][l] = -d[torch.arange(H), :, own_term]
        out["total"][l] = m0.sum(-1)[None] - own
        out["via_heads"][l] = d[:, :, np.flatnonzero((kind == "head") & (layer > l))].sum(-1)
        out["via_mlps"][l] = d[:, :, np.flatnonzero((kind == "mlp") & (layer >= l))].sum(-1)
        out["via_layernorm"][l] = own - frozen.sum(-1)
    out["self_repair"] = out["direct"] - out["total"]
    return {**out, "moved": moved, "components": comps}


def _label(c: tuple[str, int, int]) -> str:
    kind, l, h = c
    return f"L{l}.H{h}" if kind == "head" else f"{kind} L{l}" if l >= 0 else kind


def compute(model, data, mode: str = "zero", n_examples: int | None = 1000, n_boot: int = 1000, seed: int = 0,
            level: float = 0.95, batch_size: int = 16, min_direct: float = 0.1,
            measure: str = "runner_up") -> pd.DataFrame:
    """One row per head: the mean `PARTS` over test examples (logits, each with its paired bootstrap interval),
    `repaired` with its interval, and the downstream component that moved most to make up the head's direct
    effect (`top_component`, its mean rise `top_moved`). `mode`: how the head is ablated (zero, mean, resample);
    `measure`: what is split (`per_batch`)."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is unknown; use one of {MODES}")
    if measure not in MEASURES:
        raise ValueError(f"measure={measure!r} is unknown; use one of {MEASURES}")
    if min_direct < 0:
        raise ValueError(f"min_direct={min_direct} must be >= 0 (logits)")
    x, y = labelled_test(model, data, n_examples, seed, "self-repair")
    cfg = model.cfg
    z_fill = head_means(model, x) if mode == "mean" else None
    if mode == "resample":
        x, y, partner, _ = with_partners(x, y, seed)
    L, H, N = cfg.n_layers, cfg.n_heads, len(x)
    parts = {p: np.zeros((L, H, N)) for p in PARTS}
    moved_sum, comps = None, None
    with evaluating(model):
        for idx, tok, lab in batches(x, batch_size, y, trim=cfg.pads_are_inert, device=cfg.device):
            if mode == "resample":
                z_fill = partner_z(model, torch.as_tensor(x[partner[idx], :tok.shape[1]], device=cfg.device))
            res = per_batch(model, tok, lab, z_fill, measure)
            for p in PARTS:
                parts[p][:, :, idx] = res[p].numpy()
            moved_sum = res["moved"].sum(2) if moved_sum is None else moved_sum + res["moved"].sum(2)
            comps = res["components"]
    moved = (moved_sum / N).numpy()  # [L, H, n]
    cols = np.concatenate([parts[p].reshape(L * H, N) for p in PARTS], 0).T  # [N, parts x heads]
    mean = cols.mean(0).reshape(len(PARTS), L, H)
    nan = np.full((len(PARTS), L, H), np.nan)
    lo, hi, rep_lo, rep_hi = nan, nan, nan[0], nan[0]
    direct, total = mean[PARTS.index("direct")], mean[PARTS.index("total")]
    ok = np.abs(direct) >= max(min_direct, 1e-12)
    repaired = np.where(ok, 1.0 - total / np.where(ok, direct, 1.0), np.nan)
    if n_boot > 0:
        reps = bootstrap_means(cols, n_boot, seed).reshape(n_boot, len(PARTS), L, H)
        lo, hi = (a.reshape(len(PARTS), L, H) for a in percentile_interval(reps, level))
        r_d, r_t = reps[:, PARTS.index("direct")], reps[:, PARTS.index("total")]
        with np.errstate(divide="ignore", invalid="ignore"):
            r = 1.0 - r_t / r_d
        rep_lo, rep_hi = (np.where(ok, a, np.nan) for a in percentile_interval(r, level))
    kind = np.array([c for c, _, _ in comps])
    layer = np.array([l for _, l, _ in comps])
    rows = []
    for l in range(L):
        down = np.flatnonzero(((kind == "head") & (layer > l)) | ((kind == "mlp") & (layer >= l)))
        for h in range(H):
            row = {"layer": l, "head": h, "mode": mode, "measure": measure}
            for i, p in enumerate(PARTS):
                row.update({p: mean[i, l, h], f"{p}_lo": lo[i, l, h], f"{p}_hi": hi[i, l, h]})
            row.update(repaired=repaired[l, h], repaired_lo=rep_lo[l, h], repaired_hi=rep_hi[l, h])
            against = np.sign(direct[l, h]) * moved[l, h, down]  # > 0: moved to make up the direct effect
            top = down[int(np.argmax(against))]  # `down` holds at least the head's own layer's MLP
            row.update(top_component=_label(comps[top]), top_moved=float(moved[l, h, top]))
            row.update(n_examples=N, level=level, min_direct=min_direct)
            rows.append(row)
    return pd.DataFrame(rows)


SHARES = ("kept", "via_heads", "via_mlps", "via_layernorm")


def shares(df: pd.DataFrame) -> pd.DataFrame:
    """Four rows (`SHARES`): of the heads' summed |direct effect|, the share their ablations still show (kept:
    sum of sign(direct) x total over sum |direct|) and the shares later heads, MLPs and the final LayerNorm made up
    (sum of sign(direct) x part, likewise). They add up to 1; a negative share is a downstream change that added to
    the loss (the heads' indirect effect outweighing repair). `sum_direct` and `sum_total` are the sums of |direct|
    and |total| (logits): where the second is much the larger, the heads act mostly through later components and
    the shares, over a small denominator, say little."""
    sign = np.sign(df["direct"].to_numpy())
    total = float(np.abs(df["direct"]).sum())
    rows = [{"part": p, "share": float((sign * df["total" if p == "kept" else p].to_numpy()).sum()) / total
             if total > 0 else np.nan, "sum_direct": total, "sum_total": float(np.abs(df["total"]).sum())}
            for p in SHARES]
    return pd.DataFrame(rows).assign(mode=str(df["mode"].iloc[0]) if "mode" in df.columns and len(df) else "zero")


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the largest direct effect, its ablation's total
    effect and the share made up."""
    r = df.loc[df["direct"].abs().idxmax()]
    share = "share undefined" if r.repaired != r.repaired else f"{r.repaired:.0%} made up"  # NaN
    return (f"largest direct effect ({r.get('measure', 'runner_up')}): layer {int(r.layer)}, "
            f"head {int(r['head'])}, {r.direct:+.2f} logits; its "
            f"{r['mode']} ablation {r.total:+.2f} [{r.total_lo:+.2f}, {r.total_hi:+.2f}]: {share} (most by "
            f"{r.top_component})")
