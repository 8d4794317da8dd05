"""Findings: the core paper re-run on CPU, from the shipped results (read-only), answered at a glance: the
verdict matrix (each claim x setting, coloured by outcome, the seeds behind each cell written in it), the deposit map
(where each scheme's largest single-head deposit falls, per seed) and, behind a click on a cell, the evidence (text,
the picture its kind calls for, the runs); then the verdicts across the scale ladder, Table 1 (and its cells at the
paper's own scale, from the GPU runs of results/paper beside the shipped store), and the tables
(questions, claims, ladder, every scheme, partial RoPE, one setting at a time) folded away below. Every table is
computed once per state of the shipped store (`_computed`; `warm` fills it at server start).
"""
from __future__ import annotations

import threading

import pandas as pd
from dash import Input, Output, State, ctx, dcc, html
from dash.exceptions import PreventUpdate

from apps import common as C
from workbench.analysis.claims import (GAP_CLOSER, answers, one_setting, one_setting_effect, partial_rope_pairs,
                                       registration_changes, registration_table, scheme_overview, tier_runs,
                                       verdict_summary)
from workbench.analysis.common import scheme_label, task_label
from workbench.analysis.settings import SETTINGS, describe
from workbench.figures.style import VERDICT_COLORS, percent_table, verdict_color

PATH, NAME, ORDER = "/", "Findings", -1
ALIASES = ["/findings"]  # the page's name as a path (it was a 404) redirects to it
P = "find"
EVIDENCE_KINDS = ("accuracy", "curves", "deposits", "overfit")
CLAIM_COLUMNS = ["no", "claim", "paper", "setting", "verdict", "holds_across_scale", "n_runs"]  # evidence: a click


def verdict_styles(verdicts) -> list[dict]:
    """Row colours of a table with a `verdict` column: each verdict its colour (`style.verdict_color`)."""
    return [{"if": {"filter_query": f'{{verdict}} = "{v}"'}, "backgroundColor": verdict_color(v)}
            for v in dict.fromkeys(list(VERDICT_COLORS) + [str(v) for v in verdicts])]


def verdict_legend(verdicts=()) -> html.Div:
    """One chip per verdict in its colour: every verdict the rules can give, then any other seen in the table."""
    names = list(dict.fromkeys(list(VERDICT_COLORS) + [str(v) for v in verdicts]))
    return html.Div([html.Span("verdicts:", className="legend-title")]
                    + [html.Span(v, className="verdict-chip", style={"backgroundColor": verdict_color(v)})
                       for v in names], className="verdict-legend")


def disclaimer(preset: str) -> html.Details | None:
    """The runs' scale disclaimer, said first (`C.preset_disclaimer`)."""
    return C.preset_disclaimer(preset, f"{P}-disclaimer")


def evidence_kind(row) -> str:
    """The claim's `evidence_kind` when the table has one, else a guess from its words (accuracy comparisons,
    convergence, overfitting; deposits otherwise)."""
    kind = getattr(row, "evidence_kind", None)
    if isinstance(kind, str) and kind in EVIDENCE_KINDS:
        return kind
    text = str(getattr(row, "claim", "")).lower()
    if "overfit" in text:
        return "overfit"
    if "converge" in text:
        return "curves"
    if any(w in text for w in ("beats", "outperform", "accuracy", "generalise", "generalize", "poor")):
        return "accuracy"
    return "deposits"


def _shipped():
    return C.stores().shipped


_TABLES: dict[tuple, dict] = {}  # (store root, its contents stamp) -> the page's tables; the last store only
_LOCK = threading.Lock()  # one computation at a time: a visitor during `warm` waits for it, never sees it half made


def _computed(store) -> dict:
    """The page's tables, computed once per state of the store (`RunStore.contents_stamp`: a run added, re-shipped
    or damaged makes a new one), not on every page load and evidence click (the claims at every ladder rung take
    seconds): the base preset's runs (`claims.base_preset`: repro; the ladder's rungs are compared with them, never
    averaged in), Table 1, the claims with `holds_across_scale` (`claims.base_claims`), the scale ladder (Table 1's
    cells per rung, the gaps each rung explains, the cells run with more seeds and their claims), the verdict
    matrix and deposit map (`analysis.findings`), every scheme, partial RoPE and the one-setting pairs. Made whole
    under `_LOCK` before it is cached: a second caller waits for it (the server's `warm` thread and a first visitor
    met a half-made entry, KeyError 'matrix')."""
    from workbench.store import paper_root, paper_store

    gpu_root = paper_root(store.root)
    gpu = paper_store(gpu_root)
    key = (str(store.root), store.contents_stamp(), gpu.contents_stamp() if gpu is not None else None)
    with _LOCK:
        if key not in _TABLES:
            tables = _tables_of(store, gpu_root)
            _TABLES.clear()
            _TABLES[key] = tables
        tables = _TABLES[key]
    return {k: v.copy() if isinstance(v, pd.DataFrame) else v  # callers may add columns; the cache stays as is
            for k, v in tables.items()}


