"""How many heads each vote of the stored head summaries marks, run by run, and what the deposit-head verdict
becomes when a dla vote read on the margin vs the mean over classes is left out (`head_summary.counted`, as the
claims count it). Reads the tables alone (no weights, nothing trained).

    .venv/bin/python benchmarks/head_votes_stored.py [--store results/repro] [--json OUT]

Per task: each method's votes a run (mean, median, range), the deposit heads (>= min_agree votes) as stored and as
counted, and, as counted, the mean number a run of each combination of votes that makes a deposit head.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from workbench.analysis.head_summary import METHODS, counted, mean_dla_vote  # noqa: E402
from workbench.store import RunStore  # noqa: E402


def _spread(values: list[int]) -> dict:
    return {"mean": float(np.mean(values)), "median": float(np.median(values)), "min": int(min(values)),
            "max": int(max(values))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default="results/repro")
    ap.add_argument("--json", help="write the counts here")
    args = ap.parse_args()
    store = RunStore(args.store, readonly=True)
    rows = []
    for rid in store.run_ids():
        run = store.get(rid)
        if "head_summary" not in run.tables():
            continue
        hs = run.load_table("head_summary")
        c = counted(hs)
        rows.append({"run_id": rid, "task": run.config["task"]["task"], "heads": len(hs),
                     "dla_measure": hs["dla_measure"].iloc[0] if "dla_measure" in hs else "mean (before 2026-11-28)",
                     **{f"{m}_votes": int(hs[f"by_{m}"].eq(True).sum()) for m in METHODS},
                     "deposit_heads_stored": int(hs["deposit_head"].sum()),
                     "deposit_heads_counted": int(c["deposit_head"].sum()), "dla_left_out": mean_dla_vote(hs),
                     "combinations_counted": dict(Counter(c.loc[c["deposit_head"], "methods"]))})
    by_task = {}
    for task in sorted({r["task"] for r in rows}):
        sub = [r for r in rows if r["task"] == task]
        combos = Counter()
        for r in sub:
            combos.update(r["combinations_counted"])
        s = by_task[task] = {
            "runs": len(sub), "heads_per_run": sorted({r["heads"] for r in sub}),
            **{k: _spread([r[k] for r in sub]) for k in [f"{m}_votes" for m in METHODS]
               + ["deposit_heads_stored", "deposit_heads_counted"]},
            "combinations_counted_per_run": {k: v / len(sub) for k, v in combos.most_common()}}
        print(f"{task}: {len(sub)} runs ({'/'.join(map(str, s['heads_per_run']))} heads each)")
        for k in [f"{m}_votes" for m in METHODS] + ["deposit_heads_stored", "deposit_heads_counted"]:
            print(f"  {k}: mean {s[k]['mean']:.1f}, median {s[k]['median']:g}, range {s[k]['min']}-{s[k]['max']}")
        print("  deposit heads a run by their votes, as counted: " + ", ".join(
            f"{k} {v:.1f}" for k, v in s["combinations_counted_per_run"].items()))
    if args.json:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        with open(args.json, "w") as f:
            json.dump({"store": args.store, "code_version": rev, "by_task": by_task, "runs": rows}, f, indent=1)
        print("wrote", args.json)


if __name__ == "__main__":
    main()
