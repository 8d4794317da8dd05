"""`make demo`: the findings first, then the whole loop at the CPU preset in the background, in minutes.

1. serve the dashboard on http://127.0.0.1:8050 at once: its Findings page reads the shipped reproduction
   (results/repro, no training needed);
2. meanwhile, in a background process (`nice`): generate both datasets, train `grids/demo.toml` (RoPE, NoPE and
   MLA on Task 1, RoPE on Task 2: the deposit, its absence and MLA's) two runs at a time (`WORKERS` processes, one
   thread each), skipping finished runs; run the fast analyses (`FIRST`) on every run, two runs at a time (in two
   processes kept for the second pass too), and write a first `runs/report.html` + `runs/summary.json`; then the
   slower ones, and write the full report over it.
   Its runs appear on the Runs page (which opens on them) as they finish; its log `runs/demo.log` has a line per
   epoch and per analysis, and the elapsed time of each phase.

`--no-serve` (or CI set) runs step 2 in the foreground and stops. `--preset smoke` runs it in seconds (the test
suite does, so the demo never rots). The store is $PELAB_RUNS or ./runs.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

GRID = Path(__file__).resolve().parent.parent / "grids" / "demo.toml"
URL = "http://127.0.0.1:8050"


# The first pass of analyses: the zero-ablation deposits and the cheap diagnostics, enough for a first report;
# the second pass adds the other ablation modes, patching, attribution patching (per head, per edge, per
# query / key / value), probes, trigger attention, DLA and the head summary.
FIRST = ("ablation", "deposit", "qk_means", "angles", "spectral", "distance_bias", "extrapolation")
WORKERS = 2  # runs trained, and analysed, at once (one thread each): the 2 cores of the machine it was sized on


def _suite(root: str, run_id: str, tables, threads: int) -> list[str]:
    """One run's analyses (`run_suite`) in a worker process; returns its log lines."""
    import torch

    from workbench.analysis.suite import run_suite
    from workbench.store import RunStore

    torch.set_num_threads(threads)
    lines: list[str] = []
    run_suite(RunStore(root).get(run_id), tables=tables, log=lines.append)
    return lines


def analysis_pool(n_runs: int, workers: int = WORKERS):
    """`workers` fresh processes (spawn: one torch thread each) for `analyse_all`, kept for both passes: each costs
    seconds of imports (torch, transformer-lens) before it analyses anything."""
    import concurrent.futures as cf
    import multiprocessing as mp

    return cf.ProcessPoolExecutor(max_workers=max(1, min(workers, n_runs)), mp_context=mp.get_context("spawn"))


def analyse_all(pool, store, runs: list, tables, log) -> None:
    """`run_suite` on every run, in the processes of `pool` (`analysis_pool`), each run's log lines printed when it
    is done."""
    import concurrent.futures as cf

    threads = int(os.environ.get("PELAB_THREADS", "1"))
    jobs = [pool.submit(_suite, str(store.root), run.id, tables, threads) for run in runs]
    for job in cf.as_completed(jobs):
        for line in job.result():
            log(line)


def train_all(preset: str) -> None:
    """Datasets, the demo grid, the fast analyses and a first report, then every analysis and the full report."""
    from rich.console import Console

    import synthetic_tasks as st
    from workbench.analysis import deposit_sentence
    from workbench.analysis.claims import as_read, reading_of
    from workbench.cli.data import summary_table
    from workbench.report import build_report
    from workbench.report.build import default_summary_path
    from workbench.store import RunStore
    from workbench.train import load_grid, sweep
    from workbench.train.presets import disclaimer

    console = Console(soft_wrap=True)  # a log file gets whole lines
    t0 = time.perf_counter()

    def rule(title: str) -> None:
        console.rule(f"[bold]{title} [+{time.perf_counter() - t0:.0f} s]")

    store = RunStore()
    d = disclaimer(preset)  # what differs from the paper's setup, said before anything trains
    console.print(f"[bold]{d.headline.replace('`', '')}[/bold] {d.lead}", markup=True, highlight=False)
    rule(f"datasets ({preset} preset)")
    for task in st.TASKS:
        console.print(summary_table(store.load_task({"task": task, "preset": preset})))  # the store's data folder
    rule(f"training grids/demo.toml ({preset} preset)")
    runs = []
    for rec in sweep(load_grid(GRID) | {"preset": preset}, store, workers=WORKERS, threads=1):
        run = store.get(rec["id"])
        if run.status == "finished":
            runs.append(run)
        else:
            console.print(f"[red]{run.id}: {run.status}, skipped")
    out = store.own_file("report.html")
    with analysis_pool(len(runs)) as pool:  # the same processes for both passes
        for tables, what in ((FIRST, "first"), (None, "full")):
            rule(f"analyses for the {what} report")
            analyse_all(pool, store, runs, tables, lambda msg: console.print(f"  [dim]{msg}"))
            if tables is not None:
                for run in runs:
                    acc = run.final.get("test_acc", float("nan"))
                    sentence = as_read(deposit_sentence(run.load_table("deposit")), reading_of(run))
                    console.print(f"{run.id}: test acc {acc:.3f}; {sentence}")
            rule(f"{what} report")
            build_report(store, "all", out, title=f"PE-Lab demo ({preset} preset{', first pass' if tables else ''})",
                         log=lambda msg: console.print(f"  [dim]report: {msg}"))
            console.print(f"{what} report written: {out}  summary: {default_summary_path(out)}")
    rule("done")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    preset = argv[argv.index("--preset") + 1] if "--preset" in argv else "cpu"
    if "--train-only" in argv or "--no-serve" in argv or os.environ.get("CI"):
        train_all(preset)
        return
    from workbench.store import RunStore, shipped_root

    store = RunStore()
    log = store.own_file("demo.log")
    threads = os.environ.get("PELAB_THREADS", "1")
    # numpy / scipy / scikit-learn BLAS threads too: many small fits with a thread pool each on a busy machine
    # were the demo's slowest part; PYTHONUNBUFFERED: the log gets each line when it is written, in order
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PELAB_THREADS=threads, OMP_NUM_THREADS=threads,
               OPENBLAS_NUM_THREADS=threads, MKL_NUM_THREADS=threads, PYTHONUNBUFFERED="1")
    with open(log, "ab") as f:
        worker = subprocess.Popen(["nice", "-n", "10", sys.executable, "-m", "workbench.demo", "--train-only",
                                   "--preset", preset], stdout=f, stderr=subprocess.STDOUT, env=env)
    shipped = shipped_root()
    print(f"\nPE-Lab dashboard: {URL}  (Ctrl-C to stop)\n"
          f"  Findings   {URL}/  the core paper re-run on CPU "
          f"({'shipped results in ' + str(shipped) if shipped else 'no shipped results found'})\n"
          f"  Runs       {URL}/runs  the demo grid ({preset} preset) trains in the background (pid {worker.pid}); "
          f"its runs appear as they finish\n"
          f"  log        {log}\n  report     {store.own_file('report.html')} (a first one after training and the fast "
          f"analyses, the full one when all analyses are done)\n",
          flush=True)
    from apps import create_app, start_warm_up

    app = create_app(store.root)
    start_warm_up(app)  # the run statuses and the Findings page's tables, computed before the first visit
    try:
        app.run(host="127.0.0.1", port=8050, debug=False)
    finally:
        if worker.poll() is None:
            worker.terminate()  # the sweep resumes where it stopped on the next `make demo`


if __name__ == "__main__":
    main()