def _tables_of(store, gpu_root) -> dict:
    """`_computed`'s tables, made from the store and the GPU runs at `gpu_root`."""
    from workbench.analysis.claims import (base_claims, ladder_gaps, ladder_table1, rung_seed_cells, run_table, table1)
    from workbench.analysis.findings import MATRIX_COLUMNS, MemoStore, deposit_map, verdict_matrix
    from workbench.report.paper_scale import (NOT_RUN, paper_scale_deposits, paper_scale_note, paper_scale_table1,
                                              with_paper_scale_claims, with_paper_scale_table1)
    from workbench.train.presets import LADDER

    store = MemoStore(store)  # each run's tables read once for all of the tables below
    runs_all = run_table(store)
    judged = base_claims(store, runs_all, LADDER)
    runs, cl, rungs = judged.runs, judged.claims, judged.rungs
    lad_t1 = ladder_table1(runs_all, rungs)
    t1 = table1(runs)
    at_scale = with_paper_scale_claims(cl, gpu_root)
    empty = runs.empty  # no finished run to judge: the page says so; these tables need some
    return {"runs": runs, "table1": t1, "claims": cl, "rungs": rungs, "ladder": lad_t1,
            "gaps": ladder_gaps(lad_t1, rungs), "seeds": rung_seed_cells(runs_all, rungs),
            "seeded": judged.seeded, "answers": judged.answers,
            # the paper's own scale: the GPU runs beside the shipped store (results/paper)
            "paper_t1": paper_scale_table1(t1, gpu_root),
            "table1_fig": with_paper_scale_table1(t1, gpu_root),  # their means on the bars
            "paper_claims": at_scale[~at_scale.paper_scale.isin(["–", NOT_RUN])
                                     & ~at_scale.paper_scale.str.startswith("pending")],  # judged there
            "paper_note": paper_scale_note(gpu_root, "results/paper"),
            "paper_deposits": paper_scale_deposits(gpu_root),  # where each GPU run's largest deposit falls
            "matrix": pd.DataFrame(columns=MATRIX_COLUMNS) if empty else verdict_matrix(judged),
            "deposits": pd.DataFrame() if empty else deposit_map(store, runs),
            "overview": pd.DataFrame() if empty else scheme_overview(store, runs),
            "partial": pd.DataFrame() if empty else partial_rope_pairs(store, runs),
            "one_setting": pd.DataFrame() if empty else one_setting(store, runs),
            "study": judged.study, "tier2": judged.tier2, "tiers": judged.tiers,
            "tier_runs": {t: tier_runs(runs_all, t) for t in judged.tiers},
            "registration": registration_table(cl, runs_all)}


def warm(shipped_root) -> None:
    """Compute the page's tables for the shipped store at `shipped_root` (the server calls it in a thread at start,
    so the first visitor does not wait for them); a failure is left for the page to show."""
    from pathlib import Path

    from workbench.store import RunStore

    try:  # the root as the app holds it (`AppContext.shipped_root`, resolved): one cache key
        _computed(RunStore(Path(shipped_root).resolve(), readonly=True))
    except Exception:
        pass


def _tables(store):
    """(runs, Table 1, claims) of the base preset (`_computed`)."""
    t = _computed(store)
    return t["runs"], t["table1"], t["claims"]


def _header(store, preset: str | None) -> html.Div:
    """The page's title and lead for the shipped store it reads (results/repro as a rule; `workbench app --shipped
    results/paper` judges the paper-scale GPU runs instead): where it is, at what preset."""
    title = ("Findings: the core paper at its own scale (GPU runs)" if preset == "paper" else
             "Findings: the core paper re-run on CPU")
    if store is None:  # no shipped store: the hint below says how to start with one
        return C.page_header(title, "The findings are read from a shipped results store; this dashboard has none.")
    where = C.shown_path(store.root)
    return C.page_header(
        title, f"Shipped results ({where}, read-only): each claim of the paper per setting, coloured by its verdict "
        "(the number: seeds run, not all counted), and where each scheme puts its largest single-head deposit. "
        f"Click a cell for its evidence. The full text: {where}/COMPARISON.md (`workbench compare {where}`).")


