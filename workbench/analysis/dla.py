"""Direct logit attribution (Elhage et al. 2021; docs/paper.md §5).

The final stream is a sum of components, x_L = M + sum_l (sum_h z_h W_O[h] + b_O^l + mlp_out_l), and the
readout r = readout(x_L) (masked mean, or the last token in the decoder) is linear, so it splits the same way.
With the final LayerNorm's scale sigma frozen at its clean value, LN_f(r) = gamma * (r - mean(r)) / sigma + beta
is linear too, and the logits split exactly into

    logit = sum_c W_U (gamma * (r_c - mean(r_c)) / sigma) + (W_U beta + b_U)

The authors' placements of the final LayerNorm (`final_ln`, docs/fidelity.md) split the same way: with no final
LayerNorm `logit = sum_c W_U r_c + b_U`; with the LayerNorm before the pooling every position's scale sigma_p is
frozen and divides that position's pooling weight, `logit = sum_c W_U gamma (sum_p w_p / sigma_p (x_{c,p} -
mean)) + W_U beta sum_p w_p + b_U`.

The direct effect of head (l, h) is its term read on the correct class (`dla`; `dla_vs_mean`: minus the mean
over the n_classes classes, also where the output layer has vocab_size outputs (`unembed_vocab`, the authors'));
`dla_vs_runner_up`: minus its term on the clean run's runner-up class, the highest-scoring class other than the
label, so that the components sum to logit(label) - logit(runner-up), the margin the decision turns on. On
the trigger-distance task the mean over classes moves with whole groups of neighbouring distance classes, which the
decision does not read; docs/analyses.md). It is the head's effect through the direct path only, with sigma held
fixed: the frozen-LayerNorm approximation (the true effect of removing a head also changes sigma and every later
layer -- that total effect is what ablation measures). Rows for the other components (embedding, attention biases,
MLPs, the LayerNorm/unembedding bias) make the table add up to the mean correct-class logit.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .common import batches, bootstrap_means, cache_hooks, evaluating, labelled_test, percentile_interval


def components(model, store: dict[str, torch.Tensor], tokens: torch.Tensor, scale: torch.Tensor | None = None):
    """(labels, comp [B, n, d], bias [B, C], scale) from a forward's cached `STORE_NAMES`: `comp @ W_U.T` is each
    component's direct term in the logits and `bias` the rest (unembedding and final-LayerNorm biases).

    `scale` is the final LayerNorm's sigma (after_pool: [B, 1], the pooled stream's; before_pool: [B, pos], each
    position's; None without a final LayerNorm): taken from `store` unless given, so another forward's (the clean
    run's) can be frozen in. The scale used is returned."""
    cfg = model.cfg
    L = cfg.n_layers
    B, P = tokens.shape
    eye = torch.eye(P, device=tokens.device, dtype=store["hook_readout"].dtype).expand(B, P, P)
    w = model.readout(eye, tokens)  # [B, pos]: the readout's weight on each position
    w_sum = w.sum(1, keepdim=True)
    ln, mode = model.ln_final, cfg.final_ln
    r = store["hook_readout"]
    if scale is None and mode == "before_pool":
        scale = (store[f"blocks.{L - 1}.hook_resid_post"].var(-1, unbiased=False) + ln.eps).sqrt()
    elif scale is None and mode == "after_pool":
        scale = (r.var(-1, unbiased=False, keepdim=True) + ln.eps).sqrt()
    if mode == "before_pool":  # each position's LayerNorm scale, frozen, joins its weight
        w = w / scale
    pool = lambda t: torch.einsum("bp,bp...->b...", w, t)  # noqa: E731  readout of a per-position tensor
    labels, parts = [("embed", -1, -1)], [pool(store["blocks.0.hook_resid_pre"])]
    for l, block in enumerate(model.blocks):
        zp = pool(store[f"blocks.{l}.attn.hook_z"])  # [B, H, dh]
        parts += list(torch.einsum("bhe,hed->hbd", zp, block.attn.W_O))
        labels += [("head", l, h) for h in range(cfg.n_heads)]
        parts.append(block.attn.b_O.expand(B, -1) * w.sum(1, keepdim=True))
        labels.append(("attn_bias", l, -1))
        parts.append(pool(store[f"blocks.{l}.hook_mlp_out"]))
        labels.append(("mlp", l, -1))
    comp = torch.stack(parts, 1)  # [B, n, d]
    W_U, b_U = model.unembed.weight, model.unembed.bias
    bias = b_U.expand(B, -1)
    if mode != "none":
        comp = comp - comp.mean(-1, keepdim=True)
        if mode == "after_pool":
            comp = comp / scale[:, None]
        comp = comp * ln.weight
        bias = bias + (w_sum * ln.bias) @ W_U.T
    return labels, comp, bias, scale


def store_names(model) -> list[str]:
    """The hook points `components` reads."""
    L = model.cfg.n_layers
    return (["blocks.0.hook_resid_pre", "hook_readout", f"blocks.{L - 1}.hook_resid_post"]
            + [f"blocks.{l}.{n}" for l in range(L) for n in ("attn.hook_z", "hook_mlp_out")])


def decompose(model, tokens: torch.Tensor) -> tuple[list[tuple[str, int, int]], torch.Tensor, torch.Tensor]:
    """(component labels (component, layer, head), contributions [B, n_components, n_classes], logits [B, C]).

    The contributions sum to the logits (up to float rounding) for the clean run."""
    store = cache_hooks(model, tokens, store_names(model))
    labels, comp, bias, _ = components(model, store, tokens)
    contrib = torch.cat([comp @ model.unembed.weight.T, bias[:, None]], 1)
    return labels + [("bias", -1, -1)], contrib, model.head(store[f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"],
                                                             tokens)


MARGINS = {"runner_up": ("dla_vs_runner_up", "vs_runner_up"), "mean": ("dla_vs_mean", "vs_mean")}
"""margin -> (its column in the table, the prefix of its interval's `_lo` / `_hi` columns)"""


def runner_up(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """[B]: each example's highest-scoring class other than its label."""
    return logits.scatter(1, labels[:, None], float("-inf")).argmax(-1)


def compute(model, data, n_examples: int | None = 2000, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
            batch_size: int = 64) -> pd.DataFrame:
    """Mean direct effect on the correct class of every component, over test examples, with bootstrap intervals."""
    x, y = labelled_test(model, data, n_examples, seed, "direct logit attribution")
    on_label, vs_mean, vs_runner_up, labels = [], [], [], None
    n_classes = model.cfg.n_classes  # the mean over the classes, not over all outputs (`unembed_vocab`: the vocab)
    with evaluating(model):
        for idx, tok, lab in batches(x, batch_size, y, trim=model.cfg.pads_are_inert,
                                     device=model.cfg.device):
            labels, contrib, logits = decompose(model, tok)
            ix = torch.arange(len(tok))
            at = contrib[ix, :, lab]  # [B, n]
            on_label.append(at.double().cpu().numpy())
            vs_mean.append((at - contrib[..., :n_classes].mean(-1)).double().cpu().numpy())
            vs_runner_up.append((at - contrib[ix, :, runner_up(logits, lab)]).double().cpu().numpy())
    cols = np.concatenate([np.concatenate(v) for v in (on_label, vs_mean, vs_runner_up)], 1)
    mean = cols.mean(0)
    lo = hi = np.full_like(mean, np.nan)
    if n_boot > 0:
        lo, hi = percentile_interval(bootstrap_means(cols, n_boot, seed), level)
    n = len(labels)
    rows = [{"component": c, "layer": l, "head": h, "dla": mean[i], "ci_lo": lo[i], "ci_hi": hi[i],
             "dla_vs_mean": mean[n + i], "vs_mean_lo": lo[n + i], "vs_mean_hi": hi[n + i],
             "dla_vs_runner_up": mean[2 * n + i], "vs_runner_up_lo": lo[2 * n + i],
             "vs_runner_up_hi": hi[2 * n + i], "n_examples": len(cols), "level": level}
            for i, (c, l, h) in enumerate(labels)]
    return pd.DataFrame(rows)


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the largest direct effect against the mean and
    the runner-up class."""
    h = df[df.component == "head"]
    r = h.loc[h["dla_vs_mean"].idxmax()]
    out = f"largest direct effect: layer {int(r.layer)}, head {int(r['head'])}, {r.dla_vs_mean:+.2f} logits vs mean"
    if "dla_vs_runner_up" in h:
        q = h.loc[h["dla_vs_runner_up"].idxmax()]
        out += (f"; vs the runner-up class: layer {int(q.layer)}, head {int(q['head'])}, "
                f"{q.dla_vs_runner_up:+.2f} logits")
    return out
