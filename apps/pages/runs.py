"""Runs: the run index with filters (the setting first: `workbench.analysis.settings`), training curves of the
selection (by default one line per scheme of one setting, seeds averaged with their spread, at most
`C.MAX_LINES` lines; every variant or every run on request), side-by-side comparison, and a Train panel (a
CPU- or smoke-preset run at a chosen fidelity, trained as a background job)."""
from __future__ import annotations

import json

import dash
import pandas as pd
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from apps import common as C
from apps.jobs import TRAIN_PRESETS, register_job, train_work

PATH, NAME, ORDER = "/runs", "Runs", 0
P = "runs"
INDEX_COLUMNS = ["id", "setting", "variant", "task", "seed", "preset", "source", "status", "epoch", "epochs",
                 "test_acc", "shows", "train_acc", "test_loss", "wall_time_s", "n_tables", "error"]
CURVE_METRICS = [("accuracy", "accuracy"), ("loss", "loss")]
CURVE_SPLITS = [("test", "test only"), ("train|test", "train (dashed) and test (solid)")]
CURVE_SHOW = [("schemes", "one line per scheme, seeds averaged (at most 10)"),
              ("variants", "every variant, seeds averaged"), ("runs", "every run, one line each")]


def _options(values) -> list[dict]:
    vals = sorted({str(v) for v in values if v is not None and v == v})
    return [{"label": v, "value": v} for v in vals]


def _as_list(v) -> list | None:
    if v in (None, "", []):
        return None
    return v if isinstance(v, list) else [s for s in str(v).split("|") if s]


def opening_setting(df: pd.DataFrame, setting: str | None, query: dict) -> str | None:
    """The `preset/setting` the page opens on: the one the URL asks for; else, among the runs the URL's filters keep,
    the user's own runs' (the demo's while it trains), else the shipped ones' (`default_setting`: the most common
    preset's `paper` setting); None (every setting) when the filters keep no run."""
    from workbench.analysis.settings import default_setting, setting_options

    if setting in {o["value"] for o in setting_options(df)}:
        return setting
    for key in C.FILTER_KEYS:
        if (vals := _as_list(query.get(key))) and key in df.columns:
            df = df[df[key].astype(str).isin([str(v) for v in vals])]
    if df.empty:
        return None
    own = df[df["source"] == "own"] if "source" in df.columns else df.iloc[:0]
    return default_setting(own if len(own) else df)


def layout(setting: str | None = None, **query):
    from workbench.analysis.settings import setting_options

    store = C.stores()
    df = C.index(store)
    opts = setting_options(df)
    chosen = opening_setting(df, setting, query)
    filters = [C.labelled("setting", dcc.Dropdown(id=f"{P}-f-setting", options=opts, value=chosen,
                                                  placeholder="every setting"), width="340px")]
    for key in C.FILTER_KEYS:
        filters.append(C.labelled(key, dcc.Dropdown(id=f"{P}-f-{key}", options=_options(df.get(key, [])),
                                                    value=_as_list(query.get(key)), multi=True,
                                                    placeholder=f"any {key}")))
    filters.append(html.Button("Refresh", id=f"{P}-refresh", className="btn", n_clicks=0))
    filters.append(dcc.Interval(id=f"{P}-tick", interval=20_000))  # runs trained in the background appear by themselves
    filters.append(dcc.Store(id=f"{P}-stamp"))  # the stores' contents at the last update (a tick without news: none)
    return html.Div([
        C.page_header("Runs", "Every run in the store: filter by setting (runs of two settings are never averaged), "
                      "scheme, task, architecture, preset and status; training curves of the selection (by default "
                      "one line per scheme, seeds averaged); two runs side by side; train a new small run."),
        html.Div(filters, className="controls"),
        html.Div([html.H3("Run index"), html.Div(id=f"{P}-index-hint"), html.Div(id=f"{P}-index")], className="card"),
        html.Div([html.H3("Training curves"),
                  html.Div([C.labelled("metric", dcc.Dropdown(id=f"{P}-metric", clearable=False, value="accuracy",
                                                              options=[{"label": l, "value": v}
                                                                       for v, l in CURVE_METRICS]), width="160px"),
                            C.labelled("splits", dcc.Dropdown(id=f"{P}-splits", clearable=False, value="test",
                                                              options=[{"label": l, "value": v}
                                                                       for v, l in CURVE_SPLITS]), width="260px"),
                            C.labelled("lines", dcc.Dropdown(id=f"{P}-show", clearable=False, value="schemes",
                                                             options=[{"label": l, "value": v}
                                                                      for v, l in CURVE_SHOW]), width="380px")],
                           className="controls"),
                  html.Div(id=f"{P}-curves")], className="card"),
        html.Div([html.H3("Compare two runs"),
                  html.Div([C.labelled("run A", dcc.Dropdown(id=f"{P}-cmp-a"), width="720px"),
                            C.labelled("run B", dcc.Dropdown(id=f"{P}-cmp-b"), width="720px")],
                           className="controls"),
                  html.Div(id=f"{P}-compare")], className="card"),
        html.Div([html.H3("Train a run"), _train_controls(),
                  C.job_panel("train", "Train", note="CPU preset: about 1-2.5 minutes a run on 2 cores; smoke: "
                                                     "seconds.")], className="card"),
    ])


