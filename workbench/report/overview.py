"""The report's answers and its view per setting (issue 42): the findings (verdict matrix, deposit map, Table 1,
each claim with its evidence behind a click) and, per (preset, setting), the learning curves and the seed-averaged
ablation atlases of Table 1's schemes: one figure per setting and analysis, seeds together, whatever the number of
runs. Per-run diagnostics are `build.py`'s, for selections of at most `MAX_DETAIL_RUNS` runs."""
from __future__ import annotations

import html
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from workbench.analysis.common import tuples
from workbench.report.build import Doc, inline_html, records

MAX_DETAIL_RUNS = 30  # per-run diagnostics (figures per run) only for a selection of at most this many runs
ATLAS_VARIANTS = ("rope", "mla", "nope")  # Table 1's schemes: their seed-averaged atlas per setting and task


def finished_table(store, runs: pd.DataFrame) -> pd.DataFrame:
    """`claims.run_table` of the selection's finished runs (each run's tables read once: `MemoStore`)."""
    from workbench.analysis.claims import run_table

    ids = [i for i, s in zip(runs["id"], runs["status"]) if s == "finished"]
    return run_table(runs=[store.get(i) for i in ids])


def disclaimer_html(preset: str, d, folded: bool = False) -> str:
    """`d` = `presets.disclaimer(preset)` as HTML: the headline in bold, the model line, a point a line; `folded`: in
    a <details> fold whose summary names the preset."""
    points = "<ul>" + "".join(f"<li>{inline_html(x)}</li>" for x in d.points) + "</ul>"
    if folded:
        return (f'<details class="disclaimer" data-preset="{html.escape(preset)}"><summary><strong>How the '
                f"<code>{html.escape(preset)}</code> preset differs from the paper's setup</strong></summary>"
                f"<p>{inline_html(d.lead)}</p>{points}</details>")
    return (f'<div class="disclaimer" data-preset="{html.escape(preset)}"><p><strong>{inline_html(d.headline)}'
            f"</strong> {inline_html(d.lead)}</p>{points}</div>")


def disclaimer_section(doc: Doc, runs: pd.DataFrame, rt: pd.DataFrame, summary: dict) -> None:
    """What differs from the paper's setup, said before any result (issue 21, the house rule): the box of the
    selection's base preset (the one the findings judge: `claims.base_preset`) open, one folded box per other preset
    the selection holds. summary.json `disclaimers`: {preset: the box as markdown}, base first."""
    from workbench.analysis.claims import base_preset
    from workbench.train.presets import PRESETS, disclaimer

    held = set(runs["preset"].dropna().astype(str)) if "preset" in runs else set()
    if not held & set(PRESETS):
        return
    base = base_preset(rt if len(rt) else runs)
    order = sorted(held & set(PRESETS), key=lambda x: (x != base, list(PRESETS).index(x)))
    boxes = {x: disclaimer(x) for x in order}
    summary["disclaimers"] = {x: d.markdown() for x, d in boxes.items()}
    doc.parts.append('<section id="read-first">')
    doc.parts.append(disclaimer_html(order[0], boxes[order[0]]))
    if len(order) > 1:
        doc.p("The selection also holds runs of other presets; how each differs from the paper's setup:", "note")
        doc.parts.extend(disclaimer_html(x, boxes[x], folded=True) for x in order[1:])
    doc.parts.append("</section>")


