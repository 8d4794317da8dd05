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

import numpy as np
import pandas as pd
import torch

from ._common import batches, run_data, tag
from .patching import _check, normalised, pairs_for


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


def estimates(model, clean: torch.Tensor, cf: torch.Tensor, y: torch.Tensor, y_cf: torch.Tensor):
    """(LD_clean [B], LD_cf [B], {edge: estimated LD shift [B]}) for one batch of pairs (edges as `edge_list`)."""
    cfg = model.cfg
    L = cfg.n_layers
    names = [f"blocks.{l}.{n}" for l in range(L) for n in ("attn.hook_z", "hook_mlp_out")]
    b = torch.arange(len(clean), device=clean.device)
    outs: dict[str, torch.Tensor] = {}

    def keep(t, hook):
        outs[hook.name] = t.detach()
        return t

    reads: dict[tuple[str, int], torch.Tensor] = {}

    def reader(key):
        def pre(module, args):  # a view of the stream for this reader alone: its gradient is this reader's
            x = args[0] if args[0].requires_grad else args[0].detach().requires_grad_()
            reads[key] = x.view_as(x)
            return (reads[key],) + tuple(args[1:])
        return pre

    with torch.no_grad():
        cf_logits = model.run_with_hooks(cf, fwd_hooks=[(n, keep) for n in names])
    cf_out, outs = outs, {}
    handles = [blk.ln1.register_forward_pre_hook(reader(("attn", l))) for l, blk in enumerate(model.blocks)]
    handles += [blk.ln2.register_forward_pre_hook(reader(("mlp", l))) for l, blk in enumerate(model.blocks)]
    final = f"blocks.{L - 1}.hook_resid_post"

    def keep_final(t, hook):
        t = t if t.requires_grad else t.detach().requires_grad_()
        reads[("readout", L)] = t
        return t

    try:
        with torch.enable_grad():
            logits = model.run_with_hooks(clean, fwd_hooks=[(n, keep) for n in names] + [(final, keep_final)])
            ld = logits[b, y_cf] - logits[b, y]
            keys = list(reads)
            grads = dict(zip(keys, torch.autograd.grad(ld.sum(), [reads[k] for k in keys])))
    finally:
        for h in handles:
            h.remove()
    real = (clean != 0).to(ld.dtype)[:, :, None]  # non-pad positions: patching's "all"
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
    return (ld.detach().double().cpu(), ld_cf.double().cpu(),
            {k: v.double().cpu() for k, v in out.items()})


def per_pair(model, pairs, batch_size: int = 64) -> dict[str, np.ndarray]:
    """ld_clean, ld_cf [N] and `edges` [n_edges, N] (the estimated LD shift of each edge of `edge_list`)."""
    _check(model, pairs)
    cfg = model.cfg
    order = edge_list(cfg.n_layers, cfg.n_heads)
    N = len(pairs)
    y, y_cf = torch.as_tensor(pairs.clean_y), torch.as_tensor(pairs.cf_y)
    res = {"ld_clean": np.zeros(N), "ld_cf": np.zeros(N), "edges": np.zeros((len(order), N))}
    was = model.training
    model.eval()
    try:
        for idx, tok, _ in batches(pairs.clean_x, batch_size, trim=cfg.pads_are_inert, device=cfg.device):
            cf = torch.as_tensor(pairs.cf_x[idx, :tok.shape[1]], device=cfg.device)
            a = torch.as_tensor(idx)
            ld, ld_cf, est = estimates(model, tok, cf, y[a].to(tok.device), y_cf[a].to(tok.device))
            res["ld_clean"][idx], res["ld_cf"][idx] = ld.numpy(), ld_cf.numpy()
            res["edges"][:, idx] = np.stack([est[e].numpy() for e in order])
    finally:
        model.train(was)
    return res


def compute(model, data, n_pairs: int = 256, n_boot: int = 1000, seed: int = 0, level: float = 0.95,
            batch_size: int = 64) -> pd.DataFrame:
    """One row per edge (source -> reader) with its normalised estimated effect and bootstrap interval."""
    pairs = pairs_for(data, n_pairs, seed)
    res = per_pair(model, pairs, batch_size=batch_size)
    eff = normalised(res["edges"].T, res, n_boot=n_boot, seed=seed, level=level)
    order = edge_list(model.cfg.n_layers, model.cfg.n_heads)
    df = pd.DataFrame(order, columns=["source", "layer", "head", "target", "target_layer"])
    for k in ("effect", "ci_lo", "ci_hi", "ld_shift"):
        df[k] = eff[k]
    df["ld_clean"], df["ld_cf"] = res["ld_clean"].mean(), res["ld_cf"].mean()
    df["n_pairs"], df["n_boot"], df["level"], df["note"] = len(pairs), n_boot, level, eff["note"]
    return df


def run(run, **params) -> pd.DataFrame:
    """Load the run's model and dataset, estimate every edge, save as table `edges`."""
    df = tag(compute(run.load_model(), run_data(run), **params), run)
    run.save_table("edges", df)
    return df
