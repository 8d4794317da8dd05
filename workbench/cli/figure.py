"""CLI: `workbench figure RUN FIGURE --out fig.pdf`: one figure of a stored table as SVG / PDF / PNG.

RUN is a run id (several, comma-separated, for the MULTI_RUN figures: extrapolation, distance_bias,
distance_bias_share); for the experiments over runs (convergence, partial_rope, mla_rope_nope, rope_vs_rope_sinusoidal,
qkv_shares, self_repair_shares) it is a run query as in `workbench report --runs` (`all`,
`scheme=rope|nope,task=trigger-distance`); for the run-free tables (hadamard_check, rope_expected_score) it is `-`.
The figures drawn from no stored table (ELSEWHERE: table1, the findings maps, attention) are refused with where
they are drawn.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .options import SHIPPED_HELP, existing_root, fail, root_option


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




def figure_table(store, run: str, name: str):
    """The table figure `name` draws: an experiment over the runs a query selects, a run-free table, or the stored
    table of one run (of several, concatenated, for the MULTI_RUN figures)."""
    import pandas as pd

    from workbench.analysis import EXPERIMENTS, STANDALONE
    from workbench.figures import MULTI_RUN, TABLE_OF
    from workbench.report import parse_query, select_runs
    from workbench.report.build import not_applicable
    from workbench.train.recreate import analyze_hint

    table = TABLE_OF[name]
    if table in EXPERIMENTS:
        try:
            parse_query(run)
        except ValueError as e:
            raise ValueError(f"RUN {run!r}: figure {name} draws the runs a query selects (all, "
                             f"scheme=rope|nope,task=trigger-distance, id=RUN1|RUN2): "
                             f"{str(e).removeprefix(f'--runs {run!r}: ')}") from None
        ids = list(select_runs(store, run)["id"])
        if not ids:
            raise ValueError(f"no runs match {run!r} in {store.root}")
        return EXPERIMENTS[table](runs=[store.get(r) for r in ids])
    if table in STANDALONE:
        if run.strip() != "-":
            raise ValueError(f"RUN {run!r}: figure {name} reads no run; give '-'")
        return STANDALONE[table]()
    rids = list(dict.fromkeys(r.strip() for r in run.split(",") if r.strip()))
    if not rids or rids == ["-"]:
        raise ValueError(f"figure {name} draws a run's table: give a run id (see `workbench runs`)")
    if len(rids) > 1 and name not in MULTI_RUN:
        raise ValueError(f"figure {name} draws one run: give one run id (figures of several runs: "
                         f"{', '.join(MULTI_RUN)})")
    frames = []
    for rid in rids:
        r = store.get(rid)
        if not r.has_table(table):
            na = not_applicable(r.config["model"]).get(table)
            if na:
                raise ValueError(f"{table} does not apply to run {rid}: {na}")
            raise ValueError(f"run {rid} has no {table!r} table: {analyze_hint(r, table)}")
        frames.append(r.load_table(table))
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def figure_cmd(
    run: str = typer.Argument(..., help="run id(s), comma-separated; a run query for experiments; '-' for run-free "
                                        "tables"),
    figure: str = typer.Argument(..., help="figure name (workbench.figures.FIGURES but table1, study_map, "
                                           "verdict_matrix, deposit_map, run_accuracy and the attention ones), e.g. "
                                           "ablation, ablation-violins, extrapolation, convergence"),
    out: Path = typer.Option(..., "--out", "-o", help="file to write: .svg, .pdf or .png"),
    kw: List[str] = typer.Option([], "--kw", help="keyword argument of the figure builder, key=value (repeatable), "
                                                  "e.g. --kw metric=loss --kw value=delta"),
    width: Optional[int] = typer.Option(None, min=1, help="width in px (default: the figure's, else 1000)"),
    height: Optional[int] = typer.Option(None, min=1, help="height in px (default: the figure's, else 600)"),
    scale: Optional[float] = typer.Option(None, help="resolution multiplier (PNG), > 0"),
    root: Optional[Path] = root_option(),
    shipped: Optional[Path] = typer.Option(None, "--shipped", help=SHIPPED_HELP),
) -> None:
    """Draw one figure of stored results with the shared builders and write it as SVG / PDF / PNG (static
    export through kaleido and the machine's headless Chromium)."""
    from workbench.analysis import NotApplicable
    from workbench.figures import ELSEWHERE, FIGURES, TABLE_OF
    from workbench.figures.export import export_format, write_figure
    from workbench.store import StoreSet

    name = figure.strip().replace("-", "_")
    if name in ELSEWHERE:
        fail(f"`workbench figure` cannot draw {name} (it reads no stored table): see {ELSEWHERE[name]}")
    if name not in FIGURES:
        fail(f"unknown figure {figure!r}; choose from {', '.join(sorted(set(FIGURES) - set(ELSEWHERE)))}")
    if scale is not None and scale <= 0:
        fail(f"--scale {scale}: must be > 0 (a resolution multiplier: 2 doubles the PNG's pixels)")
    export_format(out)  # bad input (ValueError, StoreError, no browser: ExportError) -> the group's `error: ...`, 2
    stores = StoreSet.open(existing_root(root), shipped)
    try:
        df = figure_table(stores, run, name)
        fig = FIGURES[name](df, **parse_kwargs(kw))
    except TypeError as e:
        fail(f"figure {name}: {e} (check the --kw names against its docstring: workbench.figures.FIGURES[{name!r}])")
    except NotApplicable as e:
        fail(str(e))
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
