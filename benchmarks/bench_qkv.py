"""Queries, keys and values: the AtP / AtP* estimates of every head's q, k and v patch against the real patch of
every one of them, side by side in one process on the same run and pairs.

    estimates  workbench.analysis.qkv.per_pair: one counterfactual forward, one clean forward and backward per batch,
               AtP (linear) and AtP* (the softmax recomputed for query and key patches) of every row
    real       workbench.analysis.qkv.patch_per_pair over every row: one patched forward a row and batch

Every row is (site, layer, head, positions): n_layers x 3 sites x 3 position sets x n_heads. Prints wall and
process-CPU times and their ratio (the estimates timed before and after the real patches, the better kept), then
per site how well each estimate matches the real patch (`qkv.agreement`: Spearman, estimates inside the real
patch's 95 % interval, largest miss), and the rows where AtP and AtP* differ most.

    .venv/bin/python benchmarks/bench_qkv.py RUN_ID [--root runs] [--pairs 256] [--threads 1] [--json OUT]

The run needs its weights: a run of your store, or a shipped one re-created into it (`workbench recreate RUN_ID`).
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from timing import SideBySide, open_run, provenance, run_arguments, write_json  # noqa: E402  (on sys.path)
from workbench.analysis import qkv  # noqa: E402
from workbench.analysis.patching import pairs_for  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run_arguments(ap)
    args = ap.parse_args()
    run, model, data = open_run(args)
    pairs = pairs_for(data, args.pairs, 0)
    bench = SideBySide(width=16)
    bench.measure("estimates", lambda: qkv.per_pair(model, pairs))
    df = qkv.table(qkv.per_pair(model, pairs), n_boot=0)
    rows = qkv.largest(df["effect"], len(df))
    real = bench.measure("real patches", lambda: qkv.patch_per_pair(model, pairs, qkv.chosen(df, rows)))
    res = bench.measure("estimates again", lambda: qkv.per_pair(model, pairs))
    bench.ratio("real patches", "estimates", "estimates again")
    df = qkv.add_patches(qkv.table(res, n_boot=args.n_boot), res, rows, real, n_boot=args.n_boot)
    print(f"{len(rows)} rows patched for real; {qkv.check_line(df)}")
    agree = qkv.agreement(df)
    for r in agree.itertuples():
        print(f"{r.site:6s} ({r.checked} rows)  AtP*: Spearman {r.atp_star_rank_corr:+.3f}, {r.atp_star_inside} "
              f"inside, largest miss {r.atp_star_max_miss:.3f}   AtP: Spearman {r.atp_rank_corr:+.3f}, "
              f"{r.atp_inside} inside, largest miss {r.atp_max_miss:.3f}")
    for value, name in (("effect", "AtP*"), ("patch_effect", "real patch")):
        for s in qkv.shares(df, value=value).itertuples():
            print(f"{name:10s} through its {qkv.PLURAL[s.site]:7s}: sum of |effect| over heads {s.total:.3f} "
                  f"({s.share:.0%}), signed {s.net:+.3f}; largest {s.top_head} {s.top_effect:+.3f}")
    gap = df.assign(gap=(df["effect"] - df["atp"]).abs()).nlargest(5, "gap")
    biggest = [{"site": r.site, "layer": int(r.layer), "head": int(r.head), "positions": r.positions,
                "atp_star": float(r.effect), "atp": float(r.atp), "patch": float(r.patch_effect)}
               for r in gap.itertuples()]
    for b in biggest:
        print(f"  L{b['layer']}.H{b['head']} {b['site']} ({b['positions']}): AtP* {b['atp_star']:+.3f}, AtP "
              f"{b['atp']:+.3f}, real {b['patch']:+.3f}")
    if args.json:
        out = {**provenance(run, args, bench, "real patches", "estimates", "estimates again"), "rows": len(rows),
               "agreement": agree.to_dict("records"), "largest_atp_star_vs_atp": biggest,
               "shares_all_positions": qkv.shares(df).to_dict("records"),
               "shares_all_positions_real": qkv.shares(df, value="patch_effect").to_dict("records")}
        write_json(args.json, out)


if __name__ == "__main__":
    main()
