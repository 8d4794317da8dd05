"""Activation patching with counterfactual inputs (docs/paper.md §5; interchange interventions, Vig et al. 2020,
Geiger et al. 2021; metric and normalisation as recommended by Zhang & Nanda 2023), written with nnsight.

Pairs (clean, counterfactual) come from `synthetic_tasks.counterfactual` (Task 1: the second trigger moved,
distance d -> d'; Task 2: one filler swapped for a trigger, n -> n + 1). With LD = logit[label_cf] - logit[label],
patching site s from the counterfactual run into the clean run gives

    effect(s) = mean_pairs(LD_patched - LD_clean) / mean_pairs(LD_cf - LD_clean)

(the ratio of the pair means: a per-pair ratio explodes on pairs where LD_cf ~ LD_clean), with a percentile
bootstrap interval over pairs. 1 = the site alone carries the difference, 0 = nothing; NaN (with `note`) when
LD_cf = LD_clean, i.e. there is no difference to carry (see `table_from_pairs`). Sites: every head's
`blocks.{l}.attn.hook_z[:, :, h]` and every layer's `blocks.{l}.hook_resid_post` (where the distance / count
first appears in the stream), each patched at all positions, at the trigger positions (a trigger in the clean
or the counterfactual row) and at the other positions.

Batched path (`method="batched"`): for a batch of pairs, one clean and counterfactual forward caches the
stream before every layer; then, per layer l, ONE nnsight trace runs block l and everything above it on the
counterfactual rows plus one copy of the clean rows per site of layer l, reads the counterfactual `hook_z`
(and `hook_resid_post`) from the counterfactual rows and writes it into the copies' slices. Only block l is
wrapped by nnsight (a copy of it: wrapping instruments a module for good); the blocks above are the model's
own and keep the SDPA fast path. Reference (`method="naive"`): nnsight on a copy of the whole model, one
trace per site and position set on padded batches. Both give the same logits (tests/test_causal.py, which
also checks the nnsight patch against the same patch with TransformerLens hooks).
"""
from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import torch
from torch import nn

from .common import batches, bootstrap_means, evaluating, NotApplicable, percentile_interval, streams


SETS = ("all", "trigger", "non_trigger")


def pairs_for(data, n_pairs: int, seed: int = 0):
    """Counterfactual pairs of a Dataset's task (NotApplicable without a trigger-task spec)."""
    from synthetic_tasks.counterfactual import counterfactual_pairs

    spec = getattr(data, "spec", None)
    triggers = getattr(data, "trigger_ids", None)
    if spec is None or triggers is None or getattr(spec, "task", None) not in ("trigger-distance", "trigger-count"):
        raise NotApplicable("activation patching needs counterfactual pairs, which exist for the trigger-distance "
                            "and trigger-count tasks: pass the run's Dataset (run.load_dataset())")
    if len(triggers) == 0:
        raise NotApplicable("the dataset has no trigger tokens: patching needs trigger-distance or trigger-count")
    return counterfactual_pairs(spec, triggers, n_pairs, seed=seed)


def _check(model, pairs) -> None:
    n_classes = model.cfg.n_classes
    top = int(max(pairs.clean_y.max(), pairs.cf_y.max()))
    if top >= n_classes:
        raise ValueError(f"a counterfactual label ({top}) is outside the model's {n_classes} classes: the run and "
                         "the dataset do not belong together")
    if not all(hasattr(b.attn, "hook_z") for b in model.blocks):
        raise NotApplicable(f"the {model.cfg.arch} blocks have no attn.hook_z to patch; heads can be patched in the "
                            "paper and decoder architectures")


def position_masks(trigger_mask: torch.Tensor, tokens: torch.Tensor, pads: bool = False) -> torch.Tensor:
    """[n_sets, B, pos] float: all non-pad positions, trigger positions, non-trigger positions; with `pads` (a
    model whose pads are not inert, `ModelConfig.pads_are_inert`: its pad positions attend and are read out, as in
    the authors' script) the pad positions too, in "all" and "non_trigger", since they carry the difference."""
    real = torch.ones_like(tokens, dtype=torch.bool) if pads else tokens != 0
    trig = trigger_mask & real
    return torch.stack([real, trig, real & ~trig]).to(torch.float32)


