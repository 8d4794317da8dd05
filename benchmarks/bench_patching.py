"""Activation patching: the batched nnsight path vs a naive one-site-at-a-time nnsight loop, in one process.

A paper-shaped `paper`-architecture model (6 layers x 16 heads, d_model 128, d_ff 256, RoPE, untrained) on
counterfactual pairs of the cpu-preset Task 1 (48 tokens, vocabulary 120). Every head and every layer's stream
is patched at all, trigger and non-trigger positions (6 x 17 x 3 = 306 sites per pair).

    naive    nnsight on a copy of the whole model, one trace per (layer, site, position set), padded
             batches of 64 pairs (what one would write)
    batched  workbench.analysis.patching: cached prefix, one trace per layer over every site's copy (block l
             wrapped, the blocks above on the SDPA fast path), length-sorted trimmed batches, position sets
             read off the all-positions copies (paper arch: each position's stream evolves on its own)

Prints wall and process-CPU times, the ratio (against the better of two batched runs, one before and one after
the naive loop) and the largest difference of the per-pair logit differences (must be float rounding).

    .venv/bin/python benchmarks/bench_patching.py [--pairs 64] [--threads 1] [--arch paper]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from timing import SideBySide  # noqa: E402  (this folder is on sys.path when run as a script)
from synthetic_tasks import get_spec  # noqa: E402
from synthetic_tasks.counterfactual import counterfactual_pairs  # noqa: E402
from workbench.analysis import patching  # noqa: E402
from workbench.model import ModelConfig, PEClassifier  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=64)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("PELAB_THREADS", "1")))
    ap.add_argument("--arch", default="paper", choices=["paper", "decoder"])
    ap.add_argument("--scheme", default="rope")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    spec = get_spec("trigger-distance", preset="cpu")
    pairs = counterfactual_pairs(spec, np.array([5, 7]), args.pairs, seed=0)
    model = PEClassifier(ModelConfig(arch=args.arch, scheme=args.scheme, d_model=128, n_heads=16, d_ff=256,
                                     n_layers=6, max_len=spec.seq_len, vocab_size=spec.vocab_size,
                                     n_classes=spec.n_classes, dropout=0.0, seed=1)).eval()
    lens = (pairs.clean_x != 0).sum(1)
    print(f"model: {args.arch} arch, {args.scheme}, 6 layers x 16 heads, d_model 128, d_ff 256 (untrained); "
          f"{len(pairs)} cpu-preset Task 1 pairs, mean length {lens.mean():.1f} of {spec.seq_len}; "
          f"torch {torch.__version__}, {args.threads} thread(s); load average {os.getloadavg()[0]:.1f}")
    bench = SideBySide(width=16)
    measure = bench.measure
    fast = measure("batched", lambda: patching.per_pair(model, pairs, "batched"))
    naive = measure("naive", lambda: patching.per_pair(model, pairs, "naive"))
    fast2 = measure("batched (again)", lambda: patching.per_pair(model, pairs, "batched"))
    diff = max(float(np.abs(fast[k] - naive[k]).max()) for k in fast)
    diff2 = max(float(np.abs(fast2[k] - naive[k]).max()) for k in fast)
    scale = float(np.abs(naive["ld_patched"]).max())
    print(f"largest |LD difference| batched vs naive: {max(diff, diff2):.2e} (largest |LD| {scale:.2f}); "
          f"load average now {os.getloadavg()[0]:.1f}")
    bench.ratio("naive", "batched", "batched (again)")
    if max(diff, diff2) > 1e-3 * max(scale, 1.0):
        raise SystemExit("batched and naive patching disagree")


if __name__ == "__main__":
    main()
