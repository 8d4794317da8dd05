"""Findings: the core paper reproduced on CPU, from the shipped results (read-only): Table 1 side by side, every
claim with its verdict and evidence, every scheme at a glance, partial RoPE beside full RoPE, the
one-setting-at-a-time runs that trace a gap between the authors' settings and PE-Lab's to one field, and for any
claim the seed-aggregated ablation atlas of the runs behind it (one atlas per setting, variant and task)."""
from __future__ import annotations

from dash import Input, Output, dcc, html

from apps import common as C
from workbench.analysis.claims import (SETTINGS, answers, one_setting, partial_rope_pairs, scheme_overview, setting_of,
                                      verdict_summary)

PATH, NAME, ORDER = "/", "Findings", -1
P = "find"
VERDICT_STYLE = {"reproduced": "#e3f4e6", "mixed": "#fff4d6", "not reproduced": "#fbeceb", "inconclusive": "#eeeaf6",
                 "pending": "#f1f3f6"}


def _shipped():
    return C.stores().shipped


def _tables(store):
    """The base preset's runs (`claims.base_preset`: repro; the scale ladder's rungs are compared in COMPARISON.md,
    never averaged in), Table 1 and the claims."""
    from workbench.analysis.claims import base_preset, claims, run_table, table1

    runs = run_table(store)
    runs = runs[runs.preset == base_preset(runs)]
    return runs, table1(runs), claims(store, runs)


def layout(claim: str | None = None, **query):
    store = _shipped()
    header = C.page_header(
        "Findings: the core paper reproduced on CPU",
        "Shipped results (results/repro, read-only; no weights, nothing to train): the paper's Table 1 next to "
        "PE-Lab's mean and 95 % interval over seeds, in the authors' settings and in PE-Lab's, and each qualitative "
        "claim of the paper with its verdict, and the questions they answer. The full text, with the scale disclaimer and provenance, is "
        "results/repro/COMPARISON.md (`workbench compare results/repro`).")
    if store is None:
        return html.Div([header, C.hint("No runs of the shipped reproduction here: start the dashboard from a PE-Lab "
                                        "checkout (it reads results/repro) or pass `workbench app --shipped DIR`. "
                                        "Your own runs (`workbench train ...`) are on the Runs page.",
                                        kind="missing")])
    runs, t1, cl = _tables(store)
    if runs.empty:
        return html.Div([header, C.hint("No runs in the shipped results store yet (the reproduction grid fills it: "
                                        "docs/reproduction.md). Your own runs (`workbench train ...`) are on the "
                                        "Runs page.", kind="missing")])
    fig, missing = C.build_figure("table1", t1)  # with each setting's chance and length-only levels
    t1_view = t1.assign(paper=100 * t1["paper"], mean=100 * t1["mean"], lo=100 * t1["lo"], hi=100 * t1["hi"]) \
        .drop(columns=["runs"])
    claim_view = cl.assign(runs=cl["runs"].map(len)).rename(columns={"runs": "n_runs"})
    options = [{"label": f"{r.claim} ({r.setting}): {r.verdict}", "value": str(i)} for i, r in cl.iterrows()]
    chosen = claim if claim in {o["value"] for o in options} else (options[0]["value"] if options else None)
    summary = verdict_summary(cl)
    return html.Div([
        header,
        html.Div([html.H3("Table 1: test accuracy (%)"), C.graph(fig) if fig is not None else missing,
                  C.table_component(t1_view, id=f"{P}-table1", page_size=20)], className="card"),
        html.Div([html.H3("The questions, answered so far"),
                  C.table_component(answers(cl), id=f"{P}-answers", page_size=20, style_data_conditional=[
                      {"if": {"filter_query": f'{{verdict}} = "{v}"'}, "backgroundColor": c}
                      for v, c in VERDICT_STYLE.items()])], className="card"),
        html.Div([html.H3(f"The paper's claims ({summary})"),
                  C.table_component(claim_view, id=f"{P}-claims", page_size=40, style_data_conditional=[
                      {"if": {"filter_query": f'{{verdict}} = "{v}"'}, "backgroundColor": c}
                      for v, c in VERDICT_STYLE.items()],
                      tooltip_data=[{"evidence": {"value": r.evidence, "type": "text"}} for r in cl.itertuples()],
                      tooltip_duration=None)], className="card"),
        html.Div([html.H3("Every scheme at a glance (PE-Lab `paper` arch)"), _overview_view(store, runs)],
                 className="card"),
        html.Div([html.H3("Partial RoPE"), _partial_rope_view(store, runs)], className="card"),
        html.Div([html.H3("One setting at a time"), _one_setting_view(store, runs)], className="card"),
        html.Div([html.H3("Evidence"),
                  C.labelled("claim", dcc.Dropdown(id=f"{P}-claim", options=options, value=chosen, clearable=False)),
                  html.Div(id=f"{P}-evidence")], className="card"),
    ])