class _Tail(nn.Module):
    """Block `layer` (a copy: the one nnsight instruments) then the model's own blocks above it; returns the
    final stream (the readout is applied outside)."""

    def __init__(self, model, layer: int):
        super().__init__()
        self.block = copy.deepcopy(model.blocks[layer])
        self.layer = layer
        object.__setattr__(self, "model", model)  # not a submodule: nnsight leaves the model uninstrumented

    def forward(self, x, memory, mask):
        x = self.block(x, memory, mask)
        for block in self.model.blocks[self.layer + 1:]:
            x = block(x, memory, mask)
        return x


def _weights(pos_masks: torch.Tensor, n_heads: int):
    """Per-copy patch weights for one layer, copies ordered (set, k) with k = head 0..H-1, then k = H for the
    stream: (w_z [C*B, pos, H, 1], w_r [C*B, pos, 1]), C = n_sets * (H + 1)."""
    S, B, P = pos_masks.shape
    onehot = torch.eye(n_heads + 1)[:, :n_heads]  # row k: head k (row H: no head)
    w_z = pos_masks[:, None, :, :, None] * onehot[None, :, None, None, :]  # [S, H+1, B, pos, H]
    w_r = pos_masks[:, None] * (torch.arange(n_heads + 1) == n_heads).float()[None, :, None, None]
    C = S * (n_heads + 1)
    return w_z.reshape(C * B, P, n_heads, 1), w_r.reshape(C * B, P, 1)


def patched_logits_batched(model, tails, clean: torch.Tensor, cf: torch.Tensor, trig: torch.Tensor):
    """(clean logits [B, C], cf logits [B, C], patched [L, n_sets, H + 1, B, C]) for one batch; index H of the
    third axis is the residual stream (hook_resid_post) of that layer.

    In the `paper` architecture keys and values come from M, so every position's stream evolves on its own:
    a patch restricted to a set of positions leaves the other columns clean and gives, on its own columns,
    exactly the all-positions patch. Only the all-positions copies run there; the trigger / non-trigger
    results are the all-positions final stream on those columns and the clean one elsewhere. The decoder
    (keys from the stream) runs one copy per position set."""
    cfg = model.cfg
    L, H, B = cfg.n_layers, cfg.n_heads, clean.shape[0]
    both = torch.cat([cf, clean])
    memory, mask, resid, final = streams(model, both)
    pm = position_masks(trig, clean, pads=not cfg.pads_are_inert)
    S = pm.shape[0]
    independent = cfg.arch == "paper"
    runs = pm[:1] if independent else pm
    w_z, w_r = _weights(runs, H)
    C = runs.shape[0] * (H + 1)

    def rows(t):  # the counterfactual rows, then C copies of the clean rows
        return torch.cat([t[:B], t[B:].repeat(C, *([1] * (t.dim() - 1)))])

    x_clean = final[B:]
    out = torch.empty(L, S, H + 1, B, cfg.n_outputs)
    mem, msk, tok = rows(memory), rows(mask), clean.repeat(S * (H + 1), 1)
    for l in range(L):
        tail = tails[l]
        with tail.trace(rows(resid[l]), mem, msk):
            z = tail.block.attn.hook_z.output
            zc, zp = z[:B], z[B:]
            tail.block.attn.hook_z.output = torch.cat([zc, zp + w_z * (zc.repeat(C, 1, 1, 1) - zp)])
            r = tail.block.hook_resid_post.output
            rc, rp = r[:B], r[B:]
            tail.block.hook_resid_post.output = torch.cat([rc, rp + w_r * (rc.repeat(C, 1, 1) - rp)])
            x = tail.output.save()
        x = x[B:].reshape(runs.shape[0], H + 1, *x_clean.shape)
        if independent:
            x = x_clean + pm[:, None, :, :, None] * (x - x_clean)  # [S, H+1, B, pos, d]
        out[l] = model.head(x.reshape(-1, *x_clean.shape[1:]), tok).reshape(S, H + 1, B, -1)
    return model.head(x_clean, clean), model.head(final[:B], cf), out


