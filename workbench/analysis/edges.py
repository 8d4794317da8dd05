"""Edge attribution patching (EAP; Syed et al. 2023, "Attribution patching outperforms automated circuit discovery"):
which later component reads what each head writes, estimated from one forward and backward, as `attribution` is.

A component writes into the residual stream and later ones read it. Sources: each head (l, h), writing
c = z_h W_O[h] at every position, and each layer's MLP. Destinations: each later layer's attention (what it reads
of the stream through ln1: its queries in the `paper` arch, where keys and values come from the embedding M;
queries, keys and values in the decoder), each MLP at or after the source's layer (through ln2), and the readout
(the final stream). For the counterfactual pairs of `patching` (same `n_pairs` and `seed`), the first-order
estimate of patching the source's output into the clean run *as that destination alone reads it* is

    edge(u -> v) = sum over non-pad positions of (c_u(cf) - c_u(clean)) . dLD/d(stream as v reads it)

with the gradient taken on the clean run, at v's input only (a view of the stream passed to v's LayerNorm, so the
residual path and the other readers are not in it). Normalised as `patching`: mean over pairs / mean(LD_cf -
LD_clean), with its bootstrap interval (`patching.normalised`). The stream's gradient at any point is the sum of
its later readers' gradients, so a head's edges sum to its node estimate (`attribution`, all positions) exactly:
the table splits that estimate by reader (tests/test_edges.py). The embedding's own path (into the stream, and
in the paper arch into every layer's keys and values) is not split into edges.
"""
from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np
import pandas as pd
import torch

from .attribution import embedding_at, forward_keeping, largest, over_pairs, path_points, with_real
from .patching import _check, normalised, pairs_for, position_masks


def edge_list(n_layers: int, n_heads: int) -> list[tuple[str, int, int, str, int]]:
    """(source kind, source layer, source head, target kind, target layer) of every edge, sources in layer order
    (heads then the MLP), targets downstream: attn at a later layer, mlp at the same layer or later (a head) or
    later (an MLP), and the readout (target layer = n_layers)."""
    out = []
    for l in range(n_layers):
        for kind, heads in (("head", range(n_heads)), ("mlp", [-1])):
            first_mlp = l if kind == "head" else l + 1
            for h in heads:
                out += [(kind, l, h, "attn", v) for v in range(l + 1, n_layers)]
                out += [(kind, l, h, "mlp", v) for v in range(first_mlp, n_layers)]
                out.append((kind, l, h, "readout", n_layers))
    return out


@contextlib.contextmanager
def at_reader(model, target: str, target_layer: int, fn: Callable[[torch.Tensor], torch.Tensor]):
    """Inside the `with`, the stream as one reader reads it passes through `fn` (for that reader alone): the input of
    `ln1` of layer `target_layer` (attn) or of its `ln2` (mlp), by a forward pre-hook, or the final stream
    (readout; its one reader is the model's head)."""
    if target == "readout":
        with model.hooks(fwd_hooks=[(f"blocks.{model.cfg.n_layers - 1}.hook_resid_post", lambda t, hook: fn(t))]):
            yield
        return
    block = model.blocks[target_layer]
    handle = (block.ln1 if target == "attn" else block.ln2).register_forward_pre_hook(
        lambda module, args: (fn(args[0]),) + tuple(args[1:]))
    try:
        yield
    finally:
        handle.remove()


