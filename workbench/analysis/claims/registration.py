"""The registration as a tidy table: every registered rule (registry.toml) with its version, when it changed and
whether that was after the runs it judges were trained, and what changed (the `change` of each changed rule and
decision). COMPARISON.md renders it with the commit that registered each rule; the Findings page shows it."""
from __future__ import annotations

import pandas as pd

from .registry import load_registry

REGISTRATION_COLUMNS = ["rule", "section", "decision", "version", "changed", "what", "after_runs", "latest_run",
                        "runs_judged", "caveat"]


def registration_table(cl: pd.DataFrame, runs_all: pd.DataFrame) -> pd.DataFrame:
    """One row per registered claim rule: id, paper section, decision, version; `changed`, the later of the rule's
    own `changed` date and its decision's (`what`: "its decision" where the decision's is the later one, "" where
    neither changed); `after_runs`, whether that date is after the latest `started` of the runs its rows in `cl`
    judge (a rule changed after its runs is a re-reading of them, not a prediction); `latest_run` (that date),
    `runs_judged`, and `caveat` (registered, "" if none): where the quoted sentence does not itself state the
    direction the rule tests."""
    reg = load_registry()
    started = dict(zip(runs_all.run_id, runs_all["started"].astype(str) if "started" in runs_all else []))
    rows = []
    for c in reg.claims:
        judged = cl[cl.claim_id == c["id"]] if "claim_id" in cl else cl.iloc[:0]
        ids = [x for rs in judged.runs for x in rs]
        last = max((started.get(x, "") for x in ids), default="")[:10]
        own = str(c.get("changed") or "")
        changed = max(own, str(reg.decision.get(c["decision"], {}).get("changed") or ""))
        rows.append({"rule": c["id"], "section": str(c["section"]), "decision": c["decision"],
                     "version": int(c.get("version", 1)), "changed": changed,
                     "what": "its decision" if changed and changed != own else "",
                     "after_runs": bool(changed and last and changed > last), "latest_run": last,
                     "runs_judged": len(ids), "caveat": str(c.get("caveat", ""))})
    return pd.DataFrame(rows, columns=REGISTRATION_COLUMNS)


def registration_changes() -> list[str]:
    """What changed since the registration, one line each: every decision (`[decision.*]`) and claim rule with a
    `change`, decisions first ("the share decision (...) version 3 (2026-12-06): ...")."""
    reg = load_registry()
    return ([f"the {name} decision (`[decision.{name}]`, every {name} rule) version {d['version']} ({d['changed']}): "
             f"{d['change']}." for name, d in reg.decision.items() if d.get("change")]
            + [f"`{c['id']}` version {c['version']} ({c['changed']}): {c['change']}." for c in reg.claims
               if c.get("change")])