def patched_logits_naive(wrapped, clean: torch.Tensor, cf: torch.Tensor, trig: torch.Tensor):
    """The reference loop: nnsight on a whole-model copy, one trace per (layer, set, head or stream)."""
    cfg = wrapped._module.cfg
    L, H = cfg.n_layers, cfg.n_heads
    cf_z, cf_r = [], []  # made outside the trace, filled inside it (in execution order: z, then resid_post)
    with wrapped.trace(cf):
        for l in range(L):
            cf_z.append(wrapped.blocks[l].attn.hook_z.output.save())
            cf_r.append(wrapped.blocks[l].hook_resid_post.output.save())
        cf_logits = wrapped.output.save()
    with wrapped.trace(clean):
        clean_logits = wrapped.output.save()
    pm = position_masks(trig, clean, pads=not cfg.pads_are_inert)
    out = torch.empty(L, pm.shape[0], H + 1, clean.shape[0], clean_logits.shape[-1])
    for l in range(L):
        for s in range(pm.shape[0]):
            m = pm[s].bool()
            for h in range(H + 1):
                with wrapped.trace(clean):
                    if h < H:
                        z = wrapped.blocks[l].attn.hook_z.output
                        z[:, :, h][m] = cf_z[l][:, :, h][m]
                    else:
                        r = wrapped.blocks[l].hook_resid_post.output
                        r[m] = cf_r[l][m]
                    lg = wrapped.output.save()
                out[l, s, h] = lg
    return clean_logits, cf_logits, out


