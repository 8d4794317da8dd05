"""The report's "Heads" section (issue 14): per run, the head summary (methods agreeing, deposit heads next to
the paper's ablation-only verdict) and the figures of patching, attribution patching, edge attribution, queries /
keys / values (AtP*), probes, trigger attention, direct logit attribution and self-repair, all from the tables stored
with the run; then, over the runs with a `qkv` table, where each run's heads take in the difference (`qkv_shares`), and
over those with a `self_repair` table, how much of their direct effects the heads' ablations show
(`self_repair_shares`)."""
from __future__ import annotations

import pandas as pd

from workbench.analysis.common import tuples
from workbench.analysis.head_summary import DLA_LEFT_OUT, counted, mean_dla_vote

# (table, figure builder, kwargs)
FIGURES = [("head_summary", "head_summary", {"measure": "n_agree"}), ("patching", "patching", {}),
           ("attribution", "attribution", {}), ("edges", "edges", {}), ("qkv", "qkv", {}),
           ("probes", "probes", {}),
           ("trigger_attention", "trigger_attention", {}), ("dla", "dla", {}), ("self_repair", "self_repair", {})]
# (table, experiment, heading): drawn over the runs that have the table
ACROSS = [("qkv", "qkv_shares", "Where the heads take in the difference, run by run"),
          ("self_repair", "self_repair_shares",
           "How much of the heads' direct effects their ablations show, run by run")]
COLUMNS = ["layer", "head", "methods", "n_agree", "n_methods", "paper_deposit", "zero_delta", "resample_delta",
           "patch_effect", "patch_lo", "patch_hi", "via_query", "via_key", "via_value", "probe_selectivity", "dla",
           "dla_runner_up", "self_repair", "repaired", "t2_to_t1"]


def heads_section(doc, store, summaries: list[dict], summary: dict) -> None:
    """Append the section to `doc` (a report.build.Doc); per-run deposit-head records go to summary["heads"]."""
    doc.parts.append('<section id="heads">')
    doc.h(2, "Heads: causal evidence per head")
    doc.p("A deposit head needs at least two of: ablation (resample when computed, else zero), activation patching "
          "with counterfactual pairs, a selective label probe on its z, a direct logit effect on the margin vs the "
          "runner-up class (a summary whose dla vote read the margin over the class mean is shown without it, with a "
          "note; thresholds in the table). The paper's ablation-only single-head deposit is shown beside it "
          "(docs/analyses.md).", "note")
    from workbench.train.recreate import analyze_hint

    summary.setdefault("heads", {})
    for s in summaries:
        present = set(s.get("tables", {}).get("present", []))
        doc.h(3, s["id"], id=f"heads-{s['id']}")
        run = store.get(s["id"])
        if "head_summary" not in present:
            doc.missing(f"no head summary yet: {analyze_hint(run, 'all')} (or --what "
                        "resample,patching,attribution,edges,qkv,probes,trigger-attention,dla,self-repair,"
                        "head-summary)")
            if not present & {table for table, _, _ in FIGURES}:
                continue  # the per-head tables it has are drawn below, as the dashboard's Heads page does
        doc.reading(s)  # a run that did not learn: its heads hold no learned mechanism
        for table, name, kw in FIGURES:
            if table not in present:
                if table != "head_summary":  # said above
                    doc.missing(f"{table} missing for {s['id']}: {analyze_hint(run, table)}")
                continue
            try:
                df = run.load_table(table)
            except Exception as e:
                doc.error(f"{table} table of {s['id']} unreadable: {e}")
                continue
            derived = None
            if table == "head_summary" and mean_dla_vote(df):
                doc.p(f"{DLA_LEFT_OUT} `workbench analyze {s['id']} --what dla,head-summary`.", "note")
                df, derived = counted(df), "head_summary.counted"
            doc.figure(name, df, f"heads/{table}", [s["id"]], [table], kw, derived=derived)
            if table == "head_summary":
                flagged = df[df["deposit_head"].astype(bool) | df["paper_deposit"].astype(bool)]
                doc.table(flagged[[c for c in COLUMNS if c in df.columns]] if len(flagged)
                          else pd.DataFrame({"note": ["no head flagged by the methods or by the paper's test"]}))
                summary["heads"][s["id"]] = [
                    {"layer": int(r.layer), "head": int(r.head), "methods": r.methods, "deposit_head": bool(r.deposit_head),
                     "paper_deposit": bool(r.paper_deposit)} for r in tuples(flagged)]
    from workbench.analysis import EXPERIMENTS

    for table, name, title in ACROSS:
        have = [s["id"] for s in summaries if table in s.get("tables", {}).get("present", [])]
        if not have:
            continue
        doc.h(3, title, id=f"heads-{name.replace('_', '-')}")
        try:
            df = EXPERIMENTS[name](runs=[store.get(r) for r in have])
        except Exception as e:  # an unreadable table: said in the report, the rest of it still written
            doc.error(f"{name} over {', '.join(have)}: {type(e).__name__}: {e}")
        else:
            doc.figure(name, df, f"heads/{name}", have, [table], derived=f"experiments.{name}")
    doc.parts.append("</section>")
