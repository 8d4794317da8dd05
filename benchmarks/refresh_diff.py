"""What `workbench verify --refresh` changed in the shipped runs it refreshed: each refreshed table against the one
it replaced, read from git (the run's bundle at the commit before the one that added its `refreshed` record).
Reads tables alone (no weights, nothing trained).

    .venv/bin/python benchmarks/refresh_diff.py [--store results/repro] [--json OUT]

Per run: the probes' largest |difference| of a score and of a selectivity; how many of each of the head summary's
votes (ablation, patching, probe, dla) flipped, and the deposit heads (>= min_agree votes, as stored) gained and lost;
the distance-bias bins whose counts moved, of all; patching effects that became NaN (the zero denominator), and the
largest other |difference|.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from workbench.store import RunStore  # noqa: E402
from workbench.store.bundle import bundle_names, read_bundle_table  # noqa: E402

VOTES = ("by_ablation", "by_patching", "by_probe", "by_dla")


def _git(*args: str) -> bytes:
    return subprocess.run(["git", *args], capture_output=True, check=True).stdout


def before_refresh(folder: Path) -> str | None:
    """The commit before the first one whose run.json of `folder` records `refreshed`."""
    for commit in _git("log", "--format=%H", "--reverse", "--", str(folder / "run.json")).decode().split():
        info = json.loads(_git("show", f"{commit}:{folder / 'run.json'}"))
        if info.get("refreshed"):
            return f"{commit}~1"
    return None


def _heads(df) -> dict:
    return {(int(r.layer), int(r.head)): r for r in df.itertuples()}


def compare(old: dict, new: dict) -> dict:
    """What differs between a run's tables before (`old`) and after (`new`) the refresh ({name: DataFrame})."""
    out: dict = {}
    if "probes" in old and "probes" in new:
        a, b = old["probes"], new["probes"]
        keys = [c for c in ("probe", "layer", "head", "metric", "level") if c in a.columns and c in b.columns]
        m = a.merge(b, on=keys, suffixes=("_old", "_new"))
        for c in ("score", "selectivity"):
            out[f"probes_max_{c}_diff"] = (float(np.nanmax(np.abs(m[f"{c}_old"] - m[f"{c}_new"]))) if len(m)
                                           else None)
    if "head_summary" in old and "head_summary" in new:
        a, b = _heads(old["head_summary"]), _heads(new["head_summary"])
        both = sorted(set(a) & set(b))
        out["votes_flipped"] = {v: sum(bool(getattr(a[h], v)) != bool(getattr(b[h], v)) for h in both)
                                for v in VOTES if all(hasattr(a[h], v) and hasattr(b[h], v) for h in both[:1])}
        dep_a = {h for h in both if bool(a[h].deposit_head)}
        dep_b = {h for h in both if bool(b[h].deposit_head)}
        out["deposit_heads"] = len(dep_b)
        out["deposit_gained"] = [f"L{l}.H{h}" for l, h in sorted(dep_b - dep_a)]
        out["deposit_lost"] = [f"L{l}.H{h}" for l, h in sorted(dep_a - dep_b)]
    if "distance_bias" in old and "distance_bias" in new:
        a, b = old["distance_bias"], new["distance_bias"]
        col = "count" if "count" in a.columns else None
        if col and len(a) == len(b):
            out["distance_bias_bins_moved"] = [int((a[col].to_numpy() != b[col].to_numpy()).sum()), int(len(a))]
        else:
            out["distance_bias_bins_moved"] = ["rows", f"{len(a)} -> {len(b)}"]
    if "patching" in old and "patching" in new:
        a, b = old["patching"]["effect"].to_numpy(float), new["patching"]["effect"].to_numpy(float)
        if len(a) == len(b):
            out["patching_now_nan"] = int((np.isnan(b) & ~np.isnan(a)).sum())
            fin = np.isfinite(a) & np.isfinite(b)
            out["patching_max_diff"] = float(np.abs(a[fin] - b[fin]).max()) if fin.any() else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default="results/repro")
    ap.add_argument("--json", help="write the per-run comparison here")
    args = ap.parse_args()
    store = RunStore(args.store, readonly=True)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rid in store.run_ids():
            run = store.get(rid)
            records = run.info.get("refreshed") or []
            if not records:
                continue
            folder = Path(args.store) / rid
            rev = before_refresh(folder)
            if rev is None:  # refreshed, not committed yet: against the last commit
                rev = "HEAD"
            path = Path(tmp) / f"{rid}.parquet"
            path.write_bytes(_git("show", f"{rev}:{folder / 'tables.parquet'}"))
            names = [n for r in records for n in r.get("tables", [])]
            old = {n: read_bundle_table(path, n) for n in names if n in bundle_names(path)}
            new = {n: run.load_table(n) for n in names}
            rows[rid] = dict(compare(old, new), refreshed=records[-1].get("refreshed"), tables=names)
    for rid, r in rows.items():
        print(rid, json.dumps({k: v for k, v in r.items() if k not in ("tables",)}))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