def layout(claim: str | None = None, **query):
    store = _shipped()
    if store is None:
        return html.Div([_header(store, None), C.hint(
            "No runs of the shipped reproduction here: start the dashboard from a PE-Lab checkout (it reads "
            "results/repro) or pass `workbench app --shipped DIR`. Your own runs (`workbench train ...`) are on the "
            "Runs page.", kind="missing")])
    t = _computed(store)
    runs, t1, cl, m = t["runs"], t["table1"], t["claims"], t["matrix"]
    preset = str(runs.preset.iloc[0]) if len(runs) else None
    header = _header(store, preset)
    if runs.empty:
        return html.Div([header, C.hint("No runs in the shipped results store yet (the reproduction grid fills it: "
                                        "docs/reproduction.md). Your own runs (`workbench train ...`) are on the "
                                        "Runs page.", kind="missing")])
    options = [{"label": f"{r.claim} ({r.setting}, {r.rung}): {r.verdict}", "value": _key(i, r)}
               for i, r in m.iterrows()]
    values = {o["value"] for o in options}
    # the headline question, where RoPE puts position: a cell with runs, in the `paper` arch where it has them
    shallow = sorted((r.n_seeds == 0, r.setting != "paper", k) for k, r in enumerate(m.itertuples())
                     if r.claim.startswith("RoPE's largest single-head") and r.claim_no >= 0)
    chosen = claim if claim in values else ([options[k]["value"] for *_, k in shallow[:1]]
                                            or [o["value"] for o in options] or [None])[0]
    t1_view = percent_table(t1, ("paper", "mean", "lo", "hi", "chance", "length_only")).drop(columns=["runs"])
    return html.Div([
        header,
        *C.damaged_hints(C.stores()),  # runs that do not read or changed since shipped: named, left out
        disclaimer(str(runs.preset.iloc[0])),  # what differs from the paper's setup, before the answers
        html.Div([
            html.Div([C.figure_or_hint("verdict_matrix", m, id=f"{P}-matrix")], className="glance-cell"),
            html.Div([C.figure_or_hint("deposit_map", t["deposits"], id=f"{P}-deposits")], className="glance-cell"),
        ], className="two-col glance"),
        html.Div([html.H3("Evidence", id=f"{P}-evidence-title"),
                  html.P("Click a cell of a verdict matrix (or a row of the claims table below), or pick a claim:",
                         className="job-note"),
                  dcc.Dropdown(id=f"{P}-claim", options=options, value=chosen, clearable=False),
                  html.Div(id=f"{P}-evidence")], className="card", id=f"{P}-detail"),
        *(_cpu_studies_elsewhere() if preset == "paper" else [
            _study_view(t["study"], t["tier2"], t["tiers"], t["tier_runs"]),
            html.Div([html.H3("Across scale: the verdicts at each rung of the scale ladder"),
                      C.figure_or_hint("verdict_matrix", m, id=f"{P}-ladder-matrix", by="rung")
                      if (m["claim_no"] < 0).any()
                      else html.Div([C.hint("No run of the ladder's other rungs shipped yet (grids/ladder.toml: "
                                            "`make ladder`).", kind="missing"), _no_ladder_graph()]),
                      html.Details([html.Summary("the ladder's tables: questions, Table 1's cells per rung, the gaps "
                                                 "each rung explains"), _scale_view(t)])], className="card")]),
        # Table 1 with chance, length-only and the paper-scale runs' means marked
        html.Div([html.H3("Table 1: test accuracy (%)"), C.figure_or_hint("table1", t["table1_fig"]),
                  html.Details([html.Summary("the numbers"),
                                _table(t1_view, id=f"{P}-table1", page_size=20)]),
                  _paper_scale_view(t)], className="card"),
        html.Div([html.H3("Tables"),
                  _fold("The questions, answered so far",
                        _table(answers(cl).drop(columns=["evidence"]), id=f"{P}-answers", page_size=20,
                                          style_data_conditional=verdict_styles(cl["verdict"]))),
                  _fold(f"The paper's claims ({verdict_summary(cl)})",
                        verdict_legend(cl["verdict"]),
                        html.P("Click a claim to see its evidence (above).", className="job-note"),
                        _table(claims_view(cl), id=f"{P}-claims", page_size=40,
                                          style_data_conditional=verdict_styles(cl["verdict"]))),
                  _fold("Every scheme at a glance (PE-Lab `paper` arch)", _overview_view(store, runs, t)),
                  _fold("Partial RoPE", _partial_rope_view(store, runs, t)),
                  _fold("One setting at a time", _one_setting_view(store, runs, t)),
                  _fold("The registered rules (docs/preregistration.md)", *_registration_view(t["registration"]))],
                 className="card"),
    ])


def _registration_view(reg: pd.DataFrame) -> list:
    """The registered rules (`claims.registration_table`): each rule's version and whether it changed after the
    runs it judges were trained (then it re-reads them, it did not predict them), and what changed."""
    changes = registration_changes()
    out = [html.P("Every verdict above follows one of these rules, fixed on the registration's date; a rule "
                  "changed later keeps its id and gets a higher version. A rule changed after its runs were "
                  "trained is a re-reading of them, not a prediction.")]
    if changes:
        out.append(html.Details([html.Summary(f"what changed since the registration ({len(changes)})"),
                                 html.Ul([html.Li(c) for c in changes])], open=True))
    view = reg.rename(columns={"after_runs": "changed after its runs", "what": "changed: what",
                               "latest_run": "its latest run started", "runs_judged": "runs judged"})
    return out + [_table(view, id=f"{P}-registration", page_size=20)]


