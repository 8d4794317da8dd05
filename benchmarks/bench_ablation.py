"""Head-ablation sweep: fast path vs. the naive loop, side by side in one process.

A paper-scale `paper`-architecture model (6 layers, d_model 256, 16 heads, d_ff 512, RoPE, untrained) and
random tokens shaped like Task 1 (left 1-25, middle 1-70, right 1-25 words + 2 triggers, truncated to 120,
right-padded to 128; vocabulary 574, 72 classes). Every one of the 96 heads is zero-ablated over all examples.

    naive       one full forward per head with a hook on hook_z, padded batches of 128 (what one would write)
    naive+trim  the same, but on length-sorted batches cut to their longest sequence (the fast path's batching)
    fast        workbench.analysis.ablation: cached prefix, attention of layer l once, H copies batched

Prints wall and process-CPU times (CPU time is the steadier figure when other jobs share the cores), the
ratios (against the better of two fast runs, one before and one after the naive loops), and checks that
every per-example prediction agrees.

    .venv/bin/python benchmarks/bench_ablation.py [--examples 256] [--threads 2] [--no-naive-trim]

--scale paper-cpu: the paper-shaped model the reproduction trains on CPU (6 layers x 16 heads, d_model 128,
d_ff 256, dropout 0) on the first test examples of the real `cpu` Task 1 data (48 tokens, vocabulary 120).
--scale cpu: the `cpu` preset's model, which `make demo` trains and analyses (4 layers x 8 heads, d_model 64,
d_ff 128, dropout 0), on the same data.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from timing import SideBySide  # noqa: E402  (this folder is on sys.path when run as a script)
from workbench.analysis import ablation  # noqa: E402
from workbench.model import ModelConfig, PEClassifier  # noqa: E402
from workbench.model.tl import HookedRootModule  # noqa: E402


def task1_like_tokens(n: int, seed: int = 0, vocab: int = 574, seq_len: int = 128) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.zeros((n, seq_len), np.int64)
    for i in range(n):
        length = min(120, rng.integers(1, 26) + rng.integers(1, 71) + rng.integers(1, 26) + 2)
        x[i, :length] = rng.integers(1, vocab, length)
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=256)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("PELAB_THREADS", "2")))
    ap.add_argument("--scheme", default="rope")
    ap.add_argument("--scale", choices=["paper", "paper-cpu", "cpu"], default="paper")
    ap.add_argument("--no-naive-trim", action="store_true", help="skip the naive loop on trimmed batches")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.scale == "paper":
        shape = dict(n_layers=6, n_heads=16, d_model=256, d_ff=512, max_len=128, vocab_size=574, n_classes=72,
                     dropout=0.1)
        x = task1_like_tokens(args.examples)
        y = np.random.default_rng(1).integers(0, 72, args.examples)
    else:
        from synthetic_tasks import get_spec, load_or_generate

        ds = load_or_generate(get_spec("trigger-distance", preset="cpu", seed=42))
        size = dict(n_layers=4, n_heads=8, d_model=64, d_ff=128) if args.scale == "cpu" else \
            dict(n_layers=6, n_heads=16, d_model=128, d_ff=256)
        shape = dict(**size, max_len=ds.seq_len, vocab_size=int(ds.vocab_size), n_classes=int(ds.n_classes),
                     dropout=0.0)
        x, y = ds.test_x[:args.examples], ds.test_y[:args.examples]
    model = PEClassifier(ModelConfig(scheme=args.scheme, **shape)).eval()
    lens = (x != 0).sum(1)
    print(f"model: paper arch, {args.scheme}, {shape['n_layers']} layers, d_model {shape['d_model']}, "
          f"{shape['n_heads']} heads, d_ff {shape['d_ff']}; "
          f"{args.examples} examples, mean length {lens.mean():.1f} of {shape['max_len']}; torch {torch.__version__}, "
          f"{args.threads} threads, load {os.getloadavg()[0]:.2f}")
    print(f"sweep: {model.cfg.n_layers * model.cfg.n_heads} heads, zero-ablation, accuracy + loss per example")

    bench = SideBySide(width=15)
    measure = bench.measure
    fast = measure("fast", lambda: ablation.per_example(model, x, y, method="fast"))
    model.remove_all_hook_fns = HookedRootModule.remove_all_hook_fns.__get__(model)
    tl_reset = measure("fast, TL reset", lambda: ablation.per_example(model, x, y, method="fast"))
    del model.remove_all_hook_fns
    assert np.array_equal(tl_reset["pred"], fast["pred"]) and np.array_equal(tl_reset["loss"], fast["loss"])
    naive = measure("naive", lambda: ablation.per_example(model, x, y, method="naive", trim=False, batch_size=128))
    if not args.no_naive_trim:
        naive_t = measure("naive+trim",
                          lambda: ablation.per_example(model, x, y, method="naive", trim=True, batch_size=16))
        assert np.array_equal(naive_t["pred"], naive["pred"])
    fast2 = measure("fast (again)", lambda: ablation.per_example(model, x, y, method="fast"))

    same = np.array_equal(fast["pred"], naive["pred"]) and np.array_equal(fast2["pred"], naive["pred"])
    max_loss = float(np.abs(fast["loss"] - naive["loss"]).max())
    print(f"per-example predictions identical: {same}; max |loss difference| {max_loss:.2e}; "
          f"load at the end {os.getloadavg()[0]:.2f}")
    for ref in ("naive", "naive+trim", "fast, TL reset"):
        if ref in bench.times:
            bench.ratio(ref, "fast", "fast (again)")
    if not same:
        raise SystemExit("fast and naive sweeps disagree")


if __name__ == "__main__":
    main()
