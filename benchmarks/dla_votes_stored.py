"""How many heads the stored head summaries' dla votes mark, run by run, and what the deposit-head verdict becomes
when a dla vote read on the margin vs the mean over classes is left out (`head_summary.counted`, as the claims
count it). Reads the tables alone (no weights, nothing trained).

    .venv/bin/python benchmarks/dla_votes_stored.py [--store results/repro] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from workbench.analysis.head_summary import counted, mean_dla_vote  # noqa: E402
from workbench.store import RunStore  # noqa: E402


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
        rows.append({"run_id": rid, "task": run.config["task"]["task"], "heads": len(hs),
                     "dla_measure": hs["dla_measure"].iloc[0] if "dla_measure" in hs else "mean (before 2026-11-28)",
                     "dla_votes": int(hs["by_dla"].eq(True).sum()),
                     "deposit_heads_stored": int(hs["deposit_head"].sum()),
                     "deposit_heads_counted": int(counted(hs)["deposit_head"].sum()),
                     "dla_left_out": mean_dla_vote(hs)})
    by_task = {}
    for task in sorted({r["task"] for r in rows}):
        sub = [r for r in rows if r["task"] == task]
        stat = {k: [r[k] for r in sub] for k in ("dla_votes", "deposit_heads_stored", "deposit_heads_counted")}
        by_task[task] = {"runs": len(sub), "heads_per_run": sorted({r["heads"] for r in sub}),
                         **{k: {"median": float(np.median(v)), "min": int(min(v)), "max": int(max(v))}
                            for k, v in stat.items()}}
        s = by_task[task]
        print(f"{task}: {len(sub)} runs ({'/'.join(map(str, s['heads_per_run']))} heads each); dla votes median "
              f"{s['dla_votes']['median']:g} (range {s['dla_votes']['min']}-{s['dla_votes']['max']}); deposit heads "
              f"as stored median {s['deposit_heads_stored']['median']:g} ({s['deposit_heads_stored']['min']}-"
              f"{s['deposit_heads_stored']['max']}), without the mean-margin dla vote "
              f"{s['deposit_heads_counted']['median']:g} ({s['deposit_heads_counted']['min']}-"
              f"{s['deposit_heads_counted']['max']})")
    if args.json:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        with open(args.json, "w") as f:
            json.dump({"store": args.store, "code_version": rev, "by_task": by_task, "runs": rows}, f, indent=1)
        print("wrote", args.json)


if __name__ == "__main__":
    main()