def _paper_scale_view(t: dict) -> html.Div:
    """The paper's own scale (`report.paper_scale`: the GPU runs of results/paper, beside the shipped store), inside
    the Table 1 card: how many runs and what differs, each Table 1 cell trained there in a line beside the paper's
    and the CPU reproduction's, and (folded) its numbers, where each run's largest deposit falls (the deposit map)
    and each claim as judged on those runs; or the command that trains them."""
    from workbench.report.paper_scale import paper_scale_sentence

    note = t["paper_note"].strip()
    if not note:  # the store read is the paper-scale one (`store.paper_root` is None): nothing beside it
        return html.Div(id=f"{P}-paper-scale")
    if t["paper_t1"].empty:
        return html.Div(dcc.Markdown(f"**At the paper's own scale (GPU runs).** {note}"), id=f"{P}-paper-scale",
                        className="job-note")
    cells = percent_table(t["paper_t1"], ("paper", "cpu_mean", "mean", "lo", "hi")).drop(columns=["runs"]).rename(
        columns={"cpu_mean": "CPU repro mean", "mean": "paper-scale mean", "n_seeds": "seeds",
                 "status": "what the runs can show"})
    judged = t["paper_claims"][["claim", "setting", "verdict", "paper_scale"]].rename(
        columns={"verdict": "verdict at repro (CPU)", "paper_scale": "at paper scale: verdict and evidence"})
    head = "At the paper's own scale"
    return html.Details([
        html.Summary([html.B(head), paper_scale_sentence(t["paper_t1"]).removeprefix(head).replace("`", "")]),
        dcc.Markdown(note, className="job-note"),
        _table(cells, id=f"{P}-paper-table1", page_size=18),
        *([html.P("Where each of these runs puts its largest single-head deposit (its head ablation on the GPU):",
                  className="job-note"), C.figure_or_hint("deposit_map", t["paper_deposits"], id=f"{P}-paper-deposits")]
          if len(t["paper_deposits"]) else []),
        html.P(f"The claims judged on these runs ({len(judged)}; the others wait for runs not trained yet):",
               className="job-note"),
        _table(judged, id=f"{P}-paper-claims", page_size=20)], id=f"{P}-paper-scale")


def _no_ladder_graph() -> dcc.Graph:
    """The ladder matrix's graph, hidden, where there is no ladder to draw (its clicks' callback needs the id)."""
    return dcc.Graph(id=f"{P}-ladder-matrix", style={"display": "none"})


def _cpu_studies_elsewhere() -> list:
    """In place of the seed study and the scale ladder on the paper-scale store: both are CPU grids, shipped to the
    CPU reproduction's store, and none of their runs is in this one."""
    return [html.Div([html.H3("The seed study and the scale ladder"),
                      html.P("Both are CPU grids at the `repro` presets (docs/preregistration.md, "
                             "docs/reproduction.md), shipped to results/repro: their verdicts are on the Findings "
                             "page of that store (`workbench app`, its default). This store holds the paper-scale GPU "
                             "runs of Table 1 only.", className="job-note"), _no_ladder_graph()], className="card")]


