"""Linear probes: the batched solver of workbench.analysis.probes vs the per-fit scikit-learn loop it replaced,
side by side in one process on the same run.

    reference  the probe code as it was before (kept here only): one scikit-learn pipeline
               (StandardScaler + LogisticRegression(lbfgs, C, max_iter)) per head, per layer's pooled stream,
               per fold, and again on shuffled labels -- `cross_val_score` in a Python loop
    batched    workbench.analysis.probes.compute: the same objective, every head x fold x (real, control) solved
               at once by L-BFGS in torch; features collected once for all heads and layers

Both compute the whole `probes` table (position probe included: it is the same code in both) with the same
parameters, folds and shuffles. Prints wall and process-CPU times, their ratio, and how the answers compare: for
each row, the new score must lie inside the reference's reported interval [score_lo, score_hi] (and likewise the
control), and the largest absolute differences.

    .venv/bin/python benchmarks/bench_probes.py RUN_ID [--root runs] [--threads 1]
    .venv/bin/python benchmarks/bench_probes.py            # trains nothing: an untrained cpu-preset model
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from timing import timed  # noqa: E402  (this folder is on sys.path when run as a script)
from workbench.analysis import probes  # noqa: E402
from workbench.analysis.common import run_data, split_xy, subsample  # noqa: E402


def reference(model, data, n_examples=600, max_tokens=6000, n_folds=5, alpha=1.0, C=1.0, max_iter=300, seed=0,
              level=0.95) -> pd.DataFrame:
    """The probe table as the package computed it before the batched solver (scikit-learn, one fit at a time)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score, GroupKFold, KFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def cv(make, X, y, folds, groups=None):
        y_shuf = np.random.default_rng(seed).permutation(y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return (cross_val_score(make(), X, y, cv=folds, groups=groups),
                    cross_val_score(make(), X, y_shuf, cv=folds, groups=groups))

    cfg = model.cfg
    x, y = split_xy(data, "test")
    keep = subsample(len(x), n_examples, seed)
    x, y = x[keep], y[keep]
    feats = probes.collect(model, x, getattr(data.spec, "task", None), getattr(data, "trigger_ids", None),
                           max_tokens, seed)
    rows = []

    def add(probe, layer, head, metric, real, ctrl, baseline, n):
        score, lo, hi = probes._interval(real, level)
        rows.append({"probe": probe, "layer": layer, "head": head, "metric": metric, "score": score,
                     "score_lo": lo, "score_hi": hi, "control": float(ctrl.mean()),
                     "selectivity": score - float(ctrl.mean()), "baseline": baseline, "n_rows": n,
                     "n_folds": n_folds, "level": level})

    gk, ridge = GroupKFold(n_folds), probes._ridge(alpha)
    base, _ = cv(ridge, feats["length"][:, None].astype(float), feats["pos"].astype(float), gk, feats["group"])
    for l in range(-1, cfg.n_layers):
        real, ctrl = cv(ridge, feats["position"][l + 1], feats["pos"].astype(float), gk, feats["group"])
        add("position", l, -1, "r2", real, ctrl, float(base.mean()), len(feats["pos"]))
    majority = float(np.bincount(y).max() / len(y))
    logistic = lambda: make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter))  # noqa: E731
    folds = KFold(n_folds, shuffle=True, random_state=seed)
    for l in range(cfg.n_layers):
        for h in range(cfg.n_heads):
            add("label_head", l, h, "accuracy", *cv(logistic, feats["head"][l][:, h], y, folds), majority, len(y))
        add("label_stream", l, -1, "accuracy", *cv(logistic, feats["pooled"][l], y, folds), majority, len(y))
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_id", nargs="?", help="a run with weights (default: an untrained cpu-preset RoPE model)")
    ap.add_argument("--root", default=None, help="run store (default: $PELAB_RUNS or ./runs)")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("PELAB_THREADS", "1")))
    ap.add_argument("--examples", type=int, default=600)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.run_id:
        from workbench.store import RunStore

        run = RunStore(args.root).get(args.run_id)
        model, data, what = run.load_model(), run_data(run), f"run {run.id}"
    else:
        import synthetic_tasks as st
        from workbench.model import ModelConfig, PEClassifier

        data = st.load_or_generate(st.get_spec("trigger-distance", preset="cpu"))
        model = PEClassifier(ModelConfig(arch="paper", scheme="rope", d_model=64, n_heads=8, d_ff=128, n_layers=4,
                                         vocab_size=data.vocab_size, n_classes=data.n_classes, max_len=data.seq_len,
                                         dropout=0.0, seed=1)).eval()
        what = "an untrained cpu-preset RoPE model on cpu-preset Task 1"
    cfg = model.cfg
    print(f"{what}: {cfg.n_layers} layers x {cfg.n_heads} heads, d_head {cfg.d_head}; {args.examples} examples, "
          f"5 folds; torch {torch.__version__}, {args.threads} thread(s); load average {os.getloadavg()[0]:.1f}",
          flush=True)
    kw = dict(n_examples=args.examples)
    w_new, c_new, new = timed(lambda: probes.compute(model, data, **kw))
    print(f"batched    wall {w_new:8.1f} s   cpu {c_new:8.1f} s", flush=True)
    w_ref, c_ref, ref = timed(lambda: reference(model, data, **kw))
    print(f"reference  wall {w_ref:8.1f} s   cpu {c_ref:8.1f} s", flush=True)
    w_new2, c_new2, _ = timed(lambda: probes.compute(model, data, **kw))
    print(f"batched    wall {w_new2:8.1f} s   cpu {c_new2:8.1f} s (again, after the reference)", flush=True)
    w_new, c_new = min(w_new, w_new2), min(c_new, c_new2)
    print(f"speed-up: wall {w_ref / w_new:.1f}x, cpu {c_ref / c_new:.1f}x", flush=True)

    key = ["probe", "layer", "head"]
    m = ref.merge(new, on=key, suffixes=("_ref", "_new"))
    assert len(m) == len(ref) == len(new), "the two tables have different rows"
    for probe, g in m.groupby("probe"):
        d_score = (g["score_new"] - g["score_ref"]).abs()
        d_ctrl = (g["control_new"] - g["control_ref"]).abs()
        inside = ((g["score_new"] >= g["score_lo_ref"] - 1e-12) & (g["score_new"] <= g["score_hi_ref"] + 1e-12))
        half = (g["score_hi_ref"] - g["score_lo_ref"]) / 2
        print(f"{probe:13s} rows {len(g):4d}: new score inside the reference interval {int(inside.sum())}/{len(g)}; "
              f"|score diff| max {d_score.max():.4f} mean {d_score.mean():.4f} (interval half-width mean "
              f"{half.mean():.4f}); |control diff| max {d_ctrl.max():.4f}")


if __name__ == "__main__":
    main()
