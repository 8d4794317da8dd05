"""Self-repair beside the head ablation it explains, side by side in one process on the same run and test examples.

    ablation     workbench.analysis.ablation.compute: the fast sweep (every head ablated, accuracy and loss)
    self-repair  workbench.analysis.self_repair.compute: every head ablated, its direct effect, its total effect and
                 what later heads, MLPs and the final LayerNorm made up, per example

Prints wall and process-CPU times and their ratio (self-repair timed before and after the ablation sweep, the
better kept), then the heads of largest direct effect: direct and total effect (logits of the label's margin), the
share made up with its interval, the parts, the component that made up most, and the head's accuracy drop under the
same ablation; then how far ranking heads by their ablation (total effect, accuracy drop) departs from ranking them
by their direct effect.

    .venv/bin/python benchmarks/bench_self_repair.py RUN_ID [--root runs] [--examples 1000] [--mode zero]
        [--measure runner_up|margin] [--threads 1] [--json OUT]

The run needs its weights: a run of your store, or a shipped one re-created into it (`workbench recreate RUN_ID`).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from timing import SideBySide, open_run, provenance, run_arguments, write_json  # noqa: E402  (on sys.path)
from workbench.analysis import ablation, self_repair  # noqa: E402
from workbench.analysis.attribution import _spearman  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(ap, examples=1000)
    ap.add_argument("--mode", default="zero", choices=ablation.MODES)
    ap.add_argument("--measure", default="runner_up", choices=self_repair.MEASURES)
    ap.add_argument("--top", type=int, default=8, help="heads of largest direct effect to print")
    args = ap.parse_args()
    run, model, data = open_run(args)
    kw = dict(mode=args.mode, n_boot=args.n_boot, seed=0)
    bench = SideBySide(width=16)
    sr = dict(n_examples=args.examples, measure=args.measure, **kw)
    bench.measure("self-repair", lambda: self_repair.compute(model, data, **sr))
    abl = bench.measure("ablation", lambda: ablation.compute(model, data, max_examples=args.examples, **kw))
    df = bench.measure("self-repair again", lambda: self_repair.compute(model, data, **sr))
    t = bench.times
    cost = min(t["self-repair"][0], t["self-repair again"][0]) / t["ablation"][0]
    cost_cpu = min(t["self-repair"][1], t["self-repair again"][1]) / t["ablation"][1]
    print(f"self-repair costs {cost:.1f} ablation sweeps (wall), {cost_cpu:.1f} (cpu)")
    acc = abl[abl["metric"] == "accuracy"].set_index(["layer", "head"])["delta"]
    df = df.join(acc.rename("acc_drop"), on=["layer", "head"])
    what = "the label's margin" if args.measure == "margin" else "the label against the clean runner-up"
    print(f"{args.mode} ablation, {int(df['n_examples'].iloc[0])} examples, logits of {what} "
          f"(min_direct {df['min_direct'].iloc[0]})")
    top = df.reindex(df["direct"].abs().sort_values(ascending=False).index).head(args.top)
    heads = []
    for r in top.itertuples():
        share = "undefined" if np.isnan(r.repaired) else f"{r.repaired:.0%} [{r.repaired_lo:.0%}, {r.repaired_hi:.0%}]"
        print(f"  L{r.layer}.H{r.head}: direct {r.direct:+.3f}, total {r.total:+.3f} [{r.total_lo:+.3f}, "
              f"{r.total_hi:+.3f}], made up {share} (heads {r.via_heads:+.3f}, MLPs {r.via_mlps:+.3f}, LayerNorm "
              f"{r.via_layernorm:+.3f}; most {r.top_component} {r.top_moved:+.3f}); accuracy drop {r.acc_drop:+.4f}")
        heads.append({k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in r._asdict().items()
                      if k != "Index"})
    for r in df.nlargest(3, "acc_drop").itertuples():
        print(f"  largest accuracy drops: L{r.layer}.H{r.head} {r.acc_drop:+.4f}: direct {r.direct:+.3f}, total "
              f"{r.total:+.3f}")
    direct = df["direct"].to_numpy()
    ranks = {"total_vs_direct": _spearman(direct, df["total"].to_numpy()),
             "acc_drop_vs_direct": _spearman(direct, df["acc_drop"].to_numpy()),
             "acc_drop_vs_total": _spearman(df["total"].to_numpy(), df["acc_drop"].to_numpy())}
    summed = {p: float(df[p].abs().sum()) for p in self_repair.PARTS}
    sh = self_repair.shares(df)
    print("of the heads' summed |direct effect| (" + f"{sh['sum_direct'].iloc[0]:.1f} logits): " + ", ".join(
        f"{p} {v:.0%}" for p, v in zip(sh["part"], sh["share"])))
    print("Spearman over heads: " + ", ".join(f"{k} {v:+.3f}" for k, v in ranks.items()))
    print(f"summed over heads: |direct| {summed['direct']:.3f}, |total| {summed['total']:.3f}, |self-repair| "
          f"{summed['self_repair']:.3f}")
    if args.json:
        out = {**provenance(run, args, bench, "ablation", "self-repair", "self-repair again"),
               "cost_in_ablation_sweeps": {"wall": cost, "cpu": cost_cpu}, "examples": args.examples,
               "mode": args.mode, "measure": args.measure, "top_heads": heads, "spearman": ranks, "summed_abs": summed,
               "shares": dict(zip(sh["part"], sh["share"])),
               "heads": df.drop(columns=["mode", "measure", "n_examples", "level", "min_direct"]).to_dict("records")}
        write_json(args.json, out, pairs=False)


if __name__ == "__main__":
    main()