def _one_setting_view(store, runs):
    """The tier-4 pairs (`claims.one_setting`): accuracies in %, the change and both runs' deposits."""
    pairs = one_setting(store, runs)
    if pairs.empty:
        return C.hint("No one-setting-at-a-time runs shipped yet (tier 4 of grids/repro.toml: the authors' settings "
                      "with one field set back to PE-Lab's value).", kind="missing")
    view = pairs.assign(**{c: (100 * pairs[c]).round(2) for c in ("base_acc", "acc", "delta", "delta_lo",
                                                                   "delta_hi")}, runs=pairs["runs"].map(len))
    return html.Div([html.P("Each row: a run of the authors' settings with one field set back to PE-Lab's value, next "
                            "to the authors' setting itself (same task and seed); test accuracies and their "
                            "difference in points, and both runs' single-head deposits (layer, head, drop)."),
                     C.table_component(view.rename(columns={"runs": "n_runs"}), id=f"{P}-one-setting",
                                       page_size=30)])


def _overview_view(store, runs):
    """`claims.scheme_overview`: each scheme's test accuracy (%, mean and interval over seeds) and deposits."""
    d = scheme_overview(store, runs)
    if d.empty:
        return C.hint("No run of the `paper` arch shipped yet.", kind="missing")
    view = d.assign(**{c: (100 * d[c]).round(2) for c in ("mean", "lo", "hi")}, runs=d["runs"].map(len))
    return C.table_component(view.rename(columns={"runs": "n_runs"}), id=f"{P}-overview", page_size=40)


def _partial_rope_view(store, runs):
    """Tier 2's partial-RoPE runs (`claims.partial_rope_pairs`) beside full RoPE of the same task and seeds."""
    pairs = partial_rope_pairs(store, runs)
    if pairs.empty:
        return C.hint("No partial-RoPE runs shipped yet (tier 2 of grids/repro.toml: RoPE on the first k heads of "
                      "every layer, or of one layer, NoPE on the rest).", kind="missing")
    view = pairs.assign(acc=(100 * pairs["acc"]).round(2), full_acc=(100 * pairs["full_acc"]).round(2),
                        runs=pairs["runs"].map(len))
    return html.Div([html.P("RoPE on the first k heads of every layer (the authors' script) or of one layer (the "
                            "paper's appendix C.3), NoPE elsewhere, next to full RoPE of the same task and seeds: "
                            "test accuracy (%) and single-head deposits (layer, head, drop; layers from 0)."),
                     C.table_component(view.rename(columns={"runs": "n_runs"}), id=f"{P}-partial-rope",
                                       page_size=30)])


def evidence(store, cl, key: str | None) -> list:
    """For one claim row: its evidence text, the seed-aggregated ablation atlas of its runs, links to each run."""
    from workbench.analysis import aggregate_seeds

    if not isinstance(key, str) or not key.isdigit() or int(key) not in cl.index:  # a browser value
        return [C.hint("Pick a claim.", kind="info")]
    row = cl.loc[int(key)]
    out = [html.P([html.B(f"{row.verdict}: "), row.evidence])]
    groups = {}  # one atlas per (setting, variant, task): seeds of one configuration, never two variants mixed
    for rid in row.runs:
        run = store.get(rid)
        if run.has_table("ablation"):
            t = run.load_table("ablation")
            variant = run.config.get("tag") or t["scheme"].iloc[0]
            groups.setdefault((SETTINGS.get(setting_of(run.config), ""), variant, t["task"].iloc[0]), []).append(t)
    if groups:
        for (setting, variant, task), ts in groups.items():
            agg = aggregate_seeds(ts) if len(ts) > 1 else ts[0]
            fig, missing = C.build_figure("ablation", agg)
            out.append(html.Div([html.H4(f"{variant} ({setting}), {task}: zero-ablation atlas, mean over "
                                         f"{len(ts)} run(s)"), C.graph(fig) if fig is not None else missing]))
    elif row.runs:
        out.append(C.hint("These runs have no ablation table.", kind="missing"))
    out.append(html.Ul([html.Li(dcc.Link(rid, href=f"/ablation?run={rid}")) for rid in row.runs]))
    return out


def register_callbacks(app):
    @app.callback(Output(f"{P}-evidence", "children"), Input(f"{P}-claim", "value"))
    def show(key):
        store = _shipped()
        if store is None:
            return []
        _, _, cl = _tables(store)
        return evidence(store, cl, key)