def findings_section(doc: Doc, store, rt: pd.DataFrame, summary: dict, log: Callable[[str], None]) -> None:
    """The claims judged on the selection (`claims.base_claims`: the base preset, the ladder's rungs beside it) as
    the verdict matrix, the deposit map and Table 1 (with its cells at the paper's own scale where GPU runs lie in
    `paper/` beside the store: `paper_scale.paper_scale_sentence`); every claim's evidence folded under its row."""
    from workbench.analysis.claims import base_claims, load_registry, registration_changes, registration_table, table1
    from workbench.analysis.findings import deposit_map, verdict_matrix
    from workbench.report.paper_scale import (paper_scale_deposits, paper_scale_sentence, paper_scale_table1,
                                              with_paper_scale_table1)
    from workbench.train.presets import LADDER

    doc.parts.append('<section id="findings">')
    doc.h(2, "Findings")
    if rt.empty:
        doc.missing("no finished run in the selection: nothing to judge yet")
        doc.parts.append("</section>")
        return
    log(f"findings: judging the claims on {len(rt)} finished runs")
    try:
        bc = base_claims(store, rt, LADDER)
        m = verdict_matrix(bc)
        dep = deposit_map(store, bc.runs)
    except Exception as e:  # one unreadable table never aborts the report
        doc.error(f"the findings could not be computed: {type(e).__name__}: {e}")
        doc.parts.append("</section>")
        return
    ids = list(rt["run_id"])
    doc.p(f"Preset {bc.base}: each claim of the paper per setting, coloured by its verdict (the number: the seeds "
          "behind it); where each scheme puts its largest single-head deposit; Table 1. The evidence of each claim "
          "is under its row below.", "note")
    doc.figure("verdict_matrix", m, "findings", ids, ["deposit", "metrics"], derived="findings.verdict_matrix")
    if (m["claim_no"] < 0).any():
        doc.figure("verdict_matrix", m, "findings", ids, ["deposit", "metrics"], {"by": "rung"},
                   derived="findings.verdict_matrix")
    if len(dep):
        doc.figure("deposit_map", dep, "findings", list(dep["run_id"]), ["deposit"], derived="findings.deposit_map")
    t1 = table1(bc.runs)
    gpu = paper_scale_root(store)  # GPU runs in paper/ beside the shipped store: their means on the bars
    doc.figure("table1", with_paper_scale_table1(t1, gpu), "findings", list(bc.runs["run_id"]), ["metrics"],
               derived="claims.table1")
    paper = paper_scale_table1(t1, gpu)
    if not paper.empty:
        doc.p(paper_scale_sentence(paper), "note")
        paper_dep = paper_scale_deposits(gpu)
        if len(paper_dep):
            doc.p("Where each paper-scale run puts its largest single-head deposit:", "note")
            doc.figure("deposit_map", paper_dep, "findings", list(paper_dep["run_id"]), ["deposit"],
                       derived="paper_scale.paper_scale_deposits")
    doc.h(3, "The claims and their evidence")
    rows = m[m["rung"] == bc.base]
    pending = rows["verdict"] == "pending"
    if summary.get("filters") and pending.any():  # a filtered selection: its pending rows lack runs it left out
        doc.p(f"{int(pending.sum())} claim row(s) pending: this selection holds no finished run that answers them "
              f"({', '.join(dict.fromkeys(rows.loc[pending, 'claim']))}); `--runs all` judges every run of the "
              "stores.", "note")
        rows = rows[~pending]
    doc.parts.append(claims_html(rows))
    doc.h(3, "The registered rules")
    doc.p("Each verdict follows a rule registered on " + load_registry().registered + " (docs/preregistration.md); "
          "a rule changed after the runs it judges were trained re-reads them, it did not predict them. "
          + " ".join(f"Changed: {line}" for line in registration_changes()), "note")
    doc.table(registration_table(bc.claims, bc.runs_all), max_rows=100)
    summary["findings"] = records(m[["claim", "setting", "rung", "verdict", "n_seeds"]])
    doc.parts.append("</section>")


def paper_scale_root(store) -> Path | None:
    """`store.paper_root` beside the shipped store a report reads (`StoreSet.shipped`; else beside the store
    itself), as the Findings page reads it; None when that folder is the store the selection comes from."""
    from workbench.store import paper_root

    shipped = getattr(store, "shipped", None)
    gpu = paper_root((shipped or store).root)
    return None if gpu is None or gpu.resolve() == Path(store.root).resolve() else gpu


def claims_html(m: pd.DataFrame) -> str:
    """One row per claim and setting: verdict (in its colour), seeds; the evidence in a <details> fold."""
    from workbench.figures.style import verdict_color

    rows = "".join(
        f"<tr><td>{html.escape(r.claim)}</td><td>{html.escape(r.setting)}</td>"
        f'<td style="background:{verdict_color(r.verdict)}">{html.escape(r.verdict)}</td><td>{int(r.n_seeds)}</td>'
        f"<td><details><summary>evidence</summary>{html.escape(str(r.evidence))}</details></td></tr>"
        for r in tuples(m))
    return ('<div class="tblwrap"><table class="tbl"><thead><tr><th>claim</th><th>setting</th><th>verdict</th>'
            f"<th>seeds</th><th>evidence</th></tr></thead><tbody>{rows}</tbody></table></div>")


