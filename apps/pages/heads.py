"""Heads: "does this head carry the distance?" -- every per-head method side by side (issue 14).

Pick a run; the (layer x head) map shows any measure of its head summary (zero / mean / resample ablation,
patching effect and its gradient estimate (AtP), label-probe selectivity, direct effect, trigger attention, methods
agreeing) with the deposit heads (>= 2 methods) and the paper's ablation-only deposits marked. Click a head for its
card: all measures with their intervals, and its attention pattern on a chosen test example with the triggers
marked. Below, the full figures of patching, attribution patching, edge attribution, queries / keys / values
(AtP*), probes, trigger attention, direct logit attribution and self-repair. Missing tables get a hint and a
Compute button (a background job)."""
from __future__ import annotations

import pandas as pd
from dash import Input, Output, State, dcc, html

from apps import common as C
from apps.jobs import analysis_work, register_job, register_recreate
from workbench.analysis import NotApplicable
from workbench.analysis.head_summary import DLA_LEFT_OUT, counted, mean_dla_vote, sources_of, summarise
from workbench.figures.style import shown
from workbench.train.recreate import analyze_command

PATH, NAME, ORDER = "/heads", "Heads", 2
P = "heads"
DETAILS = [("patching", "Activation patching"), ("attribution", "Attribution patching (AtP, checked against patching)"),
           ("edges", "Edge attribution (which later component reads each head)"),
           ("qkv", "Queries, keys or values (AtP*: where each head's effect enters)"), ("probes", "Linear probes"),
           ("trigger_attention", "Trigger attention"), ("dla", "Direct logit attribution"),
           ("self_repair", "Self-repair (how much of a head's direct effect the rest makes up when it is ablated)")]
MAX_NAMED = 12  # deposit heads named under the map
COMPUTABLE = ["head_summary", "ablation_resample", "patching", "attribution", "edges", "qkv", "probes",
              "trigger_attention", "dla", "self_repair", "ablation"]


def _measures():
    from workbench.figures.heads import SUMMARY_MEASURES

    return [{"label": v, "value": k} for k, v in SUMMARY_MEASURES.items()]


def layout(run: str | None = None, measure: str = "n_agree", example: str | None = None, **query):
    store = C.stores()
    df = C.index(store)
    value = C.default_run(df, run, need_table="head_summary", store=store)
    return html.Div([
        C.page_header("Heads", "Does a head carry the distance? Ablation (zero, mean, resample), activation patching "
                      "with counterfactual pairs (nnsight), linear probes with shuffled controls, direct logit "
                      "attribution and trigger attention, per head. A deposit head needs at least two methods to "
                      "agree; the paper's ablation-only single-head deposit is marked beside it (docs/paper.md §5)."),
        html.Div([
            C.labelled("run", dcc.Dropdown(id=f"{P}-run", options=C.run_options(df), value=value,
                                           placeholder="pick a run"), width="720px"),
            C.labelled("map", dcc.Dropdown(id=f"{P}-measure", options=_measures(), value=measure, clearable=False),
                       width="300px"),
            C.labelled("test example (attention)", dcc.Input(id=f"{P}-example", type="number", min=0, step=1,
                                                             value=C.url_int(example), debounce=True)),
        ], className="controls"),
        C.recreate_panel(P),
        html.Div([
            html.Div([html.Div(id=f"{P}-map"),
                      dcc.Graph(id=f"{P}-map-graph", config=C.GRAPH_CONFIG, style={"display": "none"}),
                      html.P(id=f"{P}-map-note", className="stat-sentence"),
                      html.Div([  # hidden for a shipped run: its tables cannot be added (`C.any_own_run`)
                          C.labelled("compute", dcc.Dropdown(id=f"{P}-what", value="head_summary", clearable=False,
                                                             options=[{"label": n, "value": n} for n in COMPUTABLE]),
                                     width="240px"),
                          C.job_panel(P, "Compute", note="stores the chosen table for the run (head_summary joins "
                                                         "the per-head tables already stored)")], id=f"{P}-compute")],
                     className="card"),
            html.Div([html.H3("Head card (click a head on the map)"), html.Div(id=f"{P}-card")], className="card"),
        ], className="two-col"),
        html.Div(id=f"{P}-details"),
    ])