def _study_view(st: pd.DataFrame, tier2: pd.DataFrame, tiers: dict, tier_tables: dict | None = None) -> html.Div:
    """The registered seed study (docs/preregistration.md): its readouts per scheme (a share with its Wilson
    interval, deciding at 0.05, 0.10 beside) and the layer x run map (`figures.study.study_map`), the runs trained
    before the registration beside it, never pooled; tier 2's ordering readout per group (`tier2`,
    `claims.tier2_readouts`) and each share tier's per scheme and group (`tiers[N]`, `claims.tier_readouts`), with
    its runs (`tier_tables[N]`, `claims.tier_runs`: each beside the same seeds' run of an earlier tier)."""
    from workbench.analysis.claims import (by_construction_note, load_registry, planned_runs, study_readouts,
                                           study_title, tier2_title)
    from workbench.report.study import preset_difference, study_differs

    study = load_registry().study
    n_done = int((st["group"] == "study").sum()) if not st.empty else 0
    differs = html.Details([html.Summary(f"Not the paper's setup: {preset_difference(study['preset'])}; PE-Lab's "
                                         "models (open: how they differ)"),
                            html.P(study_differs())], className="job-note")
    intro = html.P(f"RoPE and MLA on Task 1 at `{study['preset']}`, {len(study['train_seeds'])} training seeds x "
                   f"{len(study['data_seeds'])} data seeds each, judged by the rules registered before any of them "
                   f"was trained (later versions flagged in COMPARISON.md): {n_done} of "
                   f"{planned_runs(all_schemes=True)} runs shipped (`make study` continues it).", className="job-note")

    def shipped(df, col):
        return int(df.loc[df.group == "study", col].sum()) if len(df) else 0

    n2 = shipped(tier2, "pairs")
    tier_views = [html.Details([html.Summary(f"tier 2: {tier2_title()}: " + ("; ".join(
                                    f"{r.group}: {r.decision}" for r in tier2.itertuples() if r.group == "study")
                                    if n2 else f"not started (0 of {planned_runs(tier=2)} pairs)")),
                                html.P(f"Read by the ordering rule of `{study['tier2']['claims'][0]}`; {n2} of "
                                       f"{planned_runs(tier=2)} registered pairs shipped; `make study TIER=2` "
                                       "continues it.", className="job-note"),
                                _table(tier2, id=f"{P}-study-tier2", page_size=5)])]
    for tier, reads in tiers.items():
        n, want = shipped(reads, "runs"), planned_runs(tier=tier, all_schemes=True)
        decided = "; ".join(f"{scheme_label(r.scheme)}{' (instrument check)' if r.role != 'test' else ''}: "
                            f"{r.decision}" for r in reads.itertuples() if r.group == "study")
        runs = (tier_tables or {}).get(tier, pd.DataFrame())
        tier_views.append(html.Details([
            html.Summary(f"tier {tier}: {study_title(tier)}: {decided or 'no run shipped yet'}"),
            html.P(f"Read by `{study[f'tier{tier}']['claims'][0]}` version {study[f'tier{tier}']['rule_version']} "
                   f"(registered before its runs); {n} of {want} runs shipped; `make study TIER={tier}` continues it. "
                   + by_construction_note(tier), className="job-note"),
            _table(reads, id=f"{P}-study-tier{tier}", page_size=5),
            *([html.Details([html.Summary(f"tier {tier}'s runs" + (", each beside the same seeds' run of an earlier "
                                                                   "tier, never pooled"
                                                                   if runs.earlier_run.notna().any() else "")),
                             _table(_tier_runs_view(runs), id=f"{P}-study-tier{tier}-runs", page_size=10)])]
              if len(runs) else [])]))
    if st.empty:
        return html.Div([html.H3("The seed study of the headline claims"), differs, intro, *tier_views],
                        className="card")
    readouts = study_readouts(st)
    study_rows = readouts[(readouts.group == "study") & (readouts.decision != "")]
    answer = "; ".join(f"{scheme_label(r.scheme)}, {r.readout}: {r.decision} ({r.at_005})"
                       for r in study_rows.itertuples())
    return html.Div([html.H3("The seed study of the headline claims"), differs, intro,
                     html.P(answer or "No study run has shipped yet.", className="job-note"),
                     C.figure_or_hint("study_map", st, id=f"{P}-study"), *tier_views,
                     html.Details([html.Summary("the readouts (the study's runs and the ones trained before the "
                                                "registration, never pooled)"),
                                   _table(readouts, id=f"{P}-study-readouts", page_size=10)])], className="card")


def _tier_runs_view(runs: pd.DataFrame) -> pd.DataFrame:
    """`claims.tier_runs` as the page shows it: seeds, test accuracy (epoch 1 -> last, %), status, and the same
    seeds' run of an earlier tier where there is one (the columns narrow enough for the card)."""
    def earlier(r) -> str:
        return (f"tier {int(r.earlier_tier)}: {100 * r.earlier_test_acc:.1f} ({r.earlier_status})"
                if isinstance(r.earlier_run, str) else "–")
    out = pd.DataFrame({"group": runs.group, "scheme": runs.scheme.map(scheme_label),
                        "seeds": [f"s{a} d{b}" for a, b in zip(runs.train_seed, runs.data_seed)],
                        "test acc %": [f"{100 * a:.1f} -> {100 * b:.1f}" for a, b in zip(runs.test_acc_epoch1,
                                                                                       runs.test_acc)],
                        "status": runs.status, "run_id": runs.run_id})
    if runs.earlier_run.notna().any():
        out.insert(5, "same seeds earlier", [earlier(r) for r in runs.itertuples()])
    return out


def _table(df, id: str, **kw):
    """`C.table_component` whose cells all wrap (run ids aside) and whose long-text columns are narrower, so that
    every table fits its card."""
    wrap = [{"if": {"column_id": c}, "whiteSpace": "normal", "minWidth": "48px"} for c in df.columns
            if c not in ("id", "run_id")]
    narrow = [{"if": {"column_id": c}, "minWidth": "200px", "width": "240px"} for c in df.columns
              if df[c].astype(str).str.len().max() > 80]  # prose columns: narrower than the house 380 px, taller
    return C.table_component(df, id=id, style_data_conditional=wrap + list(kw.pop("style_data_conditional", [])),
                             style_cell_conditional=narrow, **kw)


