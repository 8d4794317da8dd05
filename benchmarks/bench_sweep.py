"""Sweep throughput on this machine: 1 worker x 2 threads vs 2 workers x 1 thread, and the ceiling.

A small fixed grid of cpu-preset runs (default: RoPE and NoPE on Task 1, seeds 42-44 = 6 runs) is swept twice
into fresh scratch stores, once by `workbench sweep GRID --threads 2` (one run after another, 2 threads) and
once by `workbench sweep GRID --workers 2 --threads 1`, each a separate process started the same way; the
wall times give the speed-up of workers. The ceiling is what two single-thread processes can get out of the
cores at most: one training process with 2 threads alone, then two 1-thread processes side by side, all on the
same run config; the ceiling is (sum of the two 1-thread rates) / (the 2-thread rate), in trained sequences
per second as each run's metrics record them. Peak RSS per training process comes from each run's run.json.

    python benchmarks/bench_sweep.py [--set train.epochs=1] [--seeds 42,43,44] [--schemes rope,nope]

Slow by nature (it trains the grid twice plus three runs); run it when the machine is otherwise idle.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cli(args: list[str], threads: int) -> subprocess.Popen:
    env = os.environ | {"OMP_WAIT_POLICY": "PASSIVE", "PELAB_THREADS": str(threads),
                        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "workbench", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def wall(args: list[str], threads: int) -> float:
    t0 = time.perf_counter()
    p = cli(args, threads)
    p.communicate()
    if p.returncode:
        raise SystemExit(f"workbench {' '.join(args)} failed (exit {p.returncode})")
    return time.perf_counter() - t0


def runs_info(root: Path) -> list[dict]:
    """run.json of each run in the store `root`, with its metric rows under "metrics"."""
    from workbench.store import RunStore

    return [run.info | {"metrics": run.metric_rows()} for run in RunStore(root, readonly=True).runs()]


def train_rate(root: Path) -> float:
    """Mean trained sequences per second over the epochs of the one run in `root`."""
    (info,) = runs_info(root)
    return sum(m["seq_per_s"] for m in info["metrics"]) / len(info["metrics"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schemes", default="rope,nope")
    ap.add_argument("--seeds", default="42,43,44")
    ap.add_argument("--task", default="trigger-distance")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="override for every run")
    a = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="pelab-bench-sweep-"))
    data = scratch / "data"
    os.environ["PELAB_DATA"] = str(data)
    sets = "".join(f'"{k}" = {v}\n' for k, v in (s.split("=", 1) for s in a.sets))
    grid = scratch / "grid.toml"
    grid.write_text(f'preset = "cpu"\ntasks = ["{a.task}"]\nseeds = [{a.seeds}]\n'
                    f'schemes = {json.dumps(a.schemes.split(","))}\n[set]\n{sets}')
    n_runs = len(a.schemes.split(",")) * len(a.seeds.split(","))
    print(f"grid: {n_runs} cpu-preset runs ({a.task}, {a.schemes}, seeds {a.seeds}, {a.sets or 'preset'}); "
          f"{os.cpu_count()} cores; load at start {os.getloadavg()[0]:.2f}", flush=True)
    # the datasets are generated once, untimed, by a dry run
    wall(["sweep", str(grid), "--root", str(scratch / "dry"), "--dry-run", "-q"], 1)

    t_seq = wall(["sweep", str(grid), "--root", str(scratch / "seq"), "--threads", "2", "-q"], 2)
    print(f"1 worker x 2 threads: {t_seq:7.1f} s   (load {os.getloadavg()[0]:.2f})", flush=True)
    t_par = wall(["sweep", str(grid), "--root", str(scratch / "par"), "--workers", "2", "--threads", "1", "-q"], 1)
    print(f"2 workers x 1 thread: {t_par:7.1f} s   (load {os.getloadavg()[0]:.2f})", flush=True)

    one = ["train", "--preset", "cpu", "--task", a.task, "--scheme", a.schemes.split(",")[0], "-q"] + \
        sum((["--set", s] for s in a.sets), [])
    wall(one + ["--root", str(scratch / "c2"), "--threads", "2"], 2)
    pair = [cli(one + ["--root", str(scratch / f"c1{i}"), "--threads", "1"], 1) for i in (0, 1)]
    for p in pair:
        p.communicate()
    r2 = train_rate(scratch / "c2")
    r1 = [train_rate(scratch / f"c1{i}") for i in (0, 1)]
    ceiling = sum(r1) / r2
    speedup = t_seq / t_par
    print(f"ceiling: one process x 2 threads {r2:.0f} seq/s; two processes x 1 thread {r1[0]:.0f} + {r1[1]:.0f} "
          f"seq/s -> at most {ceiling:.2f}x   (load {os.getloadavg()[0]:.2f})")
    print(f"speed-up of --workers 2: {speedup:.2f}x = {speedup / ceiling:.0%} of the ceiling "
          f"(target >= 1.3x, 95 % of the ceiling)")
    rss = [i.get("peak_rss_mb") for root in ("seq", "par") for i in runs_info(scratch / root)]
    rss = [r for r in rss if r is not None]
    print(f"peak RSS per training process: max {max(rss):.0f} MiB, min {min(rss):.0f} MiB over {len(rss)} runs; "
          f"scratch {scratch}")


if __name__ == "__main__":
    main()
