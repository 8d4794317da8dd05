"""`make demo`: the findings first, then the whole loop at the CPU preset in the background.

1. serve the dashboard on http://127.0.0.1:8050 at once: its Findings page reads the shipped reproduction
   (results/repro, no training needed);
2. meanwhile, in a background process (1 torch thread, `nice`): generate both datasets, train
   `grids/demo.toml` (RoPE, NoPE, ALiBi, MLA on Task 1; RoPE, NoPE on Task 2), skipping finished runs, run every
   analysis on every run, and write `runs/report.html` + `runs/summary.json`. Its runs appear on the Runs page
   (which refreshes itself) as they finish; its log is `runs/demo.log`.

`--no-serve` (or CI set) runs step 2 in the foreground and stops. `--preset smoke` runs it in seconds (the test
suite does, so the demo never rots). The store is $PELAB_RUNS or ./runs.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GRID = Path(__file__).resolve().parent.parent / "grids" / "demo.toml"
URL = "http://127.0.0.1:8050"


def train_all(preset: str) -> None:
    """Datasets, the demo grid, every analysis on every run, the report (step 2)."""
    from rich.console import Console

    import synthetic_tasks as st
    from workbench.analysis import deposit_sentence
    from workbench.analysis.suite import run_suite
    from workbench.cli.data import summary_table
    from workbench.report import build_report
    from workbench.store import RunStore
    from workbench.train import load_grid, sweep

    console = Console()
    store = RunStore()
    console.rule(f"[bold]datasets ({preset} preset)")
    for task in st.TASKS:
        console.print(summary_table(st.load_or_generate(st.get_spec(task, preset=preset))))
    console.rule(f"[bold]training grids/demo.toml ({preset} preset)")
    results = sweep(load_grid(GRID) | {"preset": preset}, store)
    console.rule("[bold]analyses")
    for rec in results:
        run = store.get(rec["id"])
        if run.status != "finished":
            console.print(f"[red]{run.id}: {run.status}, skipped")
            continue
        run_suite(run, log=lambda msg: console.print(f"  [dim]{msg}"))
        acc = run.final.get("test_acc", float("nan"))
        console.print(f"{run.id}: test acc {acc:.3f}; {deposit_sentence(run.load_table('deposit'))}")
    console.rule("[bold]report")
    out = store.root / "report.html"
    build_report(store, "all", out, title=f"PE-Lab demo ({preset} preset)")
    console.print(f"report: {out}  summary: {out.with_name('summary.json')}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    preset = argv[argv.index("--preset") + 1] if "--preset" in argv else "cpu"
    if "--train-only" in argv or "--no-serve" in argv or os.environ.get("CI"):
        train_all(preset)
        return
    from workbench.store import RunStore, shipped_root

    store = RunStore()
    log = store.root / "demo.log"
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", PELAB_THREADS=os.environ.get("PELAB_THREADS", "1"))
    with open(log, "ab") as f:
        worker = subprocess.Popen(["nice", "-n", "10", sys.executable, "-m", "workbench.demo", "--train-only",
                                   "--preset", preset], stdout=f, stderr=subprocess.STDOUT, env=env)
    shipped = shipped_root()
    print(f"\nPE-Lab dashboard: {URL}  (Ctrl-C to stop)\n"
          f"  Findings   {URL}/  the core paper reproduced on CPU "
          f"({'shipped results in ' + str(shipped) if shipped else 'no shipped results found'})\n"
          f"  Runs       {URL}/runs  the demo grid ({preset} preset) trains in the background (pid {worker.pid}); "
          f"its runs appear as they finish\n"
          f"  log        {log}\n  report     {store.root / 'report.html'} (written when the grid is done)\n",
          flush=True)
    from apps import create_app

    try:
        create_app(store.root).run(host="127.0.0.1", port=8050, debug=False)
    finally:
        if worker.poll() is None:
            worker.terminate()  # the sweep resumes where it stopped on the next `make demo`


if __name__ == "__main__":
    main()
