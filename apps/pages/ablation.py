"""Ablation atlas: per run, the layer x head heatmap of ablation deltas, the per-layer strip/violin plot (the
paper's figures) and the deposit statistics with their intervals; two runs side by side."""
from __future__ import annotations

from dash import Input, Output, State, dcc, html

from apps import common as C
from apps.jobs import analysis_work, register_job, register_recreate
from workbench.train.recreate import analyze_command

PATH, NAME, ORDER = "/ablation", "Ablation atlas", 1
P = "abl"
SIDES = ("a", "b")


def table_name(mode: str) -> str:
    from workbench.analysis.ablation import table_name as tn

    return tn(mode or "zero")


VIEWS = [{"label": "per layer: lines over heads", "value": "ablation_layers"},
         {"label": "per layer: violins (paper Figs. 4, 8)", "value": "ablation_violins"}]


def layout(run: str | None = None, run_b: str | None = None, metric: str = "accuracy", mode: str = "zero",
           view: str = "ablation_layers", **query):
    from workbench.analysis.ablation import MODES

    mode = mode if mode in MODES else "zero"  # a value from the address: one of the dropdown's
    store = C.stores()
    df = C.index(store)
    a = C.default_run(df, run, need_table=table_name(mode), store=store)
    b = run_b if run_b in set(df["id"]) else None
    if b is None and run_b is None:
        b = C.partner_run(df, a, need_table=table_name(mode), store=store)
    opts = C.run_options(df)
    controls = html.Div([
        C.labelled("metric", dcc.Dropdown(id=f"{P}-metric", value=metric, clearable=False,
                                          options=[{"label": "accuracy (drop)", "value": "accuracy"},
                                                   {"label": "loss (rise)", "value": "loss"}]), width="180px"),
        C.labelled("ablation", dcc.Dropdown(id=f"{P}-mode", value=mode, clearable=False,
                                            options=[{"label": "zero", "value": "zero"},
                                                     {"label": "mean", "value": "mean"},
                                                     {"label": "resample", "value": "resample"}]), width="140px"),
        C.labelled("per-layer view", dcc.Dropdown(id=f"{P}-view", value=view, clearable=False, options=VIEWS),
                   width="300px"),
    ], className="controls")
    cols = []
    for side, value in zip(SIDES, (a, b)):
        cols.append(html.Div([
            C.labelled(f"run {side.upper()}", dcc.Dropdown(id=f"{P}-run-{side}", options=opts, value=value,
                                                           placeholder="pick a run")),
            html.Div(id=f"{P}-out-{side}"),
            C.job_panel(f"{P}-{side}", "Run ablation", note="sweeps every head of every layer"),
            C.recreate_panel(f"{P}-{side}"),
        ], className="card"))
    return html.Div([
        C.page_header("Ablation atlas", "delta(l, h) = metric(clean) - metric(head h of layer l ablated before W_O: "
                      "z zeroed, replaced by its mean, or resampled from a same-length test example), "
                      "with 95 % bootstrap intervals over test examples. Per layer, the concentration C_l and the "
                      "single-head / average deposit test (docs/paper.md §5)."),
        controls, html.Div(cols, className="two-col")])


def deposit_block(df, metric: str, reading: dict | None = None, **scale) -> list:
    """Deposit statistics (figure, sentence, table with intervals) from the shared analysis functions, the sentence
    read by the run's status (`claims.as_read`: "cannot tell" for a run that did not learn); `scale`: the figure's
    shared axis range (`shared_scale`)."""
    from workbench.analysis.claims import as_read
    from workbench.analysis.deposit import shown_table
    from workbench.report.build import deposit_stats

    stats, sentence = deposit_stats(df, metric)
    sentence = as_read(sentence, reading)
    out = [html.H4("Deposit statistics"), html.P(sentence, className="stat-sentence")]
    out.append(C.figure_or_hint("deposit", stats, height=300, **scale))
    out.append(C.table_component(shown_table(stats), page_size=12))
    return out


def render(store, run_id: str | None, metric: str, mode: str, view: str = "ablation_layers",
           other_id: str | None = None) -> list:
    from workbench.analysis.ablation import MODES

    if metric not in ("accuracy", "loss"):  # a value from the browser: one of the dropdown's, else said
        return [C.hint(f"metric {str(metric)[:40]!r} is unknown: pick accuracy or loss.", kind="warn")]
    if mode not in MODES:
        return [C.hint(f"ablation {str(mode)[:40]!r} is unknown: pick {', '.join(MODES[:-1])} or {MODES[-1]}.",
                       kind="warn")]
    run, err = C.get_run(store, run_id)
    if err is not None:
        return [err]
    out = []
    state = C.run_state_hint(run)
    if state is not None:
        out.append(state)
        if not C.has_checkpoint(run):
            return out
    reading = C.run_reading(run)
    out += [h for h in [C.reading_hint(run, reading)] if h is not None]
    name = table_name(mode)
    df, missing = C.load_table(run, name)
    if df is None:
        return out + [missing]
    if "metric" in df.columns and metric not in set(df["metric"]):
        return out + [C.hint(f"The {name} table of {run.id} has no rows for metric {metric!r}.", kind="warn",
                             cmd=analyze_command(run.id, "ablation"))]
    from workbench.figures.ablation import shared_scale

    view = view if view in {v["value"] for v in VIEWS} else "ablation_layers"
    other, _ = C.get_run(store, other_id) if other_id else (None, None)  # runs A and B share one scale
    scale = shared_scale([df, C.load_table(other, name)[0] if other is not None else None], metric, mode, view)
    out.append(C.figure_or_hint("ablation", df, metric=metric, height=340, **scale["ablation"]))
    out.append(C.figure_or_hint(view, df, metric=metric, height=340, **scale[view]))
    try:
        out += deposit_block(df, metric, reading, **scale["deposit"])
    except Exception as e:
        out.append(C.hint(f"Deposit statistics unavailable: {type(e).__name__}: {e}", kind="error"))
    return out


def register_callbacks(app):
    for side, other in zip(SIDES, SIDES[::-1]):
        def work(progress, ctx, run_id, mode):
            return analysis_work(progress, ctx, run_id, "ablation", {"mode": mode or "zero"})

        register_job(app, f"{P}-{side}", [State(f"{P}-run-{side}", "value"), State(f"{P}-mode", "value")], work,
                     runs_from=f"{P}-run-{side}")
        register_recreate(app, f"{P}-{side}", f"{P}-run-{side}", extra=(f"{P}-mode",),
                          wanted=lambda run, mode: not run.has_table(table_name(mode)))

        @app.callback(Output(f"{P}-out-{side}", "children"), Input(f"{P}-run-{side}", "value"),
                      Input(f"{P}-metric", "value"), Input(f"{P}-mode", "value"), Input(f"{P}-view", "value"),
                      Input(f"{P}-{side}-job-result", "data"), Input(f"{P}-{side}-recreate-job-result", "data"),
                      Input(f"{P}-run-{other}", "value"))
        def show(run_id, metric, mode, view, _job, _recreated, other_id):
            store = C.stores()
            if not run_id:
                return [C.no_runs_hint(store) if store.query().empty else C.hint("Pick a run to compare.")]
            return render(store, run_id, metric or "accuracy", mode or "zero", view or "ablation_layers", other_id)