def _train_controls():
    try:
        from workbench.model import list_schemes

        schemes = list(list_schemes())
    except Exception:  # pragma: no cover
        schemes = ["rope", "nope"]
    from workbench.train.presets import FIDELITIES, PRESETS, TASKS

    presets = [p for p in PRESETS if p in TRAIN_PRESETS]
    fidelities = [{"label": f, "value": f, "title": v["doc"]} for f, v in FIDELITIES.items()]
    return html.Div([
        C.labelled("scheme", dcc.Dropdown(id=f"{P}-t-scheme", options=schemes, value="rope", clearable=False)),
        C.labelled("task", dcc.Dropdown(id=f"{P}-t-task", options=list(TASKS), value=TASKS[0], clearable=False),
                   width="200px"),
        C.labelled("arch", dcc.Dropdown(id=f"{P}-t-arch", options=["paper", "encoder", "decoder"], value="paper",
                                        clearable=False)),
        C.labelled("preset", dcc.Dropdown(id=f"{P}-t-preset", options=presets,
                                          value="cpu" if "cpu" in presets else presets[0], clearable=False)),
        C.labelled("seed", dcc.Input(id=f"{P}-t-seed", type="number", value=42, min=0, step=1)),
        C.labelled("fidelity", dcc.Dropdown(id=f"{P}-t-fidelity", options=fidelities, value="pelab",
                                            clearable=False), width="170px"),
    ], className="controls")


def fidelity_choices(fidelity, arch, scheme) -> tuple:
    """(arch, scheme) of the train form after picking a fidelity: the ones it fixes (`authors`: paper arch,
    `authors-mla`: encoder arch and MLA), else the form's own."""
    from workbench.train.presets import FIDELITIES

    f = FIDELITIES.get(fidelity) if isinstance(fidelity, str) else None
    if f is None:
        return arch, scheme
    return f.get("arch", arch), f.get("scheme", scheme)


def _with_tables(store, df: pd.DataFrame) -> pd.DataFrame:
    """The index as shown: setting labels, what each run can show (`shows`: its `run_status`), how many tables it
    has, accuracies in %."""
    from workbench.analysis.settings import setting_label
    from workbench.figures.style import percent_table

    df = df.copy()
    tables = []
    for rid in df["id"]:
        try:
            tables.append(store.get(rid).tables())
        except Exception:
            tables.append([])
    df["tables"] = [", ".join(t) for t in tables]
    df["n_tables"] = [len(t) for t in tables]
    df["shows"] = df["run_status"].fillna("") if "run_status" in df else ""  # as `workbench runs --rules` heads it
    df = C.sort_index(df)
    if "source" in df.columns:  # the user's own runs first, the shipped ones after
        df = df.sort_values("source", key=lambda s: s != "own", kind="stable")
    df["setting"] = [setting_label(s, short=True) for s in df["setting"]]
    return percent_table(df)


