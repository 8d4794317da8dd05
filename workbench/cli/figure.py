"""CLI: `workbench figure RUN FIGURE --out fig.pdf`: one figure of a stored table as SVG / PDF / PNG.

RUN is a run id (several, comma-separated, for figures that compare runs, e.g. extrapolation); for the
experiments over runs (convergence, partial_rope, mla_rope_nope, rope_vs_rope_sinusoidal) it is a run query
as in `workbench report --runs` (`all`, `scheme=rope|nope,task=trigger-distance`); for the run-free tables
(hadamard_check, rope_expected_score) it is `-`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .options import SHIPPED_HELP, existing_root, root_option


def _fail(msg: str, code: int = 2) -> None:
    typer.secho(f"error: {msg}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def parse_kwargs(items: list[str]) -> dict:
    """['metric=loss', 'mode=mean'] -> {'metric': 'loss', 'mode': 'mean'}; values parsed as JSON when they can be."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--kw {item!r}: write key=value, e.g. --kw metric=loss")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def figure_table(store, run: str, table: str):
    """The table FIGURE draws: an experiment over the runs a query selects, a run-free table, or the stored
    table of one or more runs (concatenated)."""
    import pandas as pd

    from workbench.analysis import EXPERIMENTS, STANDALONE
    from workbench.report import select_runs
    from workbench.report.build import not_applicable

    if table in EXPERIMENTS:
        ids = list(select_runs(store, run)["id"])
        if not ids:
            raise ValueError(f"no runs match {run!r} in {store.root}")
        return EXPERIMENTS[table](runs=[store.get(r) for r in ids])
    if table in STANDALONE:
        return STANDALONE[table]()
    frames = []
    for rid in [r.strip() for r in run.split(",") if r.strip()]:
        r = store.get(rid)
        if not r.has_table(table):
            na = not_applicable(r.config["model"]).get(table)
            if na:
                raise ValueError(f"{table} does not apply to run {rid}: {na}")
            cli = table.replace("_", "-")
            raise ValueError(f"run {rid} has no {table!r} table: compute it with `workbench analyze {rid} "
                             f"--what {cli.replace('-mean', '')}`")
        frames.append(r.load_table(table))
    if not frames:
        raise ValueError("give a run id (see `workbench runs`)")
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def figure_cmd(
    run: str = typer.Argument(..., help="run id(s), comma-separated; a run query for experiments; '-' for run-free "
                                        "tables"),
    figure: str = typer.Argument(..., help="figure name (workbench.figures.FIGURES), e.g. ablation, "
                                           "ablation-violins, extrapolation, convergence"),
    out: Path = typer.Option(..., "--out", "-o", help="file to write: .svg, .pdf or .png"),
    kw: List[str] = typer.Option([], "--kw", help="keyword argument of the figure builder, key=value (repeatable), "
                                                  "e.g. --kw metric=loss --kw value=delta"),
    width: Optional[int] = typer.Option(None, help="width in px (default: the figure's, else 1000)"),
    height: Optional[int] = typer.Option(None, help="height in px (default: the figure's, else 600)"),
    scale: Optional[float] = typer.Option(None, help="resolution multiplier (PNG)"),
    root: Optional[Path] = root_option(),
    shipped: Optional[Path] = typer.Option(None, "--shipped", help=SHIPPED_HELP),
) -> None:
    """Draw one figure of stored results with the shared builders and write it as SVG / PDF / PNG (static
    export through kaleido and the machine's headless Chromium)."""
    from workbench.analysis import NotApplicable
    from workbench.figures import FIGURES, TABLE_OF
    from workbench.figures.export import export_format, write_figure
    from workbench.store import StoreSet

    name = figure.strip().replace("-", "_")
    if name not in FIGURES:
        _fail(f"unknown figure {figure!r}; choose from {', '.join(sorted(FIGURES))}")
    export_format(out)  # bad input (ValueError, StoreError, no browser: ExportError) -> the group's `error: ...`, 2
    stores = StoreSet.open(existing_root(root), shipped)
    try:
        df = figure_table(stores, run, TABLE_OF[name])
        fig = FIGURES[name](df, **parse_kwargs(kw))
    except TypeError as e:
        _fail(f"figure {name}: {e} (check the --kw names against its docstring: workbench.figures.FIGURES[{name!r}])")
    except NotApplicable as e:
        _fail(str(e))
    write_figure(fig, out, width=width, height=height, scale=scale)
    typer.echo(f"wrote {out} ({name}, {len(fig.data)} traces)")
    from workbench.analysis import EXPERIMENTS, STANDALONE
    from workbench.analysis.claims import reading_note, reading_of

    if TABLE_OF[name] not in EXPERIMENTS and TABLE_OF[name] not in STANDALONE:
        for rid in dict.fromkeys(r.strip() for r in run.split(",") if r.strip()):
            note = reading_note(reading_of(stores.get(rid)))  # a figure of a run that did not learn says so
            if note is not None:
                typer.secho(f"note: {rid} {note[1]}", fg=typer.colors.YELLOW, err=True)


def register(app: typer.Typer) -> None:
    app.command("figure")(figure_cmd)
