"""Direct logit attribution on its two margins beside the head ablation, side by side in one process on the same run
and test examples.

    dla       workbench.analysis.dla.compute: every component's direct term on the label, on the label minus the mean
              over classes (dla_vs_mean, the margin the head summary's dla vote reads by default) and on the label
              minus the clean run's runner-up class (dla_vs_runner_up, the margin the decision turns on)
    ablation  workbench.analysis.ablation.compute (zero): each head's accuracy drop

Prints wall and process-CPU times, then, per margin: the heads of largest direct effect with their accuracy drops,
the heads the head summary's dla vote would mark (direct effect >= --min-dla logits, interval above 0), and how far
ranking heads by each margin departs from the other and from their accuracy drops (Spearman).

    .venv/bin/python benchmarks/bench_dla.py RUN_ID [--root runs] [--examples 1000] [--min-dla 0.5] [--threads 1]
        [--json OUT]

The run needs its weights: a run of your store, or a shipped one re-created into it (`workbench recreate RUN_ID`).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from timing import SideBySide, open_run, provenance, run_arguments, write_json  # noqa: E402  (on sys.path)
from workbench.analysis import ablation, dla  # noqa: E402
from workbench.analysis.attribution import _spearman  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(ap, examples=1000)
    ap.add_argument("--min-dla", type=float, default=0.5, help="the head summary's dla threshold (logits)")
    ap.add_argument("--top", type=int, default=5, help="heads of largest direct effect to print per margin")
    args = ap.parse_args()
    run, model, data = open_run(args)
    bench = SideBySide(width=10)
    kw = dict(n_boot=args.n_boot, seed=0)
    bench.measure("dla", lambda: dla.compute(model, data, n_examples=args.examples, **kw))
    abl = bench.measure("ablation", lambda: ablation.compute(model, data, max_examples=args.examples, **kw))
    df = bench.measure("dla again", lambda: dla.compute(model, data, n_examples=args.examples, **kw))
    heads = df[df["component"] == "head"].join(
        abl[abl["metric"] == "accuracy"].set_index(["layer", "head"])["delta"].rename("acc_drop"),
        on=["layer", "head"])
    out = {}
    for name in ("mean", "runner_up"):
        col, ci = dla.MARGINS[name]
        top = heads.reindex(heads[col].abs().sort_values(ascending=False).index).head(args.top)
        votes = heads[(heads[col] >= args.min_dla) & (heads[f"{ci}_lo"] > 0)]
        print(f"margin vs the {name.replace('_', '-')}: summed |direct| over heads {heads[col].abs().sum():.2f} logits;"
              f" {len(votes)} heads vote (>= {args.min_dla}, interval above 0): "
              + (", ".join(f"L{r.layer}.H{r.head}" for r in votes.itertuples()) or "none"))
        for r in top.itertuples():
            print(f"  L{r.layer}.H{r.head}: {getattr(r, col):+.3f} [{getattr(r, f'{ci}_lo'):+.3f}, "
                  f"{getattr(r, f'{ci}_hi'):+.3f}]; the other margin "
                  f"{getattr(r, dla.MARGINS['mean' if name == 'runner_up' else 'runner_up'][0]):+.3f}; accuracy drop "
                  f"{r.acc_drop:+.4f}")
        out[name] = {"summed_abs": float(heads[col].abs().sum()),
                     "votes": [f"L{r.layer}.H{r.head}" for r in votes.itertuples()],
                     "spearman_vs_acc_drop": _spearman(heads[col].to_numpy(), heads["acc_drop"].to_numpy())}
    rank = _spearman(heads["dla_vs_mean"].to_numpy(), heads["dla_vs_runner_up"].to_numpy())
    print(f"Spearman over heads: mean vs runner-up {rank:+.3f}; vs the accuracy drop: mean "
          f"{out['mean']['spearman_vs_acc_drop']:+.3f}, runner-up {out['runner_up']['spearman_vs_acc_drop']:+.3f}")
    if args.json:
        res = {**provenance(run, args, bench, "ablation", "dla", "dla again"), "examples": args.examples,
               "min_dla": args.min_dla, "margins": out, "spearman_mean_vs_runner_up": rank,
               "heads": heads[["layer", "head", "dla", "dla_vs_mean", "vs_mean_lo", "vs_mean_hi", "dla_vs_runner_up",
                               "vs_runner_up_lo", "vs_runner_up_hi", "acc_drop"]].to_dict("records")}
        write_json(args.json, res, pairs=False)


if __name__ == "__main__":
    main()