def curves_frame(store, run_ids: list[str]) -> pd.DataFrame:
    """Per-epoch metrics of several runs: the shared convergence experiment table of workbench.analysis."""
    from workbench.analysis import EXPERIMENTS

    return EXPERIMENTS["convergence"](runs=[store.get(r) for r in run_ids])


def _curves(store, ids: list[str], metric: str, splits: str = "test", per_run: bool = False):
    if not ids:
        return C.hint("None of the selected runs has finished an epoch yet: train one with "
                      "`workbench train --scheme rope --task trigger-distance --preset cpu`.")
    try:
        df = curves_frame(store, ids)
    except C.not_applicable_type():
        df = None
    except Exception as e:
        return C.hint(f"Training curves unavailable: {type(e).__name__}: {e}", kind="error")
    if df is None or df.empty:
        return C.hint("None of the selected runs has finished an epoch yet: train one with "
                      "`workbench train --scheme rope --task trigger-distance --preset cpu`.")
    wanted = tuple(x for x in str(splits).split("|") if x in ("train", "test")) or ("test",)
    return C.figure_or_hint("convergence", df, metric=metric, splits=wanted, per_run=per_run, height=520)


def register_callbacks(app):
    register_job(app, "train", [State(f"{P}-t-scheme", "value"), State(f"{P}-t-task", "value"),
                                State(f"{P}-t-preset", "value"), State(f"{P}-t-seed", "value"),
                                State(f"{P}-t-arch", "value"), State(f"{P}-t-fidelity", "value")],
                 lambda progress, ctx, scheme, task, preset, seed, arch, fidelity:
                 train_work(progress, ctx, scheme, task, preset, seed, arch, fidelity))

    @app.callback(Output(f"{P}-t-arch", "value"), Output(f"{P}-t-scheme", "value"),
                  Input(f"{P}-t-fidelity", "value"), State(f"{P}-t-arch", "value"), State(f"{P}-t-scheme", "value"),
                  prevent_initial_call=True)
    def on_fidelity(fidelity, arch, scheme):
        return fidelity_choices(fidelity, arch, scheme)

    @app.callback(
        Output(f"{P}-index", "children"), Output(f"{P}-index-hint", "children"), Output(f"{P}-curves", "children"),
        Output(f"{P}-cmp-a", "options"), Output(f"{P}-cmp-b", "options"),
        Output(f"{P}-cmp-a", "value"), Output(f"{P}-cmp-b", "value"),
        *[Output(f"{P}-f-{k}", "options") for k in C.FILTER_KEYS], Output(f"{P}-stamp", "data"),
        *[Input(f"{P}-f-{k}", "value") for k in C.FILTER_KEYS], Input(f"{P}-f-setting", "value"),
        Input(f"{P}-metric", "value"), Input(f"{P}-splits", "value"), Input(f"{P}-show", "value"),
        Input(f"{P}-refresh", "n_clicks"), Input("train-job-result", "data"),
        Input(f"{P}-tick", "n_intervals"), State(f"{P}-cmp-a", "value"), State(f"{P}-cmp-b", "value"),
        State(f"{P}-stamp", "data"),
    )
    def update(scheme, task, arch, preset, status, setting, metric, splits, show, _n, _job, _tick, cmp_a, cmp_b,
               seen):
        """The index, the curves and the pickers; on the 20-s tick only when a store changed since (a rebuild
        reset the table's sort and page and the figure's zoom, and cost 0.6 CPU-s a tick an open tab)."""
        store = C.stores()
        stamp = "|".join(s.contents_stamp() for _, s in store.sources)
        if dash.ctx.triggered_id == f"{P}-tick" and stamp == seen:
            raise PreventUpdate
        return (*_index_view(store, scheme, task, arch, preset, status, setting, metric, splits, show, cmp_a, cmp_b),
                stamp)

    @app.callback(Output(f"{P}-compare", "children"), Input(f"{P}-cmp-a", "value"), Input(f"{P}-cmp-b", "value"),
                  Input(f"{P}-metric", "value"))
    def compare(a, b, metric):
        from workbench.store import StoreError

        if not a and not b:
            raise PreventUpdate
        store = C.stores()
        ids = [r for r in (a, b) if r]
        cols = {}
        for rid in ids:
            run, err = C.get_run(store, rid)
            if err is not None:
                return err
            try:
                cols[rid] = _describe(run)
            except StoreError as e:  # e.g. an own run's table file damaged: a hint, never an HTTP 500
                return C.hint(f"Run {rid} cannot be compared: {e}", kind="error")
        keys = list(dict.fromkeys(k for d in cols.values() for k in d))
        rows = [{"field": k, **{rid: cols[rid].get(k, "") for rid in ids}} for k in keys]
        diff = pd.DataFrame(rows)
        note = None
        if len(ids) == 2:
            differs = [str(r[ids[0]]) != str(r[ids[1]]) for r in rows]
            keep = [d or r["field"].split(".")[0] in ("status", "shows", "final", "tables")
                    for d, r in zip(differs, rows)]
            diff["differs"] = ["≠" if d else "" for d in differs]
            hidden = len(diff) - sum(keep)
            diff = diff[keep].sort_values("differs", ascending=False, kind="stable")
            note = html.Span(f"{hidden} identical config fields hidden", className="job-note") if hidden else None
        return html.Div([C.table_component(diff, id=f"{P}-cmp-table", page_size=15), note,
                         _curves(store, ids, metric or "accuracy", "train|test", per_run=True)])