def summary_of(run) -> tuple[pd.DataFrame | None, list]:
    """(head summary, hints): the stored `head_summary` table; else the run's stored per-head tables joined here
    (`head_summary.summarise`: no weights needed, so a shipped run that ships only its ablation tables still gets
    its map), said in a hint; else (None, [the missing table's hint])."""
    df, missing = C.load_table(run, "head_summary", button="Compute")
    if df is not None or run.has_table("head_summary"):  # stored (or stored and unreadable: its error hint)
        return df, [missing] if df is None else []
    try:
        df = summarise(run)
    except NotApplicable:
        return None, [missing]
    own = "" if run.store.readonly else f"; `{analyze_command(run.id, 'head_summary')}` stores it"
    return df, [C.hint(f"{run.id} stores no head_summary table: the map joins its stored per-head tables here "
                       f"({', '.join(sources_of(run))}); a method without a table has no vote{own}.", kind="info")]


def render_map(store, run_id: str | None, measure: str):
    """(hints, map figure or None, sentence) of a run's head summary."""
    run, err = C.get_run(store, run_id)
    if err is not None:
        return [err], None, ""
    reading = C.run_reading(run)  # what the run can show: the sentence below is read by it (`claims.as_read`)
    out = [h for h in [C.run_state_hint(run), C.reading_hint(run, reading)] if h is not None]
    df, notes = summary_of(run)
    out += notes
    if df is None:
        return out, None, ""
    if mean_dla_vote(df):
        out.append(C.hint(DLA_LEFT_OUT, cmd=analyze_command(run.id, "dla,head-summary"), kind="info"))
    df = counted(df)
    fig, ferr = C.build_figure("head_summary", df, measure=measure)
    if fig is None:
        return out + [ferr], None, ""
    fig.update_layout(height=420)
    dep = df[df["deposit_head"].astype(bool)]
    named = ", ".join(f"L{r.layer}.H{r.head} ({r.methods})" for r in dep.head(MAX_NAMED).itertuples())
    more = f" and {len(dep) - MAX_NAMED} more (circles on the map)" if len(dep) > MAX_NAMED else ""
    text = (f"{len(dep)} deposit head{'s' if len(dep) > 1 else ''}: {named}{more}" if len(dep)
            else f"no head is flagged by {int(df['min_agree'].iloc[0])} methods")
    from workbench.analysis.claims import as_read

    return out, fig, as_read(text, reading)


def _selected(df, click) -> tuple[int, int]:
    """The clicked head, else the first deposit head, else the head most methods agree on (a click that names no
    cell of the map, as a made-up request may send, counts as none)."""
    try:
        p = click["points"][0]
        layer, head = int(p["y"]), int(p["x"])
        if ((df["layer"] == layer) & (df["head"] == head)).any():
            return layer, head
    except (TypeError, KeyError, IndexError, ValueError, AttributeError):
        pass
    best = df.sort_values(["deposit_head", "n_agree", "layer", "head"], ascending=[False, False, True, True]).iloc[0]
    return int(best["layer"]), int(best["head"])


def attention_block(run, layer: int, head: int, example: int) -> list:
    """The head's attention pattern on one test example (live, under the cached model's lock)."""
    from apps.pages.explorer import example_batch, pattern_table, patterns, pick_example

    try:
        model = C.load_model_cached(run)
        ds, idx, n, row, keep = pick_example(run, int(example or 0))
    except Exception as e:
        return [C.hint(f"Cannot load {run.id}: {type(e).__name__}: {e}", kind="error")]
    if layer >= model.cfg.n_layers or head >= model.cfg.n_heads:
        return [C.hint(f"{run.id} has no layer {layer}, head {head}.", kind="warn")]
    with C.model_lock(model):
        pat = patterns(model, example_batch(model, row, keep), layer)[head:head + 1, :keep, :keep]
    words = [w.replace("[T:", "*").rstrip("]") for w in ds.decode(row).split()]
    table = pattern_table(pat, words, layer)
    table["head"] = head
    fig, err = C.build_figure("head_attention", table)
    note = html.P(f"test example #{idx} of {n} (label {int(ds.test_y[idx])}); triggers marked ▼", className="note")
    return [note, err if fig is None else C.graph(fig, height=420)]