def _key(i, r) -> str:
    """A verdict-matrix row's dropdown value: the base claim's index in the claims table (the evidence by kind),
    else `m<row>`."""
    return str(r.claim_no) if r.claim_no >= 0 else f"m{i}"


def _fold(title: str, *children) -> html.Details:
    """A folded section of the Tables card: its title always shown, its table on a click."""
    return html.Details([html.Summary(title), *children], className="fold")


def _scale_view(t: dict):
    """The scale ladder (docs/reproduction.md#the-scale-ladder): the questions it was built for, answered per rung
    (`claims.ladder_answers`), Table 1's cells at each rung (seed 42, %), which gaps to the paper a rung explains
    (`claims.ladder_gaps`), and where a rung was run with more seeds, those runs and the claims judged on all of
    them (`claims.rung_claims`)."""
    lad, rungs = t["ladder"], t["rungs"]
    if lad.empty:
        return C.hint("No run of the ladder's other rungs shipped yet (grids/ladder.toml: `make ladder`).",
                      kind="missing")
    cells = percent_table(lad, ("paper",) + tuple(rungs)).assign(
        setting=[SETTINGS.get(s, s) for s in lad["setting"]])
    gaps = t["gaps"]
    gaps = percent_table(gaps, ("base", "acc", "paper", "closer")).assign(
        setting=[SETTINGS.get(s, s) for s in gaps["setting"]])
    out = [_table(t["answers"].drop(columns=["evidence"]), id=f"{P}-ladder-answers", page_size=10)] if len(t["answers"]) else []
    out += [html.P(f"The deciding settings re-run at other scales ({', '.join(rungs[1:])}; seed 42), beside "
                  f"{rungs[0]} and the paper: test accuracy (%) and each run's status. A rung explains a gap to the "
                  f"paper when it brings the cell >= {100 * GAP_CLOSER:g} points closer and its run learned and "
                  "settled; a run still learning at its last epoch, or one closer that did not learn, cannot tell "
                  f"yet; a cell already within {100 * GAP_CLOSER:g} points of the paper at {rungs[0]} has no gap "
                  "to explain."),
           _table(cells, id=f"{P}-ladder", page_size=20),
           html.H4("Which differences from the paper the ladder explains"),
           _table(gaps.rename(columns={"base": rungs[0], "closer": "points closer"}), id=f"{P}-gaps",
                             page_size=30)]
    seeded = t["seeded"]
    if len(seeded):
        seeds = percent_table(t["seeds"], ("test_acc",)).assign(
            setting=lambda d: [SETTINGS.get(s, s) for s in d["setting"]])
        view = seeded.assign(setting=[SETTINGS.get(s, s) for s in seeded["setting"]])
        out += [html.H4("Rungs run with more seeds (where seed 42's verdict changed): the claims on every seed"),
                _table(seeds, id=f"{P}-rung-seeds", page_size=20),
                _table(view.drop(columns=["evidence"]), id=f"{P}-rung-claims", page_size=20,
                                  style_data_conditional=verdict_styles(view["verdict"]))]
    return html.Div(out)


def _grid(runs) -> str:
    """The grid that trains the store's preset (grids/paper.toml for results/paper)."""
    from workbench.analysis.settings import runs_grid

    return runs_grid(runs)


def _one_setting_view(store, runs, t: dict | None = None):
    """The tier-4 pairs (`claims.one_setting`): accuracies in %, the change and both runs' deposits."""
    pairs = t["one_setting"] if t else one_setting(store, runs)
    if pairs.empty:
        return C.hint(f"No one-setting-at-a-time runs shipped yet (tier 4 of {_grid(runs)}: the authors' settings "
                      "with one field set back to PE-Lab's value).", kind="missing")
    interval = [c for c in ("delta_lo", "delta_hi") if pairs[c].notna().any()]  # one seed: no interval
    view = percent_table(pairs, ("base_acc", "acc", "delta", *interval)).assign(  # the delta in points
        shows=[one_setting_effect(r) for r in pairs.itertuples()])
    view = view[["setting", "variant", "change", "task", "n_seeds", "base_acc", "acc", "delta", *interval, "shows",
                 "base_deposit", "deposit"]]
    return html.Div([html.P("Each row: a run of the authors' settings with one field set back to PE-Lab's value, next "
                            "to the authors' setting itself (same task and seed); test accuracies and their "
                            "difference in points (and what it can show: within or beyond the baseline's seed "
                            "spread, or nothing where neither run learned), and both runs' single-head deposits "
                            "(layer, head, drop)."),
                     _table(view, id=f"{P}-one-setting", page_size=30)])