def _index_view(store, scheme, task, arch, preset, status, setting, metric, splits, show, cmp_a, cmp_b):
    """What the index callback shows for these filters: the index table, its notes, the curves, the compare
    pickers' options and values, and each filter's options."""
    from workbench.analysis.claims import NOT_LEARNED
    from workbench.analysis.settings import in_setting

    everything = store.query()
    df = in_setting(C.index(store, scheme=scheme, task=task, arch=arch, preset=preset, status=status),
                    setting if isinstance(setting, str) else None)
    filter_opts = [_options(everything.get(k, [])) for k in C.FILTER_KEYS]
    if everything.empty:
        hint = C.no_runs_hint(store)
        return (None, hint, C.hint("No training curves: the store is empty."), [], [], None, None, *filter_opts)
    damaged = C.damaged_hints(store)  # named whatever the filters, which a damaged run's missing setting fails
    if df.empty:
        return (None, [C.hint("No run matches these filters; clear one of them."), *damaged], None, [], [], None,
                None, *filter_opts)
    shown = _with_tables(store, df)
    cols = [c for c in INDEX_COLUMNS if c in shown.columns]
    table = C.table_component(shown[cols], id=f"{P}-table", page_size=12, tooltip_data=[
        {"n_tables": {"value": t or "no tables", "type": "text"}} for t in shown["tables"]],
        tooltip_duration=None, style_data_conditional=[
        *[{"if": {"filter_query": f'{{shows}} = "{st}"', "column_id": ["test_acc", "shows"]},
           "color": "#a04030"} for st in NOT_LEARNED],
        {"if": {"filter_query": '{status} = "failed" || {status} = "corrupt" || {status} = "incomplete"'},
         "backgroundColor": "#fbeceb"},
        {"if": {"filter_query": '{status} = "interrupted" || {status} = "running" || {status} = "created"'},
         "backgroundColor": "#fdf6e3"}])
    notes = _status_notes(df, damaged)
    show = show if isinstance(show, str) and show in {v for v, _ in CURVE_SHOW} else "schemes"
    curves = _curves(store, C.curve_runs(df, show), metric or "accuracy", splits or "test", per_run=show == "runs")
    opts = C.run_options(df)
    ids = list(df["id"])
    a = cmp_a if cmp_a in ids else C.default_run(df)  # by default RoPE against NoPE of its setting and task
    b = cmp_b if cmp_b in ids and cmp_b != a else C.partner_run(df, a)
    return (table, notes, curves, opts, opts, a, b, *filter_opts)