def settings_section(doc: Doc, store, rt: pd.DataFrame, log: Callable[[str], None]) -> None:
    """Per (preset, setting) of the selection: the learning curves of its plain schemes (mean over seeds, band:
    min-max), a table of each variant's seeds (training seed / data seed) and accuracy (%) with how many of its runs
    have each status, and at the base preset the seed-averaged zero-ablation atlas of each of Table 1's schemes per
    task. The registered seed study's runs (`claims.is_study`) are never pooled with the runs before it: a row and
    an atlas of their own."""
    from workbench.analysis import EXPERIMENTS, aggregate_seeds
    from workbench.analysis.claims import DEFAULT_DATA_SEED, base_preset, is_study, status_counts
    from workbench.analysis.settings import SETTINGS, plain_variant

    doc.parts.append('<section id="settings">')
    doc.h(2, "Per setting (seeds together)")
    if rt.empty:
        doc.missing("no finished run in the selection")
        doc.parts.append("</section>")
        return
    base = base_preset(rt)
    order = {s: i for i, s in enumerate(SETTINGS)}
    groups = sorted(rt.groupby(["preset", "setting"]), key=lambda kv: (kv[0][0] != base, str(kv[0][0]),
                                                                       order.get(kv[0][1], len(order))))
    for k, ((preset, setting), g) in enumerate(groups, 1):
        log(f"per setting {k}/{len(groups)}: {preset} · {setting} ({len(g)} runs)")
        doc.h(3, f"{preset} · {SETTINGS.get(setting, setting)} ({len(g)} runs)", id=f"setting-{preset}-{setting}")
        plain = g[plain_variant(g) & ~g.partial.astype(bool)]
        if plain.empty:  # e.g. `--runs scheme=rope` keeps only the authors' rope-no-sinusoid there: no plain scheme
            doc.p(f"No plain run of a scheme at this setting in the selection (only {', '.join(sorted(set(g.variant)))}"
                  "): no learning curves; their accuracies are in the table.", "note")
        else:
            try:
                curves = EXPERIMENTS["convergence"](runs=[store.get(r) for r in plain["run_id"]])
                doc.figure("convergence", curves, "settings", list(plain["run_id"]), ["metrics"],
                           {"splits": ("test",)}, derived="experiments.convergence")
            except Exception as e:
                doc.error(f"learning curves of {preset} · {setting}: {type(e).__name__}: {e}")
        g = g.assign(group=np.where(is_study(g), "seed study", "before the study"),
                     seed_text=[str(sd) if ds == DEFAULT_DATA_SEED else f"{sd}/d{ds}" for sd, ds in
                                zip(g["seed"], g["data_seed"] if "data_seed" in g else [DEFAULT_DATA_SEED] * len(g))])
        keys = ["variant", "task"] + (["group"] if g["group"].nunique() > 1 else [])
        table = (g.sort_values(["seed", "data_seed"] if "data_seed" in g else ["seed"]).groupby(keys, sort=False)
                 .agg(seeds=("seed_text", ", ".join), runs=("run_id", "size"),
                      test_acc=("test_acc", lambda a: round(100 * float(np.mean(a)), 2)),
                      status=("status", status_counts))
                 .reset_index().rename(columns={"test_acc": "test acc (%, mean)", "seeds": "seeds (training/data)",
                                                "status": "what the runs show"}))
        doc.table(table, max_rows=100)
        if preset != base:
            continue
        plain = plain.assign(group=g.loc[plain.index, "group"])
        for (variant, task, group), vg in plain[plain.variant.isin(ATLAS_VARIANTS)].groupby(["variant", "task",
                                                                                               "group"]):
            have = [r for r in vg["run_id"] if store.get(r).has_table("ablation")]
            if not have:
                continue
            tables = [store.get(r).load_table("ablation") for r in have]
            atlas = aggregate_seeds(tables) if len(tables) > 1 else tables[0]
            atlas = atlas[atlas["metric"] == "accuracy"] if "metric" in atlas.columns else atlas
            who = f", {group}" if "group" in keys else ""
            doc.p(f"{variant}, {task}{who}: zero-ablation atlas, mean over {len(tables)} run(s) "
                  f"({status_counts(vg[vg.run_id.isin(have)]['status'])})", "note")
            doc.figure("ablation", atlas, "settings", have, ["ablation"], {"metric": "accuracy"},
                       derived="ablation.aggregate_seeds" if len(tables) > 1 else None)
    doc.parts.append("</section>")
