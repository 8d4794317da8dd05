"""Trigger attention's by-distance profile: the scatter-add path vs the per-distance mask loop, side by side.

A `paper`-architecture model shaped like the `repro-paperdata` rung (6 layers, 16 heads, d_model 128, d_ff 256,
RoPE, untrained) on random tokens shaped like the paper's Task 1 data (up to 120 tokens, right-padded to 128;
vocabulary 574), with three trigger ids read as Task 2's (so every example counts).

    naive  what trigger_attention did before: per batch, all layers' patterns in float64 at once, and for each
           distance delta a [B, q, k] mask multiplied into the [B, L, H, q, k] patterns and summed
    fast   workbench.analysis.trigger_attention.compute: one layer at a time, one scatter-add of the per-pair
           sums by |q - k| (n_boot=0: the bootstrap is the same in both)

Prints wall and process-CPU times, the ratio naive / fast (against the better of two fast runs, one before and one
after the naive loop), and checks that both give the same by-distance profile and trigger mass (to 1e-12).

    .venv/bin/python benchmarks/bench_trigger_attention.py [--examples 256] [--threads 2] [--seq-len 128]
"""
from __future__ import annotations

import argparse
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from bench_ablation import task1_like_tokens  # noqa: E402  (this folder is on sys.path when run as a script)
from timing import SideBySide  # noqa: E402
from workbench.analysis import trigger_attention  # noqa: E402
from workbench.analysis.common import batches, cache_hooks, valid_pairs  # noqa: E402
from workbench.model import ModelConfig, PEClassifier  # noqa: E402


def naive(model, x, triggers, batch_size=64):
    """(to_triggers [L, H] mean over examples, by-distance mean [L, H, P]): the per-distance mask loop."""
    cfg = model.cfg
    L, H, P = cfg.n_layers, cfg.n_heads, x.shape[1]
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(L)]
    dist_sum, dist_n, to = np.zeros((L, H, P)), np.zeros(P), []
    with torch.no_grad():
        for _, tok, _ in batches(x, batch_size, trim=cfg.pads_are_inert, device=cfg.device):
            store = cache_hooks(model, tok, names)
            pat = torch.stack([store[n] for n in names], 1).double()  # [B, L, H, q, k]
            vis, real = valid_pairs(tok, cfg.arch).double(), tok != 0
            is_trig = torch.isin(tok, torch.as_tensor(triggers))
            mass = (pat * is_trig[:, None, None, None, :]).sum(-1)
            to.append(((mass * real[:, None, None]).sum(-1) / real.sum(1).clamp(min=1)[:, None, None]).numpy())
            n = tok.shape[1]
            d = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
            for delta in range(n):
                sel = vis * (d == delta)
                if float(sel.sum()) == 0:
                    continue
                dist_sum[:, :, delta] += (pat * sel[:, None, None]).sum((0, 3, 4)).numpy()
                dist_n[delta] += float(sel.sum())
    return np.concatenate(to).mean(0), dist_sum / np.where(dist_n > 0, dist_n, np.nan)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=256)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("PELAB_THREADS", "2")))
    ap.add_argument("--seq-len", type=int, default=128)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = task1_like_tokens(args.examples, seq_len=args.seq_len)
    triggers = np.array([3, 9, 11])
    model = PEClassifier(ModelConfig(scheme="rope", n_heads=16, n_layers=6, d_model=128, d_ff=256, dropout=0.0,
                                     max_len=args.seq_len, vocab_size=574, n_classes=101)).eval()
    data = SimpleNamespace(test_x=x, test_y=np.zeros(len(x), np.int64), trigger_ids=triggers,
                           spec=SimpleNamespace(task="trigger-count"))
    print(f"model: paper arch, rope, 6 layers, d_model 128, 16 heads; {args.examples} examples, mean length "
          f"{(x != 0).sum(1).mean():.1f} of {args.seq_len}; torch {torch.__version__}, {args.threads} threads, "
          f"load {os.getloadavg()[0]:.2f}")
    bench = SideBySide()
    measure = bench.measure
    def fast():
        return trigger_attention.compute(model, data, n_examples=len(x), n_boot=0)

    df = measure("fast", fast)
    to, by = measure("naive", lambda: naive(model, x, triggers))
    measure("fast (again)", fast)
    bd = df[df.measure == "by_distance"]
    got = np.full_like(by, np.nan)
    got[bd.layer.values, bd["head"].values, bd.distance.values] = bd.value.values
    tt = df[df.measure == "to_triggers"].sort_values(["layer", "head"])["value"].values.reshape(to.shape)
    diff = max(float(np.nanmax(np.abs(got - by))), float(np.abs(tt - to).max()))
    same = np.array_equal(np.isnan(got), np.isnan(by)) and diff < 1e-12
    print(f"same profile and trigger mass: {same} (max |difference| {diff:.1e}); load at the end "
          f"{os.getloadavg()[0]:.2f}")
    bench.ratio("naive", "fast", "fast (again)")
    if not same:
        raise SystemExit("fast and naive trigger attention disagree")


if __name__ == "__main__":
    main()