def _status_notes(df: pd.DataFrame, damaged: list) -> list:
    """Under the index: the count of runs by status, the damaged runs' hints, and a hint with the command that
    resumes each failed, incomplete, interrupted or created run."""
    counts = df["status"].value_counts().to_dict()
    notes = [html.Span(f"{len(df)} run(s): " + ", ".join(f"{v} {k}" for k, v in counts.items())
                       + "; accuracies in %"), *damaged]
    for r in df.to_dict("records"):
        if r["status"] in ("failed", "incomplete"):
            err = (r.get("error") or "no error recorded").strip().splitlines()[-1]
            notes.append(C.hint(f"{r['id']} {r['status']}: {err}", cmd=f"workbench train --resume {r['id']}",
                                kind="error"))
        elif r["status"] in ("interrupted", "created"):
            notes.append(C.hint(f"{r['id']} is {r['status']} (epoch {r.get('epoch') or 0} of "
                                f"{r.get('epochs') or '?'}): partial.", cmd=f"workbench train --resume {r['id']}",
                                kind="warn"))
    return notes


def _describe(run) -> dict:
    """Status, what the run can show by the registered run rules and why (`claims.status_of_run`), final metrics
    (accuracies in %), stored tables and the flattened config of one run."""
    from workbench.analysis.claims import status_of_run
    from workbench.figures.style import ACCURACY_COLUMNS, shown

    st = status_of_run(run)
    d = {"status": run.status, "shows": st["status"] or "", "shows.why": st["why"] or ""}
    for k, v in (run.final or {}).items():  # house precision: times 0.1 s, accuracies 2 decimals in %, else `shown`
        if k in ACCURACY_COLUMNS and isinstance(v, (int, float)):
            d[f"final.{k} (%)"] = round(100 * v, 2)
        else:
            d[f"final.{k}"] = shown(k, v)  # a loss of 4e-7 is not 0.0
    d["tables"] = ", ".join(run.tables())
    made = _made_by(run)
    if made:
        d["tables.made_by"] = made
    refreshed = _refreshed(run.info)
    if refreshed:
        d["tables.refreshed"] = refreshed
    from workbench.store import flat_config

    # a field added after a run was stored: its implicit value; a list shown as JSON
    d.update({k: json.dumps(v) if isinstance(v, list) else v for k, v in flat_config(run.config).items()})
    return d


def _refreshed(info: dict) -> str:
    """A shipped run's tables re-made from a bit-identical re-training (run.json `refreshed`, `workbench verify
    --refresh`), each time: "probes, head_summary on 2026-12-02 by 1f5c075 (made before 6a3fc22)"; "" when none."""
    return "; ".join(f"{', '.join(r.get('tables') or [])} on {str(r.get('refreshed', '?'))[:10]} by "
                     f"{r.get('code_version', '?')} (made before {', '.join(r.get('changes') or []) or '?'})"
                     for r in info.get("refreshed") or [])


def _made_by(run) -> str:
    """What made the run's tables, grouped: "2d0d6e3 on 2026-12-02 at 1 thread: ablation, deposit; not recorded:
    probes" (each table's provenance, `store.run.table_provenance`; "" when none records it)."""
    groups: dict[str, list[str]] = {}
    for name in run.tables():
        made = run.provenance_of(name)
        key = "not recorded" if not made else (
            f"{made.get('code_version', '?')} on {str(made.get('analysed', '?'))[:10]} at "
            f"{(made.get('numerics') or {}).get('threads', '?')} thread(s)")
        groups.setdefault(key, []).append(name)
    if list(groups) == ["not recorded"]:
        return ""
    return "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(groups.items(), key=lambda kv: kv[0] == "not recorded"))
