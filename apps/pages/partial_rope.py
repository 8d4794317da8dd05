"""Partial RoPE (core paper, section 5 / App. C.3): RoPE on the first k heads of layer l (or of every layer),
NoPE elsewhere -- accuracy and where the deepest deposit sits, against k, per layer. Below, the other section-5
comparisons when the store holds their runs: MLA vs RoPE vs NoPE and RoPE vs RoPE+sinusoidal. Everything is of one
task and one setting (`workbench.analysis.settings`; default: the `paper` arch), never averaged across settings."""
from __future__ import annotations

from dash import Input, Output, State, dcc, html

from apps import common as C
from apps.jobs import analyses_work, register_job

PATH, NAME, ORDER = "/partial-rope", "Partial RoPE", 2
P = "prope"
TABLE_COLUMNS = ["run_id", "variant", "k", "layer", "rope_layers", "k_per_layer", "test_acc", "shows", "train_acc",
                 "deepest_single_deposit_layer", "deepest_deposit_layer", "n_single_deposits", "max_concentration",
                 "deposit"]
RELATED = [("mla_rope_nope", "MLA vs RoPE vs NoPE (Table 1)", ("mla", "rope", "nope")),
           ("rope_vs_rope_sinusoidal", "RoPE vs RoPE+sinusoidal: where the deposit sits", ("rope", "rope+sinusoidal"))]
TRAIN_HINT = ("Train partial-RoPE runs, e.g. `workbench train --scheme rope --task trigger-distance --preset cpu "
              "--set model.scheme_kwargs.rope_heads=2 --set model.scheme_kwargs.rope_layers=[0]` (RoPE on the first "
              "2 heads of layer 0), then ablate them.")


def layout(task: str | None = None, setting: str | None = None, **query):
    from workbench.analysis.settings import default_setting, setting_options

    store = C.stores()
    df = C.index(store)
    tasks = sorted({t for t in df.get("task", []) if t})
    value = task if task in tasks else ("trigger-distance" if "trigger-distance" in tasks else
                                        (tasks[0] if tasks else None))
    settings = setting_options(df)
    chosen = setting if setting in {o["value"] for o in settings} else default_setting(df)
    return html.Div([
        C.page_header("Partial RoPE", "RoPE on the first k heads of one layer (or of every layer), NoPE on the rest: "
                      "test accuracy and the deepest layer holding a deposit, for every (layer, k) in the store; "
                      "full RoPE appears as k = n_heads, layer 'every'. The paper (appendix C.3) finds the most "
                      "significant deposit may move to the second or third layer (layers 1-2 here, counted from 0)."),
        html.Div([C.labelled("task", dcc.Dropdown(id=f"{P}-task", options=tasks, value=value, clearable=False),
                             width="240px"),
                  C.labelled("setting (runs of one setting only: never averaged across)",
                             dcc.Dropdown(id=f"{P}-setting", options=settings, value=chosen, clearable=False),
                             width="420px")], className="controls"),
        html.Div([html.Div(id=f"{P}-out"),
                  C.job_panel(P, "Run missing ablations", note="ablation sweeps for the RoPE runs of this task "
                                                               "that lack one")], className="card"),
        html.Div(id=f"{P}-related"),
    ])


def _ids(store, task: str | None, setting: str | None, schemes) -> list[str]:
    """Ids of the runs of `schemes` on `task` in `setting` (`preset/setting`; None: every setting)."""
    from workbench.analysis.settings import in_setting

    if not task:
        return []
    return list(in_setting(C.index(store, scheme=list(schemes), task=task), setting)["id"])


def _rope_runs(store, task: str | None, setting: str | None = None):
    """(RoPE runs of the task and setting with an ablation table -- shipped ones too --, those without one that
    have weights to compute it)."""
    have, lack = [], []
    for rid in _ids(store, task, setting, ["rope"]):
        run = store.get(rid)
        if run.has_table("ablation") or run.has_table("deposit"):
            have.append(run)
        elif C.has_checkpoint(run):
            lack.append(run)
    return have, lack


def read_by_status(store, view):
    """`view` (an experiment table, one or more rows a run) with `shows`, each run's status by the registered run
    rules (as the run pickers give it, `C.run_statuses`), and its `deposit` sentence read by it (`claims.as_read`:
    "cannot tell, the run did not learn: ..." for a run that did not learn)."""
    from workbench.analysis.claims import read_runs

    rows = store.query()
    rows = rows[rows["id"].isin(set(view["run_id"]))]
    return read_runs(view, dict(zip(rows["id"], C.run_statuses(store, rows))) if len(rows) else {})