def render_card(store, run_id: str | None, click, example) -> list:
    run, err = C.get_run(store, run_id)
    if err is not None:
        return [err]
    df, notes = summary_of(run)
    if df is None:
        return notes
    df = counted(df)
    layer, head = _selected(df, click)
    out = [C.figure_or_hint("head_card", df, layer=layer, head=head, height=380)]
    r = df[(df["layer"] == layer) & (df["head"] == head)]
    if len(r):
        cols = [c for c in ("zero_delta", "mean_delta", "resample_delta", "patch_effect", "patch_lo", "patch_hi",
                            "patch_trigger", "patch_non_trigger", "atp_effect", "probe_acc", "probe_selectivity", "dla",
                            "dla_runner_up", "self_repair", "repaired", "t2_to_t1", "to_triggers", "methods",
                            "deposit_head", "paper_deposit") if c in r.columns]
        # house precision (`style.shown`: 1.5e-4 is not 0.000, NaN is '–'); shipped tables are float32
        values = [str(shown(c, v)) for c, v in zip(cols, r[cols].iloc[0])]
        out.append(C.table_component(pd.DataFrame({"measure": cols, "value": values}), page_size=20))
    if C.has_checkpoint(run):
        out += attention_block(run, layer, head, int(example or 0))
    elif run.store.readonly:  # the attention pattern is computed live: it needs the weights
        out.append(C.no_weights_hint(run))
    return out


def render_details(store, run_id: str | None) -> list:
    run, err = C.get_run(store, run_id)
    if err is not None:
        return []
    cards = []
    for name, title in DETAILS:
        df, missing = C.load_table(run, name)
        cards.append(html.Div([html.H3(title), C.figure_or_hint(name, df, missing=missing, height=380)],
                              className="card"))
    return cards


def register_callbacks(app):
    def work(progress, ctx, run_id, what):
        if what not in COMPUTABLE:
            raise ValueError(f"{what!r} cannot be computed here; choose one of {COMPUTABLE}")
        return analysis_work(progress, ctx, run_id, what)

    register_job(app, P, [State(f"{P}-run", "value"), State(f"{P}-what", "value")], work)
    register_recreate(app, P, f"{P}-run")

    @app.callback(Output(f"{P}-map", "children"), Output(f"{P}-map-graph", "figure"),
                  Output(f"{P}-map-graph", "style"), Output(f"{P}-map-note", "children"),
                  Output(f"{P}-details", "children"), Output(f"{P}-compute", "style"),
                  Output(f"{P}-map-graph", "clickData"), Input(f"{P}-run", "value"),
                  Input(f"{P}-measure", "value"), Input(f"{P}-job-result", "data"),
                  Input(f"{P}-recreate-job-result", "data"))
    def show(run_id, measure, _job, _recreated):
        """The map of the picked run; a click on the previous run's map is cleared (the card then shows this run's
        first deposit head, not a (layer, head) of another model)."""
        store = C.stores()
        if not run_id:
            return [C.no_runs_hint(store)], {}, {"display": "none"}, "", [], {"display": "none"}, None
        hints, fig, text = render_map(store, run_id, measure or "n_agree")
        # a responsive graph fills its container: without a height the map grows with the grid row it sits in
        shown = {"display": "block", "height": "440px"} if fig is not None else {"display": "none"}
        compute = {"display": "block"} if C.any_own_run(store, run_id) else {"display": "none"}
        return hints, fig or {}, shown, text, render_details(store, run_id), compute, None

    @app.callback(Output(f"{P}-card", "children"), Input(f"{P}-map-graph", "clickData"), Input(f"{P}-run", "value"),
                  Input(f"{P}-example", "value"), Input(f"{P}-job-result", "data"),
                  Input(f"{P}-recreate-job-result", "data"))
    def card(click, run_id, example, _job, _recreated):
        store = C.stores()
        if not run_id:
            return []
        try:
            return render_card(store, run_id, click, example)
        except Exception as e:  # a hint, never a traceback
            return [C.hint(f"The head card could not be drawn: {type(e).__name__}: {e}", kind="error")]