def _writes(model, tokens: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(logits, every head's z and every MLP's output) of one forward without gradients."""
    names = [f"blocks.{l}.{n}" for l in range(model.cfg.n_layers) for n in ("attn.hook_z", "hook_mlp_out")]
    return forward_keeping(model, tokens, names, grad=False)


def _readers(n_layers: int) -> list[tuple[str, int]]:
    return [(k, l) for l in range(n_layers) for k in ("attn", "mlp")] + [("readout", n_layers)]


def estimates(model, clean: torch.Tensor, cf: torch.Tensor, y: torch.Tensor, y_cf: torch.Tensor,
              ig_steps: int = 0):
    """(LD_clean [B], LD_cf [B], {edge: estimated LD shift [B]}) for one batch of pairs (edges as `edge_list`); with
    `ig_steps` > 0 each reader's gradient is averaged along the token embeddings' path from clean to counterfactual
    (EAP-IG, Hanna et al. 2024: `attribution.path_points`, `attribution.embedding_at`)."""
    L = model.cfg.n_layers
    b = torch.arange(len(clean), device=clean.device)
    cf_logits, cf_out = _writes(model, cf)
    logits, outs = _writes(model, clean)
    ld = logits[b, y_cf] - logits[b, y]
    reads: dict[tuple[str, int], torch.Tensor] = {}

    def reader(key):
        def view(x):  # a view of the stream for this reader alone: its gradient is this reader's
            x = x if x.requires_grad else x.detach().requires_grad_()
            reads[key] = x.view_as(x)
            return reads[key]
        return view

    alphas = path_points(ig_steps)
    grads: dict[tuple[str, int], torch.Tensor] = {}
    for a in alphas:
        with torch.enable_grad(), contextlib.ExitStack() as stack:
            for key in _readers(L):
                stack.enter_context(at_reader(model, *key, reader(key)))
            stack.enter_context(embedding_at(model, cf, a))
            lg = model(clean)
            keys = list(reads)
            g = torch.autograd.grad((lg[b, y_cf] - lg[b, y]).sum(), [reads[k] for k in keys])
        grads = {k: grads.get(k, 0.0) + gi / len(alphas) for k, gi in zip(keys, g)}
    real = position_masks(torch.zeros_like(clean, dtype=torch.bool), clean, pads=not model.cfg.pads_are_inert)[0]
    real = real.to(ld.dtype)[:, :, None]  # patching's "all": the non-pad positions, the pads too where not inert
    out = {}
    with torch.no_grad():
        for l, blk in enumerate(model.blocks):
            dz = cf_out[f"blocks.{l}.attn.hook_z"] - outs[f"blocks.{l}.attn.hook_z"]  # [B, pos, H, e]
            dm = cf_out[f"blocks.{l}.hook_mlp_out"] - outs[f"blocks.{l}.hook_mlp_out"]  # [B, pos, d]
            for kind, target in [(k, v) for (k, v) in grads if (k == "attn" and v > l) or k != "attn" and v >= l]:
                g = grads[(kind, target)] * real  # [B, pos, d]
                gz = torch.einsum("bpd,hed->bphe", g, blk.attn.W_O)  # the reader's gradient in each head's z
                per_head = (dz * gz).sum((1, 3))  # [B, H]
                for h in range(per_head.shape[1]):
                    out[("head", l, h, kind, target)] = per_head[:, h]
                if kind != "mlp" or target > l:  # an MLP is read by later layers only
                    out[("mlp", l, -1, kind, target)] = (dm * g).sum((1, 2))
        ld_cf = cf_logits[b, y_cf] - cf_logits[b, y]
    return (ld.double().cpu(), ld_cf.double().cpu(),
            {k: v.double().cpu() for k, v in out.items()})


def path_patched(model, clean: torch.Tensor, cf: torch.Tensor, y: torch.Tensor, y_cf: torch.Tensor,
                 chosen: list[tuple]) -> dict[tuple, torch.Tensor]:
    """{edge: real LD shift [B]} of path-patching each chosen edge (Wang et al. 2022; Goldowsky-Dill et al. 2023):
    the writer's output difference c_u(cf) - c_u(clean), at non-pad positions, added to the stream as that one
    reader reads it, every other reader and everything after the reader computed as the model computes it (one
    forward an edge). What the edge's estimate approximates to first order."""
    b = torch.arange(len(clean), device=clean.device)
    _, cf_out = _writes(model, cf)
    logits, outs = _writes(model, clean)
    ld = logits[b, y_cf] - logits[b, y]
    real = (clean != 0).to(logits.dtype)[:, :, None]
    out = {}
    with torch.no_grad():
        for e in chosen:
            kind, l, h, target, target_layer = e
            if kind == "head":
                name = f"blocks.{l}.attn.hook_z"
                delta = (cf_out[name][:, :, h] - outs[name][:, :, h]) @ model.blocks[l].attn.W_O[h]
            else:
                name = f"blocks.{l}.hook_mlp_out"
                delta = cf_out[name] - outs[name]
            delta = delta * real
            with at_reader(model, target, target_layer, lambda x, delta=delta: x + delta):
                lg = model(clean)
            out[e] = (lg[b, y_cf] - lg[b, y] - ld).double().cpu()
    return out


def per_pair(model, pairs, batch_size: int = 64, ig_steps: int = 0) -> dict[str, np.ndarray]:
    """ld_clean, ld_cf [N] and `edges` [n_edges, N]: the estimated LD shift of each edge of `edge_list` (EAP, or
    EAP-IG with `ig_steps` > 0)."""
    _check(model, pairs)
    order = edge_list(model.cfg.n_layers, model.cfg.n_heads)
    N = len(pairs)
    res = {"ld_clean": np.zeros(N), "ld_cf": np.zeros(N), "edges": np.zeros((len(order), N))}

    def step(idx, clean, cf, trig, y, y_cf):
        ld, ld_cf, est = estimates(model, clean, cf, y, y_cf, ig_steps)
        res["ld_clean"][idx], res["ld_cf"][idx] = ld.numpy(), ld_cf.numpy()
        res["edges"][:, idx] = np.stack([est[e].numpy() for e in order])

    over_pairs(model, pairs, batch_size, step)
    return res


def path_per_pair(model, pairs, chosen: list[tuple], batch_size: int = 64) -> np.ndarray:
    """[len(chosen), N]: the real LD shift of path-patching each chosen edge (`path_patched`)."""
    out = np.zeros((len(chosen), len(pairs)))

    def step(idx, clean, cf, trig, y, y_cf):
        real = path_patched(model, clean, cf, y, y_cf, chosen)
        out[:, idx] = np.stack([real[e].numpy() for e in chosen])

    over_pairs(model, pairs, batch_size, step)
    return out


def compute(model, data, n_pairs: int = 256, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
            batch_size: int = 64, check_top: int = 20, ig_steps: int = 0) -> pd.DataFrame:
    """One row per edge (source -> reader) with its normalised estimated effect and bootstrap interval; the
    `check_top` edges of largest |estimate| also path-patched for real (`path_effect`, its interval, and
    `in_path_ci`: the estimate inside it, to 1e-5; NaN for the edges not checked). Path patching takes the pairs a
    second time, one forward per checked edge. `ig_steps` > 0: EAP-IG (`estimates`); stored as a column."""
    pairs = pairs_for(data, n_pairs, seed)
    res = per_pair(model, pairs, batch_size=batch_size, ig_steps=ig_steps)
    eff = normalised(res["edges"].T, res, n_boot=n_boot, seed=seed, level=level)
    order = edge_list(model.cfg.n_layers, model.cfg.n_heads)
    df = pd.DataFrame(order, columns=["source", "layer", "head", "target", "target_layer"])
    for k in ("effect", "ci_lo", "ci_hi", "ld_shift"):
        df[k] = eff[k]
    df["ld_clean"], df["ld_cf"] = res["ld_clean"].mean(), res["ld_cf"].mean()
    df["n_pairs"], df["n_boot"], df["level"], df["note"] = len(pairs), n_boot, level, eff["note"]
    df["ig_steps"] = ig_steps
    for k in ("path_effect", "path_lo", "path_hi", "in_path_ci"):
        df[k] = np.nan
    top = largest(df["effect"], check_top)
    real = path_per_pair(model, pairs, [order[i] for i in top], batch_size) if top else None
    return with_real(df, res, top, real, "path", {"effect": "in_path_ci"}, n_boot=n_boot, seed=seed, level=level)


def summary(df) -> str:
    """One line about the table for `workbench analyze`'s console: the largest edge effect."""
    if df["effect"].isna().all():
        return f"undefined: {df['note'].iloc[0]}"
    r = df.loc[df["effect"].abs().idxmax()]
    src = f"L{int(r.layer)}.H{int(r['head'])}" if r.source == "head" else f"L{int(r.layer)} MLP"
    dst = "readout" if r.target == "readout" else f"L{int(r.target_layer)} {r.target}"
    return f"largest edge: {src} -> {dst}, {r.effect:+.3f} [{r.ci_lo:+.3f}, {r.ci_hi:+.3f}] ({len(df)} edges)"
