"""The training-curves table (`workbench.analysis.experiments.convergence`, which the Runs page, the report and the
notebooks draw) framed once against a frame per block, side by side in one process on the same blocks.

    reference  pd.concat of one DataFrame per (run, split, metric) block, as `convergence` built it until
               2026-12-04 (four frames a run, 20 ms a run)
    fast       `experiments.long_frame`: every block's columns joined as lists, one DataFrame

The blocks are gathered once (`_convergence_blocks`: each run's metrics, setting and baselines), timed apart, and
both frames must be equal. Prints wall and process-CPU times and the ratio.

    .venv/bin/python benchmarks/bench_convergence.py [--shipped results/repro] [--json OUT]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from timing import SideBySide, write_json  # noqa: E402  (on sys.path)


def main() -> None:
    import platform
    import subprocess

    import pandas as pd

    from workbench.analysis.experiments import _convergence_blocks, long_frame
    from workbench.store import RunStore

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shipped", default="results/repro", help="the store whose runs' curves are framed")
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args()
    store = RunStore(args.shipped, readonly=True)
    runs = [store.get(r) for r in store.run_ids()]
    print(f"{len(runs)} runs of {store.root}; load average {os.getloadavg()[0]:.1f}")
    bench = SideBySide()
    blocks = bench.measure("blocks", lambda: list(_convergence_blocks(runs, baselines=True)))
    fast = bench.measure("fast", lambda: long_frame(blocks))
    ref = bench.measure("reference", lambda: pd.concat([pd.DataFrame(b) for b, _ in blocks], ignore_index=True))
    bench.measure("fast again", lambda: long_frame(blocks))
    pd.testing.assert_frame_equal(fast, ref)
    print(f"{len(blocks)} blocks, {len(fast)} rows: the two frames are equal")
    bench.ratio("reference", "fast", "fast again")
    if args.json:
        t = bench.times
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        write_json(args.json, {"store": str(store.root), "runs": len(runs), "blocks": len(blocks), "rows": len(fast),
                               "machine": platform.processor() or platform.machine(), "code_version": rev,
                               "load_average": os.getloadavg()[0],
                               "times_s": {k: {"wall": v[0], "cpu": v[1]} for k, v in t.items()},
                               "ratio_cpu": t["reference"][1] / min(t["fast"][1], t["fast again"][1])}, pairs=False)


if __name__ == "__main__":
    main()
