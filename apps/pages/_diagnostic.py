"""One factory for the diagnostic pages (q/k means, initial angles, spectral, distance bias, extrapolation).

Each page: pick one run (or several, where the figure compares runs), read the stored table of the analysis,
draw it with the shared figure builders (`workbench.figures.FIGURES`). A run without the table gets a hint
naming the CLI command and a Run button that computes it as a background job (the table lands in the
store). Optional: a dropdown that feeds a keyword of the figure builders (e.g. which angle statistic), and
run-free reference tables (`workbench.analysis.STANDALONE`, e.g. the Lemma B.1 check) behind a button.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import pandas as pd
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from apps import common as C
from apps.jobs import analyses_work, register_job, register_recreate
from workbench.analysis.settings import plain_variant
from workbench.report.build import not_applicable


@dataclass
class Diagnostic:
    prefix: str
    title: str
    blurb: str
    analysis: str                      # ANALYSES name == stored table name
    figures: list[tuple[str, dict]] = field(default_factory=list)   # (FIGURES name, fixed kwargs)
    multi: bool = False                # several runs at once (tables concatenated, tagged with run_id)
    applies: str = ""                  # which runs it applies to (shown next to the picker)
    choice: tuple[str, str, list] | None = None   # (figure kwarg, label, [options]) -> a dropdown for every figure
    summary_columns: list[str] = field(default_factory=list)      # shown as a table under the figures
    standalone: list[tuple[str, dict, str]] = field(default_factory=list)  # (STANDALONE name, kwargs, button label)
    prefer: tuple[str, ...] = ("rope",)  # schemes the page opens on (a learned tier-1 `paper`-arch run, Task 1)


def make_layout(d: Diagnostic):
    def layout(run: str | None = None, **query):
        store = C.stores()
        df = C.index(store)
        want = [r for r in (run or "").split("|") if r]
        if d.multi:
            value = [r for r in want if r in set(df["id"])] or default_runs(store, df, d)
        else:
            value = C.default_run(df, want[0] if want else None, need_table=d.analysis, store=store,
                                  prefer=d.prefer)
        controls = [C.labelled("runs" if d.multi else "run",
                               dcc.Dropdown(id=f"{d.prefix}-run", options=C.run_options(df), value=value,
                                            multi=d.multi, placeholder="pick a run" + ("s" if d.multi else "")),
                               width="720px")]
        if d.choice:
            kw, label, options = d.choice
            controls.append(C.labelled(label, dcc.Dropdown(id=f"{d.prefix}-choice", options=options,
                                                           value=query.get(kw, options[0]), clearable=False),
                                       width="260px"))
        controls.append(html.Span(d.applies, className="job-note"))
        body = [C.page_header(d.title, d.blurb), html.Div(controls, className="controls"),
                html.Div([html.Div(id=f"{d.prefix}-out"),
                          C.job_panel(d.prefix, "Run", note=f"(re)computes the {d.analysis} table for the selected "
                                                            f"run{'s that lack it' if d.multi else ''}"),
                          C.recreate_panel(d.prefix)],
                         className="card")]
        for i, (name, _, label) in enumerate(d.standalone):
            body.append(html.Div([html.H3(label), html.Button("Compute", id=f"{d.prefix}-sa-{i}-go", n_clicks=0,
                                                              className="btn"),
                                  dcc.Loading(html.Div(id=f"{d.prefix}-sa-{i}-out"))], className="card"))
        return html.Div(body)

    return layout


def default_runs(store, df: pd.DataFrame, d: Diagnostic, n: int = 6) -> list[str]:
    """A multi-run page's default: per scheme (`d.prefer` first) the run `C.default_run` would open on, from one
    setting and task, that learned the task -- at most `n` lines, no two of one scheme."""
    if df.empty:
        return []
    first = C.default_run(df, None, need_table=d.analysis, store=store, prefer=d.prefer)
    row = df.set_index("id").loc[first]
    same = df[(df["setting"] == row["setting"]) & (df["preset"] == row["preset"]) & (df["task"] == row["task"])
              & plain_variant(df)]
    schemes = list(d.prefer) + sorted(set(same["scheme"]) - set(d.prefer))
    out = []
    for scheme in schemes:
        sub = same[same["scheme"] == scheme]
        rid = C.default_run(sub, None, need_table=d.analysis, store=store) if not sub.empty else None
        if rid and _has(store, rid, d.analysis) and C.learned(sub.set_index("id").loc[rid]):
            out.append(rid)
        if len(out) == n:
            break
    return out or [first]


def _has(store, rid: str, name: str) -> bool:
    try:
        return store.get(rid).has_table(name)
    except Exception:
        return False


def render(d: Diagnostic, store, run_ids: list[str], choice=None) -> list:
    """The page body for the chosen runs: figures of the stored tables, or hints."""
    if not run_ids:
        return [C.no_runs_hint(store) if store.query().empty else C.hint("Pick a run above.")]
    frames, notes = [], []
    for rid in run_ids:
        run, err = C.get_run(store, rid)
        if err is not None:
            notes.append(err)
            continue
        state = C.run_state_hint(run)
        if state is not None and not C.has_checkpoint(run):
            notes.append(state)
            continue
        df, missing = C.load_table(run, d.analysis)
        na = not_applicable(run.config["model"]).get(d.analysis)
        if df is None and na:
            notes.append(C.hint(f"{d.title} does not apply to {run.id}: {na}.", kind="info"))
        elif df is None:
            notes.append(missing)
        else:
            notes += [h for h in (state, C.reading_hint(run, C.run_reading(run))) if h is not None]
            frames.append(df)
    if not frames:
        return notes
    table = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    out = list(notes)
    for name, kwargs in d.figures:
        kw = dict(kwargs)
        if d.choice and choice is not None:  # the choice feeds every figure of the page
            kw[d.choice[0]] = choice
        out.append(C.figure_or_hint(name, table, **kw))
    cols = [c for c in d.summary_columns if c in table.columns]
    if cols:
        from workbench.figures.style import ACCURACY_COLUMNS, percent_table

        if any(c in ACCURACY_COLUMNS for c in cols):
            out.append(html.P("Accuracies in %.", className="job-note"))
        out.append(C.table_component(percent_table(table[cols]), page_size=10))
    return out


@functools.lru_cache(maxsize=8)
def _standalone(name: str, kwargs_items: tuple) -> pd.DataFrame:
    from workbench.analysis import STANDALONE

    return STANDALONE[name](**dict(kwargs_items))


def run_missing(d: Diagnostic, progress, ctx, run_ids) -> dict:
    """The job of a page's Run button: its analysis for each picked run of your own store that lacks it (all
    have it: the first again); shipped runs are left out and said (their tables cannot be added)."""
    ids = run_ids if isinstance(run_ids, list) else [run_ids] if run_ids else []
    store = ctx.stores()
    if not ids:
        raise ValueError("pick a run first")
    for r in ids:  # an id from the client that names no run is said so, not called a shipped run
        if not isinstance(r, str) or not store.exists(r):
            raise ValueError(f"unknown run {str(r)[:80]!r}: pick a run from the list")
    own = [r for r in ids if C.any_own_run(store, r)]  # a shipped run's tables cannot be added
    todo = [r for r in own if not _has(store, r, d.analysis)] or own[:1]  # all have it: the first again
    if not todo:
        raise ValueError("the picked runs are shipped runs: their tables cannot be added here (re-create one in "
                         "your store first)")
    skipped = [r for r in ids if r not in own]
    messages = [f"left out {len(skipped)} shipped run(s), whose tables cannot be added here"] if skipped else []
    messages += analyses_work(progress, ctx, todo, d.analysis, skip=C.not_applicable_type())
    return {"run_id": todo[-1], "table": d.analysis, "message": "; ".join(messages)}


def register(app, d: Diagnostic) -> None:
    work = functools.partial(run_missing, d)

    register_job(app, d.prefix, [State(f"{d.prefix}-run", "value")], work, runs_from=f"{d.prefix}-run")
    register_recreate(app, d.prefix, f"{d.prefix}-run", wanted=lambda run: not run.has_table(d.analysis) and not
                      not_applicable(run.config["model"]).get(d.analysis))

    inputs = [Input(f"{d.prefix}-run", "value"), Input(f"{d.prefix}-job-result", "data"),
              Input(f"{d.prefix}-recreate-job-result", "data")]
    if d.choice:
        inputs.append(Input(f"{d.prefix}-choice", "value"))

    @app.callback(Output(f"{d.prefix}-out", "children"), *inputs)
    def show(run_ids, _job, _recreated, *rest):
        choice = rest[0] if d.choice else None
        ids = run_ids if isinstance(run_ids, list) else ([run_ids] if run_ids else [])
        return render(d, C.stores(), ids, choice)

    for i, (name, kwargs, _) in enumerate(d.standalone):
        _register_standalone(app, f"{d.prefix}-sa-{i}", name, kwargs)


def _register_standalone(app, prefix: str, name: str, kwargs: dict) -> None:
    @app.callback(Output(f"{prefix}-out", "children"), Input(f"{prefix}-go", "n_clicks"), prevent_initial_call=True)
    def standalone(n):
        if not n:
            raise PreventUpdate
        try:
            df = _standalone(name, tuple(sorted(kwargs.items())))
        except Exception as e:
            return C.hint(f"{name} failed: {type(e).__name__}: {e}", kind="error")
        return C.figure_or_hint(name, df)