def per_pair(model, pairs, method: str = "batched", batch_size: int | None = None) -> dict[str, np.ndarray]:
    """Per-pair logit differences: ld_clean, ld_cf [N], ld_patched [L, n_sets, H + 1, N]."""
    if method not in ("batched", "naive"):
        raise ValueError(f"method={method!r} is unknown; use 'batched' or 'naive'")
    from nnsight import NNsight

    _check(model, pairs)
    cfg = model.cfg
    L, H, N = cfg.n_layers, cfg.n_heads, len(pairs)
    copies = (H + 1) * (1 if cfg.arch == "paper" else len(SETS))  # see patched_logits_batched
    if batch_size is None:  # about 384 sequences per trace
        batch_size = max(1, 384 // (copies + 1)) if method == "batched" else 64
    trim = method == "batched" and cfg.pads_are_inert
    y, y_cf = torch.as_tensor(pairs.clean_y), torch.as_tensor(pairs.cf_y)
    res = {"ld_clean": np.zeros(N), "ld_cf": np.zeros(N), "ld_patched": np.zeros((L, len(SETS), H + 1, N))}
    with evaluating(model):
        if method == "batched":
            tails = [NNsight(_Tail(model, l)) for l in range(L)]
        else:
            wrapped = NNsight(copy.deepcopy(model))
        for idx, tok, _ in batches(pairs.clean_x, batch_size, trim=trim, device=cfg.device):
            width = tok.shape[1]
            cf = torch.as_tensor(pairs.cf_x[idx, :width], device=cfg.device)
            trig = torch.as_tensor(pairs.trigger_mask[idx, :width], device=cfg.device)
            if method == "batched":
                clean_lg, cf_lg, patched = patched_logits_batched(model, tails, tok, cf, trig)
            else:
                clean_lg, cf_lg, patched = patched_logits_naive(wrapped, tok, cf, trig)
            a, b = torch.as_tensor(idx), torch.arange(len(idx))
            ld = lambda lg: (lg[..., b, y_cf[a]] - lg[..., b, y[a]]).double().cpu().numpy()  # noqa: E731
            res["ld_clean"][idx], res["ld_cf"][idx] = ld(clean_lg), ld(cf_lg)
            res["ld_patched"][..., idx] = ld(patched)
    return res


UNDEFINED = "undefined: LD_cf = LD_clean (the counterfactual does not move the model's logit difference)"
UNDEFINED_CI = "interval undefined: some bootstrap resamples have LD_cf = LD_clean"


def _ratio(num: np.ndarray, den: np.ndarray, tol: float) -> np.ndarray:
    """num / den, NaN where |den| <= tol (no difference to carry: the effect is undefined, not infinite)."""
    den = np.broadcast_to(den, num.shape)
    out = np.full(num.shape, np.nan)
    ok = np.abs(den) > tol
    np.divide(num, den, out=out, where=ok)
    return out


def zero_tolerance(res: dict[str, np.ndarray]) -> float:
    """Below this |mean(LD_cf - LD_clean)| the counterfactual moves nothing (float32 noise of the logit
    differences): 1e-5 * max(1, mean |LD_clean|)."""
    return 1e-5 * max(1.0, float(np.abs(res["ld_clean"]).mean()))


def normalised(shift: np.ndarray, res: dict[str, np.ndarray], n_boot: int = 1000, seed: int = 0,
               level: float = 0.95) -> dict[str, np.ndarray | str]:
    """Effects of sites whose per-pair LD shifts are `shift` [N, sites]: mean(shift) / mean(LD_cf - LD_clean), its
    bootstrap interval over pairs (the same resamples for numerator and denominator), the mean shift and a note.

    The denominator counts as zero when it is within float32 noise of the logit differences (|.| <= 1e-5 * max(1,
    mean |LD_clean|)): e.g. NoPE on Task 1, where moving a trigger changes nothing the model sees. Then every
    effect and interval is NaN and the note says why (`UNDEFINED`); when only some bootstrap resamples have a zero
    denominator, the interval is NaN (`UNDEFINED_CI`)."""
    den = res["ld_cf"] - res["ld_clean"]
    cols = np.concatenate([shift, den[:, None]], 1)
    point = cols.mean(0)
    tol = zero_tolerance(res)
    effect = _ratio(point[:-1], point[-1], tol)
    lo = hi = np.full_like(effect, np.nan)
    note = UNDEFINED if np.isnan(effect).all() else ""
    if n_boot > 0 and not note:
        reps = bootstrap_means(cols, n_boot, seed)
        ratios = _ratio(reps[:, :-1], reps[:, -1:], tol)
        if np.isnan(ratios).any():
            note = UNDEFINED_CI
        else:
            lo, hi = percentile_interval(ratios, level)
    return {"effect": effect, "ci_lo": lo, "ci_hi": hi, "ld_shift": point[:-1], "note": note}


def table_from_pairs(res: dict[str, np.ndarray], n_boot: int = 1000, seed: int = 0,
                     level: float = 0.95) -> pd.DataFrame:
    """Tidy table: one row per (site, layer, head, positions) with effect and its bootstrap interval
    (`normalised`: NaN with a `note` where the counterfactual does not move LD)."""
    L, S, K, N = res["ld_patched"].shape
    out = normalised((res["ld_patched"] - res["ld_clean"]).reshape(L * S * K, N).T, res, n_boot, seed, level)
    effect, lo, hi, point, note = (out[k] for k in ("effect", "ci_lo", "ci_hi", "ld_shift", "note"))
    rows = []
    for l in range(L):
        for s, positions in enumerate(SETS):
            for k in range(K):
                i = (l * S + s) * K + k
                rows.append({"site": "head" if k < K - 1 else "resid", "layer": l, "head": k if k < K - 1 else -1,
                             "positions": positions, "effect": effect[i], "ci_lo": lo[i], "ci_hi": hi[i],
                             "ld_shift": point[i], "ld_clean": res["ld_clean"].mean(), "ld_cf": res["ld_cf"].mean(),
                             "n_pairs": N, "n_boot": n_boot, "level": level, "note": note})
    return pd.DataFrame(rows)


def compute(model, data, n_pairs: int = 256, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
            method: str = "batched", batch_size: int | None = None) -> pd.DataFrame:
    """Patch every head (and every layer's stream) from counterfactual into clean runs of `data`'s task."""
    pairs = pairs_for(data, n_pairs, seed)
    res = per_pair(model, pairs, method=method, batch_size=batch_size)
    return table_from_pairs(res, n_boot=n_boot, seed=seed, level=level)


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the largest head effect and the first layer whose
    stream carries the answer."""
    h = df[(df.site == "head") & (df.positions == "all")]
    r = h.loc[h["effect"].idxmax()]
    first = df[(df.site == "resid") & (df.positions == "all") & (df.ci_lo > 0.5)]
    where = f"stream effect > 0.5 from layer {int(first.layer.min())}" if len(first) else "no layer's stream > 0.5"
    return (f"largest head effect: layer {int(r.layer)}, head {int(r['head'])}, {r.effect:.2f} "
            f"[{r.ci_lo:.2f}, {r.ci_hi:.2f}] ({int(r.n_pairs)} pairs); {where}")
