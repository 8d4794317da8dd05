"""Side-by-side timing for the benchmarks: a fast path and its reference in one process, the fast path timed
before and after the reference (the better run kept), ratios of wall and process-CPU time (CPU time is the steadier
figure when other jobs share the cores)."""
from __future__ import annotations

import time


def timed(fn):
    """(wall seconds, process CPU seconds, result)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


class SideBySide:
    """`measure(name, fn)` times and prints one run; `ratio(ref, fast, again)` prints ref / the better fast run."""

    def __init__(self, width: int = 13):
        self.times: dict[str, tuple[float, float]] = {}
        self.width = width

    def measure(self, name: str, fn):
        wall, cpu, out = timed(fn)
        self.times[name] = (wall, cpu)
        print(f"{name:{self.width}s} wall {wall:8.1f} s   cpu {cpu:8.1f} s", flush=True)
        return out

    def ratio(self, ref: str, fast: str, again: str) -> None:
        best = [min(self.times[fast][k], self.times[again][k]) for k in (0, 1)]
        print(f"ratio {ref} / {fast}: wall {self.times[ref][0] / best[0]:6.2f}x   "
              f"cpu {self.times[ref][1] / best[1]:6.2f}x")


def run_arguments(ap, examples: int | None = None) -> None:
    """The arguments of a benchmark on one stored run: its counterfactual pairs (bench_attribution, bench_qkv), or
    with `examples` its test examples, the same for both sides (bench_dla, bench_self_repair); --json for the
    measurements."""
    import os

    ap.add_argument("run_id")
    ap.add_argument("--root", default=os.environ.get("PELAB_RUNS", "runs"))
    ap.add_argument("--pairs", type=int, default=256)
    ap.add_argument("--n-boot", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("PELAB_THREADS", "1")))
    if examples is not None:
        ap.add_argument("--examples", type=int, default=examples, help="test examples (the same for both)")
    ap.add_argument("--json", help="write the measurements here")


def open_run(args):
    """(run, model, dataset) of `args.run_id`, torch on `args.threads` threads; prints what is measured."""
    import os

    import torch

    from workbench.analysis.common import run_data
    from workbench.store import RunStore

    torch.set_num_threads(args.threads)
    run = RunStore(args.root, create=False).get(args.run_id)
    model, data = run.load_model(), run_data(run)
    cfg = model.cfg
    print(f"run {run.id}: {cfg.arch} arch, {cfg.scheme}, {cfg.n_layers} layers x {cfg.n_heads} heads, d_model "
          f"{cfg.d_model}, test accuracy {run.final.get('test_acc')}; {args.pairs} pairs; torch {torch.__version__}, "
          f"{args.threads} thread(s); load average {os.getloadavg()[0]:.1f}")
    return run, model, data


def provenance(run, args, bench: SideBySide, ref: str, fast: str, again: str) -> dict:
    """What a run benchmark's JSON starts with: the run, pairs, bootstrap, threads, torch and SIMD level, machine,
    code version and load, every time, and the ratios ref / the better fast run."""
    import os
    import platform
    import subprocess

    import torch

    t = bench.times
    best = [min(t[fast][k], t[again][k]) for k in (0, 1)]
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"run_id": run.id, "pairs": args.pairs, "n_boot": args.n_boot, "threads": args.threads,
            "torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "machine": platform.processor() or platform.machine(), "code_version": rev,
            "load_average": os.getloadavg()[0], "times_s": {k: {"wall": v[0], "cpu": v[1]} for k, v in t.items()},
            "ratio_wall": t[ref][0] / best[0], "ratio_cpu": t[ref][1] / best[1]}


def write_json(path: str, record: dict, pairs: bool = True) -> None:
    """Write a benchmark's `record` (its `provenance` and measurements) to `path`, numpy numbers as floats;
    `pairs=False` drops the counterfactual-pair count of a benchmark that uses none."""
    import json

    if not pairs:
        record = {k: v for k, v in record.items() if k != "pairs"}
    with open(path, "w") as f:
        json.dump(record, f, indent=1, default=float)
    print("wrote", path)