def _overview_view(store, runs, t: dict | None = None):
    """`claims.scheme_overview`: each scheme's test accuracy (%, mean and interval over seeds) and deposits."""
    d = t["overview"] if t else scheme_overview(store, runs)
    if d.empty:
        return C.hint("No run of the `paper` arch shipped yet.", kind="missing")
    view = percent_table(d, ("mean", "lo", "hi")).drop(columns=["runs"])
    return _table(view, id=f"{P}-overview", page_size=40)


def _partial_rope_view(store, runs, t: dict | None = None):
    """Tier 2's partial-RoPE runs (`claims.partial_rope_pairs`) beside full RoPE of the same task and seeds."""
    pairs = t["partial"] if t else partial_rope_pairs(store, runs)
    if pairs.empty:
        return C.hint(f"No partial-RoPE runs shipped yet (tier 2 of {_grid(runs)}: RoPE on the first k heads of "
                      "every layer, or of one layer, NoPE on the rest).", kind="missing")
    view = percent_table(pairs, ("acc", "full_acc")).drop(columns=["runs"])
    return html.Div([html.P("RoPE on the first k heads of every layer (the authors' script) or of one layer (the "
                            "paper's appendix C.3), NoPE elsewhere, next to full RoPE of the same task and seeds: "
                            "test accuracy (%) and single-head deposits (layer, head, drop; layers from 0)."),
                     _table(view, id=f"{P}-partial-rope", page_size=30)])


def claims_view(cl):
    """The claims table as shown: setting labels, the columns of CLAIM_COLUMNS the table has, the run count."""
    view = cl.assign(no=[str(i) for i in cl.index], n_runs=cl["runs"].map(len),
                     setting=[SETTINGS.get(s, s) for s in cl["setting"]])
    return view[[c for c in CLAIM_COLUMNS if c in view.columns]]


def _groups(store, run_ids) -> dict:
    """The runs by (setting label, variant, task): seeds of one configuration, never two settings or variants."""
    groups = {}
    for rid in run_ids:
        try:
            run = store.get(rid)
        except Exception:
            continue
        s = describe(run.config)
        groups.setdefault((SETTINGS.get(s.setting, s.setting), s.variant, run.config["task"]["task"]), []).append(run)
    return groups


def run_link(run) -> html.Li:
    """A run's link (its ablation page) labelled by what it is, the id after it."""
    s = describe(run.config)
    acc = (run.final or {}).get("test_acc")
    what = (f"{s.variant} · {task_label(run.config['task']['task'])} · seed {run.config['train']['seed']} · "
            f"{SETTINGS.get(s.setting, s.setting)}" + (f" · acc {100 * acc:.1f} %" if isinstance(acc, float) else ""))
    return html.Li([dcc.Link(what, href=f"/ablation?run={run.id}"), html.Span(f"  {run.id}", className="run-id")])


def _accuracy_evidence(store, run_ids, overfit: bool) -> list:
    from workbench.analysis.claims import run_table

    rt = run_table(runs=[r for rs in _groups(store, run_ids).values() for r in rs])
    if rt.empty:
        return [C.hint("These runs have no final accuracy yet.", kind="missing")]
    fig, missing = C.build_figure("run_accuracy", rt, train=overfit)
    return [C.graph(fig) if fig is not None else missing]


def comparison_runs(store, run_ids) -> list[str]:
    """A convergence claim is about one scheme against the others: the claim's runs plus the plain schemes (untagged,
    tier 1) of the same preset, setting and task that `C.curve_runs` draws by default."""
    idx = C.index(store)
    mine = idx[idx["id"].isin(run_ids)]
    keys = set(zip(mine["preset"], mine["setting"], mine["task"]))
    ours = pd.Series([k in keys for k in zip(idx["preset"], idx["setting"], idx["task"])], index=idx.index)
    same = idx[ours & (idx["status"] == "finished")]
    return list(dict.fromkeys(list(run_ids) + C.curve_runs(same)))


def _curves_evidence(store, run_ids) -> list:
    from workbench.analysis import EXPERIMENTS

    try:
        df = EXPERIMENTS["convergence"](runs=[store.get(r) for r in comparison_runs(store, run_ids)])
    except Exception as e:
        return [C.hint(f"No learning curves: {type(e).__name__}: {e}", kind="missing")]
    fig, missing = C.build_figure("convergence", df, splits=("test",))
    return [C.graph(fig) if fig is not None else missing]


def _deposit_evidence(store, run_ids) -> list:
    from workbench.analysis import aggregate_seeds

    out = []
    for (setting, variant, task), runs in _groups(store, run_ids).items():
        ts = [r.load_table("ablation") for r in runs if r.has_table("ablation")]
        if not ts:
            continue
        agg = aggregate_seeds(ts) if len(ts) > 1 else ts[0]
        fig, missing = C.build_figure("ablation", agg)
        how = f"mean over {len(ts)} seeds" if len(ts) > 1 else "one run"
        out.append(html.Div([html.H4(f"{variant} ({setting}), {task}: zero-ablation atlas, {how}"),
                             C.graph(fig) if fig is not None else missing]))
    return out or [C.hint("These runs have no ablation table.", kind="missing")]


