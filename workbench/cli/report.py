"""`workbench report`: one self-contained HTML report (+ summary.json) over a selection of runs."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .options import SHIPPED_HELP, alias_option, existing_root, pick_root, root_option


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        runs_query: str = typer.Option("all", "--runs", help="which runs: 'all' or filters like "
                                       "scheme=rope|nope,task=trigger-distance (keys: scheme task arch preset "
                                       "seed status tag id)"),
        out: Path = typer.Option(Path("report.html"), "--out", "-o", help="HTML file to write"),
        root: Optional[Path] = root_option(),
        store: Optional[Path] = alias_option("--store"),
        shipped: Optional[Path] = typer.Option(None, "--shipped", help=SHIPPED_HELP),
        title: Optional[str] = typer.Option(None, help="report title"),
        summary: Optional[Path] = typer.Option(None, help="where to write summary.json (default: beside --out, "
                                         "summary.json for report.html, else NAME.summary.json)"),
        figures_dir: Optional[Path] = typer.Option(None, "--figures-dir", help="also write every figure as a file "
                                                   "in this folder (static export; needs chromium)"),
        figure_format: str = typer.Option("svg", "--figure-format", help="format of --figures-dir files: svg, pdf "
                                          "or png"),
    ) -> None:
        """Write a self-contained HTML report (works offline) and summary.json for the selected runs (your
        store and the shipped results, as on the dashboard): the findings and a view per setting, seeds together;
        per-run diagnostics too when the selection has at most 30 runs."""
        from workbench.report import build_report, parse_query, select_runs
        from workbench.report.build import default_summary_path
        from workbench.store import StoreSet

        from workbench.figures.export import FORMATS

        try:
            parse_query(runs_query)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--runs") from None
        if figure_format not in FORMATS:
            raise typer.BadParameter(f"{figure_format!r}: use one of {', '.join(FORMATS)}",
                                     param_hint="--figure-format")
        root = existing_root(pick_root(root, store, "--store"))
        if out.is_dir():
            raise typer.BadParameter(f"{out} is a folder: give the report's file name, e.g. {out / 'report.html'}",
                                     param_hint="--out")
        if out.suffix.lower() not in (".html", ".htm"):
            raise typer.BadParameter(f"{out}: the report is HTML, name it .html (e.g. {out.with_suffix('.html')}); "
                                     "PDF / PNG / SVG figures: --figures-dir", param_hint="--out")
        if summary is not None and summary.is_dir():
            raise typer.BadParameter(f"{summary} is a folder: give summary.json's file name, e.g. "
                                     f"{summary / 'summary.json'}", param_hint="--summary")
        if summary is not None and summary.resolve() == out.resolve():
            raise typer.BadParameter(f"{summary} is the report's --out: give summary.json its own file (or leave "
                                     f"--summary out: {default_summary_path(out)})", param_hint="--summary")
        stores = StoreSet.open(root, shipped)
        chosen = select_runs(stores, runs_query)
        if chosen.empty:  # an empty report would replace a good one at --out
            raise ValueError(f"no runs match --runs {runs_query!r}: nothing written (see `workbench runs`)")
        if chosen["status"].isin(["corrupt", "incomplete"]).all():  # so would a report of runs that do not read
            why = "; ".join(f"{r.id}: {r.error}" for r in chosen.itertuples())
            raise ValueError(f"every run --runs {runs_query!r} selects is damaged, nothing written: {why}")
        for opt, path in (("--out", out), ("--summary", summary)):
            try:
                if path is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise ValueError(f"cannot write {opt} {path}: {path.parent} cannot be a folder "
                                 f"({e.strerror})") from None
        # no browser for --figures-dir: ExportError, a ValueError, becomes `error: ...`, exit 2
        import time

        t0 = time.perf_counter()

        def progress(msg: str) -> None:  # long work says what it is doing (stderr: stdout stays the result line)
            typer.echo(f"  [{time.perf_counter() - t0:5.1f} s] {msg}", err=True)

        s = build_report(stores, runs_query, out, title=title,
                         summary_path=summary, figures_dir=figures_dir, figure_format=figure_format, log=progress)
        n_missing = sum(len(r.get("tables", {}).get("missing", [])) for r in s["runs"])
        typer.echo(f"wrote {out} ({len(s['runs'])} runs, {len(s['figures'])} figures, {n_missing} missing tables) "
                   f"and {Path(summary) if summary else default_summary_path(out)}"
                   + (f"; figures as .{figure_format} in {figures_dir}" if figures_dir else ""))
        for p in s["problems"]:
            typer.secho(f"  problem: {p}", fg=typer.colors.YELLOW, err=True)
