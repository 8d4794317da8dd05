"""`make demo`: the whole loop at the CPU preset.

1. generate both datasets and print their summaries;
2. train `grids/demo.toml` (RoPE, NoPE, ALiBi, MLA on Task 1; RoPE, NoPE on Task 2), skipping finished runs;
3. run every analysis on every run (stored next to the run);
4. write `runs/report.html` + `runs/summary.json`;
5. serve the dashboard on http://127.0.0.1:8050 (skipped with --no-serve, or when CI is set).

`--preset smoke` runs the same loop in seconds (the test suite does, so the demo never rots); the store is
$PELAB_RUNS or ./runs.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from rich.console import Console

import synthetic_tasks as st
from workbench.analysis import ANALYSES, NotApplicable, deposit_sentence
from workbench.cli.data import summary_table
from workbench.store import RunStore
from workbench.train import load_grid, sweep

GRID = Path(__file__).resolve().parent.parent / "grids" / "demo.toml"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    preset = argv[argv.index("--preset") + 1] if "--preset" in argv else "cpu"
    console = Console()
    store = RunStore()
    console.rule(f"[bold]1. datasets ({preset} preset)")
    for task in st.TASKS:
        console.print(summary_table(st.load_or_generate(st.get_spec(task, preset=preset))))

    console.rule(f"[bold]2. training grids/demo.toml ({preset} preset)")
    results = sweep(load_grid(GRID) | {"preset": preset}, store)

    console.rule("[bold]3. analyses")
    for rec in results:
        run = store.get(rec["id"])
        if run.status != "finished":
            console.print(f"[red]{run.id}: {run.status}, skipped")
            continue
        for name, analysis in ANALYSES.items():
            if name in run.tables():
                continue
            try:
                analysis(run)
            except NotApplicable as e:
                console.print(f"  {run.id} {name}: [dim]not applicable: {e}")
        acc = run.final.get("test_acc", float("nan"))
        console.print(f"{run.id}: test acc {acc:.3f}; {deposit_sentence(run.load_table('deposit'))}")

    console.rule("[bold]4. report")
    from workbench.report import build_report

    out = store.root / "report.html"
    build_report(store, "all", out, title=f"PE-Lab demo ({preset} preset)")
    console.print(f"report: {out}  summary: {out.with_name('summary.json')}")

    if "--no-serve" in argv or os.environ.get("CI"):
        return
    console.rule("[bold]5. dashboard: http://127.0.0.1:8050  (Ctrl-C to stop)")
    from apps import create_app

    create_app(store.root).run(host="127.0.0.1", port=8050, debug=False)


if __name__ == "__main__":
    main()
