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
import json
import os
import platform
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from timing import SideBySide  # noqa: E402  (this folder is on sys.path when run as a script)
from workbench.analysis import qkv  # noqa: E402
from workbench.analysis._common import run_data  # noqa: E402
from workbench.analysis.patching import pairs_for  # noqa: E402
from workbench.store import RunStore  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_id")
    ap.add_argument("--root", default=os.environ.get("PELAB_RUNS", "runs"))
    ap.add_argument("--pairs", type=int, default=256)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("PELAB_THREADS", "1")))
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    run = RunStore(args.root, create=False).get(args.run_id)
    model, data = run.load_model(), run_data(run)
    cfg = model.cfg
    print(f"run {run.id}: {cfg.arch} arch, {cfg.scheme}, {cfg.n_layers} layers x {cfg.n_heads} heads, d_model "
          f"{cfg.d_model}, test accuracy {run.final.get('test_acc')}; {args.pairs} pairs; torch {torch.__version__}, "
          f"{args.threads} thread(s); load average {os.getloadavg()[0]:.1f}")
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
    gap = df.assign(gap=(df["effect"] - df["atp"]).abs()).nlargest(5, "gap")
    biggest = [{"site": r.site, "layer": int(r.layer), "head": int(r.head), "positions": r.positions,
                "atp_star": float(r.effect), "atp": float(r.atp), "patch": float(r.patch_effect)}
               for r in gap.itertuples()]
    for b in biggest:
        print(f"  L{b['layer']}.H{b['head']} {b['site']} ({b['positions']}): AtP* {b['atp_star']:+.3f}, AtP "
              f"{b['atp']:+.3f}, real {b['patch']:+.3f}")
    if args.json:
        t = bench.times
        best = min(t["estimates"][0], t["estimates again"][0]), min(t["estimates"][1], t["estimates again"][1])
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        out = {"run_id": run.id, "pairs": args.pairs, "n_boot": args.n_boot, "threads": args.threads,
               "rows": len(rows), "torch": torch.__version__,
               "cpu_capability": torch.backends.cpu.get_cpu_capability(),
               "machine": platform.processor() or platform.machine(), "code_version": rev,
               "load_average": os.getloadavg()[0],
               "times_s": {k: {"wall": v[0], "cpu": v[1]} for k, v in t.items()},
               "ratio_wall": t["real patches"][0] / best[0], "ratio_cpu": t["real patches"][1] / best[1],
               "agreement": agree.to_dict("records"), "largest_atp_star_vs_atp": biggest}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)
        print("wrote", args.json)


if __name__ == "__main__":
    main()