def render(store, task: str | None, setting: str | None = None) -> list:
    from workbench.analysis import EXPERIMENTS

    if store.query().empty:
        return [C.no_runs_hint(store)]
    have, lack = _rope_runs(store, task, setting)
    out = []
    if lack:
        out.append(C.hint(f"{len(lack)} RoPE run(s) of {task} have no ablation table yet ("
                          + ", ".join(r.id for r in lack) + "): run `workbench analyze RUN --what ablation` or press "
                          "Run missing ablations.", kind="missing"))
    if not have:
        return out + [C.hint(f"No ablated RoPE run of {task} in this setting yet: pick another setting above, or "
                             f"{TRAIN_HINT[0].lower() + TRAIN_HINT[1:]}")]
    try:
        table = EXPERIMENTS["partial_rope"](runs=have, compute_missing=False)
    except Exception as e:
        return out + [C.hint(f"Partial-RoPE table unavailable: {type(e).__name__}: {e}", kind="error")]
    if not (table["variant"] == "partial").any():
        out.append(C.hint(f"Only full-RoPE runs so far. {TRAIN_HINT}", kind="info"))
    out.append(C.figure_or_hint("partial_rope", table, height=420))
    from workbench.figures.style import percent_table

    view = read_by_status(store, percent_table(table))
    out.append(html.P("Accuracies in %; layers from 0; `shows`: what the run can show by the registered run rules "
                      "(its deposit is read by it).", className="job-note"))
    out.append(C.table_component(view[[c for c in TABLE_COLUMNS if c in view.columns]], id=f"{P}-table"))
    return out


def render_related(store, task: str | None, setting: str | None = None) -> list:
    from workbench.analysis import EXPERIMENTS
    from workbench.figures.style import percent_table

    cards = []
    for name, title, schemes in RELATED:
        runs = [store.get(r) for r in _ids(store, task, setting, schemes)]
        runs = [r for r in runs if r.has_table("ablation") or r.has_table("deposit")]
        if len({r.config["model"]["scheme"] for r in runs}) < 2:
            continue  # nothing to compare yet
        try:
            table = EXPERIMENTS[name](runs=runs, compute_missing=False)
        except Exception as e:
            cards.append(html.Div([html.H3(title), C.hint(f"{type(e).__name__}: {e}", kind="error")], className="card"))
            continue
        if table.empty:
            continue
        view = read_by_status(store, percent_table(table))  # accuracies in %, each run's status beside them
        cols = [c for c in ("run_id", "variant", "scheme", "layer", "pattern", "test_acc", "shows", "paper_test_acc",
                            "n_single_deposits", "max_concentration", "top_head", "top_delta", "deposit")
                if c in view.columns]
        first = []  # beside the paper's numbers: first what differs from the paper's setup, per preset of the runs
        if "paper_test_acc" in table.columns:
            presets = sorted({r.config.get("preset") for r in runs} - {None})
            first = [box for k, p in enumerate(presets) if (box := C.preset_disclaimer(p, f"{P}-{name}-setup-{k}"))]
        cards.append(html.Div([html.H3(title), *first, C.figure_or_hint(name, table, height=360),
                               C.table_component(view[cols], page_size=8)], className="card"))
    return cards


def register_callbacks(app):
    def work(progress, ctx, task, setting):
        store = ctx.stores()
        _, lack = _rope_runs(store, task, setting)
        if not lack:
            return {"message": "every RoPE run of this task already has an ablation table"}
        return {"message": "; ".join(analyses_work(progress, ctx, [run.id for run in lack], "ablation"))}

    register_job(app, P, [State(f"{P}-task", "value"), State(f"{P}-setting", "value")], work)

    @app.callback(Output(f"{P}-out", "children"), Output(f"{P}-related", "children"), Input(f"{P}-task", "value"),
                  Input(f"{P}-setting", "value"), Input(f"{P}-job-result", "data"))
    def show(task, setting, _job):
        store = C.stores()
        task = task if isinstance(task, str) else None  # browser values, not necessarily one of the options
        setting = setting if isinstance(setting, str) else None
        return render(store, task, setting), render_related(store, task, setting)