def rung_evidence(store, m, key: str) -> list:
    """For a verdict-matrix cell at a rung other than the base (`m<row>`): its verdict, the seeds behind it, the
    evidence text and the runs (when judged on more seeds than 42)."""
    row = m.loc[int(key[1:])]
    out = [html.P([html.B(row.verdict, className="verdict-chip", style={"backgroundColor": verdict_color(row.verdict)}),
                   f" {row.claim} ({SETTINGS.get(row.setting, row.setting)}) at {row.rung}, {int(row.n_seeds)} "
                   f"seed(s): ", row.evidence])]
    groups = _groups(store, list(row.runs))
    if groups:
        out.append(html.Details([html.Summary(f"the {len(row.runs)} run(s) behind this verdict"),
                                 html.Ul([run_link(r) for rs in groups.values() for r in rs])], open=True))
    return out


def evidence(store, cl, key: str | None, matrix=None) -> list:
    """For one claim row: its verdict and evidence text, the picture its evidence kind calls for (accuracy bars,
    learning curves, ablation atlases, or train vs test accuracy), and a link to each of its runs; for a cell of
    the verdict matrix at another rung (`m<row>` of `matrix`), `rung_evidence`."""
    if (matrix is not None and isinstance(key, str) and key[:1] == "m" and key[1:].isdigit()
            and int(key[1:]) in matrix.index):
        return rung_evidence(store, matrix, key)
    if not isinstance(key, str) or not key.isdigit() or int(key) not in cl.index:  # a browser value
        return [C.hint("Pick a claim.", kind="info")]
    row = cl.loc[int(key)]
    kind = evidence_kind(row)
    head = [html.B(f"{row.verdict}", className="verdict-chip", style={"backgroundColor": verdict_color(row.verdict)}),
            " ", row.evidence]
    if isinstance(getattr(row, "holds_across_scale", None), str) and row.holds_across_scale:
        head += [html.Br(), html.I(f"holds across scale: {row.holds_across_scale}")]
    out = [html.P(head), html.P(f"evidence: {kind}", className="job-note")]
    runs = list(row.runs)
    if runs:
        if kind == "accuracy" or kind == "overfit":
            out += _accuracy_evidence(store, runs, overfit=kind == "overfit")
        elif kind == "curves":
            out += _curves_evidence(store, runs)
        else:
            out += _deposit_evidence(store, runs)
        groups = _groups(store, runs)
        out.append(html.Details([html.Summary(f"the {len(runs)} run(s) behind this verdict"),
                                 html.Ul([run_link(r) for rs in groups.values() for r in rs])], open=True))
    else:
        out.append(C.hint("No run behind this verdict yet.", kind="missing"))
    return out


def register_callbacks(app):
    @app.callback(Output(f"{P}-claim", "value"), Input(f"{P}-claims", "active_cell"),
                  Input(f"{P}-matrix", "clickData"), Input(f"{P}-ladder-matrix", "clickData"),
                  State(f"{P}-claims", "derived_viewport_data"), prevent_initial_call=True)
    def pick(cell, click, ladder_click, shown):
        """A click on a verdict-matrix cell (its row of the matrix table) or on a row of the claims table (its
        `no`) picks that claim for the Evidence card."""
        if ctx.triggered_id in (f"{P}-matrix", f"{P}-ladder-matrix"):
            return matrix_key(click if ctx.triggered_id == f"{P}-matrix" else ladder_click)
        row = cell.get("row") if isinstance(cell, dict) else None
        if (not isinstance(row, int) or not isinstance(shown, list) or not 0 <= row < len(shown)
                or not isinstance(shown[row], dict)):
            raise PreventUpdate
        return str(shown[row].get("no"))

    @app.callback(Output(f"{P}-evidence", "children"), Input(f"{P}-claim", "value"))
    def show(key):
        store = _shipped()
        if store is None:
            return []
        t = _computed(store)
        return evidence(store, t["claims"], key, t["matrix"])


def matrix_key(click) -> str:
    """The dropdown value of a clicked verdict-matrix cell (its `customdata`: the row of the matrix table); a
    browser value that is not one: no update."""
    try:
        i = click["points"][0]["customdata"]
    except (TypeError, KeyError, IndexError):
        raise PreventUpdate
    if not isinstance(i, int) or isinstance(i, bool) or i < 0:
        raise PreventUpdate
    store = _shipped()
    m = _computed(store)["matrix"] if store is not None else None
    if m is None or i not in m.index:
        raise PreventUpdate
    return _key(i, m.loc[i])
