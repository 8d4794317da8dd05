"""MLA's "no indispensable single head": the largest zero-ablation drop of any head against both thresholds."""
from __future__ import annotations

import pandas as pd

from ..common import exact, task_label, tuples
from .rules import (TESTS, FEW_SEEDS, specificity, _contrast_runs, _learned, _row, _runs, _seed_label, _settled,
                    _stored, _two_extra, _two_thresholds, _uncounted_notes, _unshown, _verdict, _waiting)
from .runs import TASKS, _rests


def largest_drop(abl: pd.DataFrame) -> pd.Series:
    """The head whose zero-ablation costs the most test accuracy (layer, head, delta, ci_lo, ci_hi)."""
    acc = abl[abl["metric"] == "accuracy"]
    return acc.loc[acc["delta"].idxmax()]


def _mla_claims(store, runs, th) -> list[dict]:
    """The registered headline `mla-no-indispensable-head`: "head-wise ablation under MLA shows no single head is
    indispensable for Task 1": a counted run agrees when its largest zero-ablation drop of any head is below the
    deciding threshold (and, shown beside, below the second); the share rule decides; full RoPE (whose deposit the
    paper says MLA mitigates) is the contrast. Task 2 rows are beyond the paper."""
    out = []
    claim, paper = "MLA has no indispensable single head (heads ablated)", "MLA shows no indispensable single head"

    def judged(sub):
        good = _settled(sub)
        abl = _stored(store, _learned(sub)["run_id"], "ablation")
        tops = {rid: largest_drop(a) for rid, a in abl.items()}
        return good, abl, tops, [(r, bool(exact(tops[r.run_id].delta) < th.indispensable),
                                  bool(exact(tops[r.run_id].delta) < th.also)) for r in tuples(good) if r.run_id in tops]

    for setting in ("paper", "authors-mla", "encoder"):
        for task in TASKS:
            sub = _runs(runs, setting, "mla", task)
            if sub.empty and setting != "paper":
                continue
            good, ablations, tops, rows = judged(sub)
            shows = {rid: (f"largest zero-ablation drop L{int(t.layer)}.H{int(t['head'])} "
                           f"{t.delta:.3f} [{t.ci_lo:.3f}, {t.ci_hi:.3f}]") for rid, t in tops.items()}
            notes = [f"seed {_seed_label(r)} (test acc {r.test_acc:.3f}): {shows[r.run_id]}" for r, _, _ in rows]
            agree, agree_also = [a for _, a, _ in rows], [b for _, _, b in rows]
            parts = (["; ".join(notes) + f" (indispensable: drop >= {th.indispensable:g})"] if notes else []) \
                + _uncounted_notes(sub, shows)
            ev = "; ".join(parts) + _waiting(good, ablations, "ablation") if parts \
                else "no finished run with an ablation table yet"
            extra = {"claim_id": "mla-no-indispensable-head" if task == "trigger-distance" else "",
                     "rests_on": _rests(good, sub)}
            if rows:
                two = _two_thresholds(agree, agree_also, th)
                ev += f". Decision: {two['text']}"
                extra.update(_two_extra(two))
                rope = _contrast_runs(runs, "authors" if setting == "authors-mla" else setting, "rope", task)
                c = judged(rope)[3]
                label, text = specificity([a for _, a, _ in c], th, f"RoPE {task_label(task)}")
                ev += f"; {text}"
                extra["specificity"] = label
            verdict = _unshown(sub) if len(sub) and good.empty else _verdict(agree, th)
            result = verdict
            if task != "trigger-distance" and (verdict in TESTS or verdict == FEW_SEEDS):
                verdict = "beyond the paper"
            out.append(_row(f"{claim}, {task_label(task)}", paper, setting, verdict, ev, sub.run_id, result, **extra))
    return out
