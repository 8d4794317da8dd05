"""Deposit claims: RoPE's largest deposit in the first layer, no deposit for NoPE / ALiBi / relative / RoPE on Task 2,
absolute PE's concentrated shallow heads, RoPE+absolute against full RoPE as the control, the causal
(head_summary) rows beyond the paper, and the tables of every deposit."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from ..common import exact, scheme_label, task_label, tuples
from ..head_summary import counted, mean_dla_vote
from .rules import (share, specificity, _at, _contrast_runs, _dep_shows, _deposit_agreement, _deposit_heads,
                    _deposit_text, _deposits, _largest, _learned, _made_before, _row, _runs, _seed_label, _settled,
                    _single_layers, _stored, _two_extra, _two_thresholds, _uncounted_notes, _unshown, _verdict,
                    _waiting)
from .registry import registered_settings
from .runs import DEFAULT_DATA_SEED, TASKS, accuracy_ci, _n_test, _rests, _statuses


def _per_seed_deposit_claim(store, runs, th, claim, paper, variant, task, agrees: Callable[[pd.DataFrame], bool],
                            outcome: str | None = None, claim_id: str = "",
                            contrast: tuple[str, str] | None = None, second: Callable | None = None,
                            second_label: str = "") -> list[dict]:
    """One row per setting registry.toml registers `claim_id` for (`registered_settings`): each counted run's
    deposit table judged by `agrees` at both registered thresholds, decided by the share rule (`share`). Only runs
    that learned and settled count (`_settled`); the evidence still shows an uncounted run's deposits, marked not
    counted; none left: inconclusive (did not learn / still learning). `contrast` (variant, task): the same rule
    on the scheme the paper contrasts the claim with (`specificity`). `second`: a second reading shown beside, never
    deciding (`second_label` names it). `outcome` replaces the verdict for rows that do not test the paper (e.g.
    "beyond the paper")."""
    out = []
    for setting in registered_settings(claim_id, variant):
        sub = _runs(runs, setting, variant, task)
        if sub.empty and setting != "paper":
            continue
        good = _settled(sub)
        deps = _deposits(store, _learned(sub)["run_id"])
        judged = _deposit_agreement(store, sub, th, agrees)
        agree, agree_also = [a for _, a, _ in judged], [b for _, _, b in judged]
        shows = {rid: _dep_shows(d) for rid, d in deps.items()}
        notes = [f"seed {_seed_label(r)}: {_dep_shows(deps[r.run_id])} ({'agrees' if a else 'does not'})"
                 for r, a, _ in judged] + _uncounted_notes(sub, shows)
        ev = "; ".join(notes) + _waiting(good, deps, "deposit") if notes else "no finished run with a deposit table yet"
        two = _two_thresholds(agree, agree_also, th)
        extra = {"claim_id": claim_id, "rests_on": _rests(good, sub)}
        if judged:
            ev += f". Decision: {two['text']}"
            extra.update(_two_extra(two))
            if second is not None:
                sec = share([bool(second(_at(deps[r.run_id], th.indispensable))) for r, _, _ in judged], th)
                ev += f"; second reading ({second_label}, never deciding): {sec['text']} ({sec['verdict']})"
            if contrast is not None:
                c = _deposit_agreement(store, _contrast_runs(runs, setting, *contrast), th, agrees)
                label, text = specificity([a for _, a, _ in c], th,
                                          f"{scheme_label(contrast[0])} {task_label(contrast[1])}")
                ev += f"; {text}"
                extra["specificity"] = label
        verdict = _unshown(sub) if len(sub) and good.empty else _verdict(agree, th)
        if outcome and verdict not in ("pending",):
            verdict = outcome
        out.append(_row(claim, paper, setting, verdict, ev, sub["run_id"], **extra))
    return out


ROPE_SHALLOW = "RoPE's largest single-head deposit is in the first layer (layer 0) on Task 1"


def _rope_shallow_claim(store, runs, th) -> list[dict]:
    """The registered headline `rope-deposit-first-layer`: the paper's "ablating a single shallow-layer head causes
    a pronounced accuracy loss" (5.1), whose first layer 5.2 names: a counted run agrees when its largest
    single-head deposit is in layer 0 (`th.shallow_layer`); layer <= 1 is shown as a second reading, never
    deciding; ALiBi (which the paper calls scattered) is the contrast."""
    return _per_seed_deposit_claim(
        store, runs, th, ROPE_SHALLOW, "single-head deposit in the first (shallow) layer", "rope", "trigger-distance",
        lambda d: (layer := _largest(d)[0]) is not None and layer <= th.shallow_layer,
        claim_id="rope-deposit-first-layer", contrast=("alibi", "trigger-distance"),
        second=lambda d: (layer := _largest(d)[0]) is not None and layer <= th.shallow_second,
        second_label=f"largest deposit in layer <= {th.shallow_second}")


def concentrated(abl: pd.DataFrame, threshold: float, layers: int = 1, quiet: float = 0.01,
                 top_share: float = 0.5) -> tuple[bool, str]:
    """The registered reading of C.2's "some significant heads and some insignificant heads in the shallow layer"
    (`absolute-shallow-heads`): in layers 0..`layers`, concentrated rather than scattered: a head drops >=
    `threshold`, at least half of the heads drop < `quiet`, and the three largest drops carry >= `top_share` of
    the layers' summed positive drop. (agrees, what it shows)."""
    a = abl[(abl["metric"] == "accuracy") & (abl["layer"] <= layers)]
    d = a["delta"].to_numpy(dtype=float)
    if len(d) == 0:
        return False, "no heads"
    pos = np.clip(d, 0, None)
    top3 = float(np.sort(pos)[::-1][:3].sum() / pos.sum()) if pos.sum() > 0 else 0.0
    big, small = int((exact(d) >= threshold).sum()), int((exact(d) < quiet).sum())
    ok = big >= 1 and small >= len(d) / 2 and top3 >= top_share
    return ok, (f"{big} of {len(d)} heads in layers 0-{layers} drop >= {threshold:g}, {small} drop < {quiet:g}, "
                f"the three largest carry {100 * top3:.0f} % of the summed drop")


def _absolute_heads_claim(store, runs, th) -> dict:
    """Appendix C.2 on absolute PE's ablation atlas: "some significant heads and some insignificant heads in the
    shallow layer, and the whole is oscillating", registered as `absolute-shallow-heads` (`concentrated`), with
    ALiBi, which C.2 calls "scattered", as the contrast: the rule must not pass a scattered pattern. Counted runs
    only (`_settled`)."""
    claim = "absolute (sinusoidal) has a few significant and many insignificant heads in the shallow layers on Task 1"
    paper = "absolute: some significant and some insignificant heads in the shallow layer, oscillating"

    def judged(sub):
        good = _settled(sub)
        abl = _stored(store, good["run_id"], "ablation")
        return [(r, concentrated(abl[r.run_id], th.indispensable), concentrated(abl[r.run_id], th.also)[0])
                for r in tuples(good) if r.run_id in abl], abl, good

    sub = _runs(runs, "paper", "sinusoidal", "trigger-distance")
    rows, abl, good = judged(sub)
    agree, agree_also = [a[0] for _, a, _ in rows], [b for _, _, b in rows]
    notes = [f"seed {_seed_label(r)}: {a[1]} ({'agrees' if a[0] else 'does not'})" for r, a, _ in rows]
    notes += _uncounted_notes(sub)
    ev = ("; ".join(notes) + _waiting(good, abl, "ablation")) if notes else "no finished run with an ablation table yet"
    extra = {"claim_id": "absolute-shallow-heads", "rests_on": _rests(good, sub)}
    if rows:
        two = _two_thresholds(agree, agree_also, th)
        c, _, _ = judged(_runs(runs, "paper", "alibi", "trigger-distance"))
        label, text = specificity([a[0] for _, a, _ in c], th, "ALiBi Task 1")
        ev += f". Decision: {two['text']}; {text}"
        extra.update(_two_extra(two), specificity=label)
    verdict = _unshown(sub) if len(sub) and good.empty else _verdict(agree, th)
    return _row(claim, paper, "paper", verdict, ev, sub.run_id, **extra)


def _rope_absolute_claim(store, runs, th) -> dict:
    """"RoPE+absolute moves the deposit out of layer 0; it reappears from layer 1" (`rope-absolute-first-layer`),
    judged against full RoPE of the same task, training and data seed as the control: a run tests the claim only
    when its full RoPE has a single-head deposit in layer 0 to move; it agrees when RoPE+absolute then has none in
    layer 0 and one in a later layer. No run with a layer-0 deposit in full RoPE: not testable at this preset.
    Counted runs only (`_settled`), at both registered thresholds, by the share rule."""
    claim = "RoPE+absolute moves the deposit out of layer 0 (full RoPE as the control); it reappears from layer 1"
    paper = "the deposit leaves layer 0 and reappears from layer 1"
    sub = _runs(runs, "paper", "rope+sinusoidal", "trigger-distance")
    full = _runs(runs, "paper", "rope", "trigger-distance")
    good, good_full = _settled(sub), _settled(full)
    deps = _deposits(store, list(good.run_id) + list(good_full.run_id))
    agree = {th.indispensable: [], th.also: []}
    notes, controls = [], []
    for r in tuples(good):
        same = good_full[(good_full.seed == r.seed) & (good_full.get("data_seed", DEFAULT_DATA_SEED)
                                                       == getattr(r, "data_seed", DEFAULT_DATA_SEED))]
        base = [b for b in same.run_id if b in deps]
        if r.run_id not in deps or not base:
            continue
        for t in agree:
            d, b = _at(deps[r.run_id], t), _at(deps[base[0]], t)
            if 0 in _single_layers(b):
                agree[t].append(0 not in _single_layers(d) and any(l >= 1 for l in _single_layers(d)))
        d, b = deps[r.run_id], deps[base[0]]
        controls.append(0 in _single_layers(b))
        notes.append(f"seed {_seed_label(r)}: full RoPE {', '.join(f'L{l}' for l in _single_layers(b)) or 'no deposit'}"
                     f" -> RoPE+absolute {', '.join(f'L{l}' for l in _single_layers(d)) or 'no deposit'}")
    notes += _uncounted_notes(sub) + [f"full RoPE {n}" for n in _uncounted_notes(full)]
    ev = "; ".join(notes) if notes else "no seed with both deposit tables yet"
    extra = {"claim_id": "rope-absolute-first-layer", "rests_on": _rests(good, sub)}
    a5, a10 = agree[th.indispensable], agree[th.also]
    if len(sub) and good.empty:
        verdict = _unshown(sub)
    elif len(good) and len(full) and good_full.empty:  # the control has runs, none of them learned and settled
        verdict = _unshown(full)
        ev = "no full-RoPE run (the control) has learned and settled: " + ev
    elif controls and not any(controls):
        verdict = "not testable at this preset"
        ev = "full RoPE has no single-head deposit in layer 0 to move in any seed (the control): " + ev
    else:
        verdict = _verdict(a5, th)
        if a5:
            two = _two_thresholds(a5, a10, th)
            # the contrast (registered: rope): the moved pattern read on full RoPE itself, no layer-0 deposit and
            # one deeper; full RoPE passing it means the rule cannot tell RoPE+absolute from RoPE
            moved = [0 not in _single_layers(deps[b]) and any(l >= 1 for l in _single_layers(deps[b]))
                     for b in good_full.run_id if b in deps]
            label, text = specificity(moved, th, "full RoPE Task 1")
            ev += f". Decision: {two['text']}; {text}"
            extra["specificity"] = label
            extra.update(_two_extra(two))
    return _row(claim, paper, "paper", verdict, ev, list(sub.run_id) + list(full.run_id), **extra)


def _summaries(store, runs, setting: str, scheme: str, task: str):
    """(the runs of a cell, its settled runs, settled run id -> its stored `head_summary` table)."""
    all_sub = _runs(runs, setting, scheme, task)
    sub = _settled(all_sub)
    return all_sub, sub, _stored(store, sub["run_id"], "head_summary")


def _dla_note(hs: dict[str, pd.DataFrame], sub: pd.DataFrame) -> str:
    """The evidence's note on the seeds whose head summary's dla vote read the margin vs the mean over classes and
    is left out ("" when none)."""
    seeds = [str(r.seed) for r in tuples(sub) if r.run_id in hs and mean_dla_vote(hs[r.run_id])]
    return (f"; seed {', '.join(seeds)}: dla vote left out (its head summary read the margin vs the mean over "
            "classes, not the decision's; docs/analyses.md, head_summary)") if seeds else ""


def _causal_claims(store, runs, th) -> list[dict]:
    """Beyond zero-ablation (issue 14), from each run's `head_summary` table (votes of ablation, patching, probe
    and direct logit attribution): does RoPE's ablation deposit head also carry the distance, and does MLA have a
    head that two methods agree on? The paper used ablation alone: these rows are beyond the paper (shown, not
    counted as tests of it). Settled seeds only (`_settled`: learned, not still learning). A dla vote counts only
    where it read the margin vs the runner-up class (`head_summary.counted`; the evidence names the seeds whose vote
    is left out)."""
    out = []
    claim = "RoPE's ablation deposit head also carries the distance (>= 2 methods agree), Task 1"
    for setting in ("paper", "authors"):
        all_sub, sub, hs = _summaries(store, runs, setting, "rope", "trigger-distance")
        agree, notes = [], []
        for r in tuples(sub):
            if r.run_id not in hs:
                continue
            h = counted(hs[r.run_id])
            paper = h[h["paper_deposit"].astype(bool)]
            if paper.empty:
                notes.append(f"seed {r.seed}: no ablation deposit head")
                agree.append(False)
                continue
            both = paper[paper["deposit_head"].astype(bool)]
            agree.append(not both.empty)
            notes.append(f"seed {r.seed}: " + ", ".join(
                f"L{int(x.layer)}.H{int(x['head'])} {_ablation_vote_reads(x)}patching {x.patch_effect:.2f}, "
                f"probe selectivity {x.probe_selectivity:.2f}, votes {x.methods or 'none'}"
                for _, x in paper.iterrows()))
        if all_sub.empty and setting != "paper":
            continue
        notes += _uncounted_notes(all_sub)
        out.append(_row(claim, "one shallow head carries the bulk of positional computations", setting,
                        _beyond(agree, all_sub, sub), "; ".join(notes) + _waiting(sub, hs, "head_summary")
                        + _dla_note(hs, sub) + _made_before(store, sub, hs, "head_summary") if notes
                        else "no finished run with a head_summary table yet", all_sub["run_id"],
                        _seeds_show(agree, all_sub, sub, th)))
    claim = "MLA has no head that a causal method and a second method mark as a deposit head"
    for setting in ("paper", "authors-mla"):
        for task in TASKS:
            all_sub, sub, hs = _summaries(store, runs, setting, "mla", task)
            agree, notes = [], []
            for r in tuples(sub):
                if r.run_id not in hs:
                    continue
                h = counted(hs[r.run_id])
                dep = h[h["deposit_head"].astype(bool)]
                causal = dep[dep["methods"].map(_has_causal_vote)]
                agree.append(causal.empty)
                notes.append(f"seed {r.seed}: {len(dep)} heads with >= 2 votes, {len(causal)} with a causal one"
                             + (f" ({_vote_counts(dep)})" if len(dep) else ""))
            if all_sub.empty and setting != "paper":
                continue
            parts = notes + _uncounted_notes(all_sub)
            out.append(_row(f"{claim}, {task_label(task)}", "MLA shows no indispensable single head", setting,
                            _beyond(agree, all_sub, sub),
                            "; ".join(parts) + _waiting(sub, hs, "head_summary") + _dla_note(hs, sub)
                            + _made_before(store, sub, hs, "head_summary") if parts
                            else "no finished run with a head_summary table yet", all_sub["run_id"],
                            _seeds_show(agree, all_sub, sub, th)))
    return out


def _ablation_vote_reads(x) -> str:
    """The drop the head summary's ablation vote reads (resample ablation where the run has it, else zero
    ablation: `head_summary.compute`), named, so that a zero-ablation deposit head without an ablation vote reads
    as what it is."""
    for mode in ("resample", "zero"):
        if np.isfinite(x.get(f"{mode}_delta", np.nan)):
            return f"{mode} ablation {x[f'{mode}_delta']:.2f}, "
    return ""


def _seeds_show(agree: list[bool], runs: pd.DataFrame, counted: pd.DataFrame, th) -> str:
    """What the seeds of a row beyond the paper show (its `result`): the share decision on the counted runs; with
    none counted, why (`_unshown`: did not learn / still learning), "pending" only while runs or tables are to come."""
    if agree:
        return _verdict(agree, th)
    return _unshown(runs) if len(runs) and counted.empty else "pending"


def _beyond(agree: list[bool], runs: pd.DataFrame, learned: pd.DataFrame) -> str:
    """The outcome of a row beyond the paper: pending / inconclusive (did not learn) as any row, else
    "beyond the paper" (the evidence says what each seed shows)."""
    if len(runs) and learned.empty:
        return _unshown(runs)
    return "beyond the paper" if agree else "pending"


CAUSAL_METHODS = ("ablation", "patching")  # head_summary votes that intervene on the head; probe and dla read it


def _has_causal_vote(methods: str) -> bool:
    return any(m in CAUSAL_METHODS for m in str(methods or "").split("+"))


def _vote_counts(dep: pd.DataFrame) -> str:
    """'probe+dla 26, ablation+dla 2': how many heads each combination of votes marked."""
    return ", ".join(f"{k} {v}" for k, v in dep["methods"].value_counts().items())


def decodable_layers(store, runs: pd.DataFrame, min_acc: float = 0.5) -> pd.DataFrame:
    """Where the label first becomes linearly decodable: per run, the first layer whose pooled-stream label probe
    reaches `min_acc` accuracy with positive selectivity (probes table, `label_stream`); -1 = the embedded input.
    `solved_before`: the table was made by code without the probes' solver change (`reproduce.made_before`)."""
    from ..reproduce import SOLVER_CHANGE, made_before

    rows = []
    for r in tuples(runs):
        run = store.get(r.run_id)
        if "probes" not in run.tables():
            continue
        p = run.load_table("probes")
        p = p[(p["probe"] == "label_stream")].sort_values("layer")
        hit = p[(p["score"] >= min_acc) & (p["selectivity"] > 0)]
        rows.append({"setting": r.setting, "variant": r.variant, "task": r.task, "seed": r.seed,
                     "first_layer": int(hit["layer"].iloc[0]) if len(hit) else None,
                     "best_score": float(p["score"].max()) if len(p) else np.nan, "min_acc": min_acc,
                     "solved_before": any(c == SOLVER_CHANGE for _, c in made_before("probes", run))})
    return pd.DataFrame(rows, columns=["setting", "variant", "task", "seed", "first_layer", "best_score", "min_acc",
                                       "solved_before"])


def scheme_overview(store, runs: pd.DataFrame, setting: str = "paper") -> pd.DataFrame:
    """Every scheme run in one setting with no variant of its own (tier 1's nine and tier 3's other papers'
    schemes in the `paper` arch), one row per (scheme, task): seeds, mean test accuracy with lo-hi
    (`accuracy_ci`), what the runs can show, and the single-head deposits per seed (layer, head, drop)."""
    cols = ["scheme", "task", "n_seeds", "mean", "lo", "hi", "status", "deposit", "runs"]
    sub = runs[(runs.setting == setting) & (runs.variant == runs.scheme) & ~runs.partial]
    rows = []
    for (scheme, task), g in sorted(sub.groupby(["scheme", "task"]), key=lambda kv: (kv[0][0], TASKS.index(kv[0][1]))):
        mean, lo, hi, n = accuracy_ci(g.test_acc, _n_test(g))
        rows.append({"scheme": scheme, "task": task, "n_seeds": n, "mean": mean, "lo": lo, "hi": hi,
                     "status": _statuses(g),
                     "deposit": "; ".join(_deposit_heads(store, r.run_id, r.seed) for r in tuples(g)),
                     "runs": list(g.run_id)})
    return pd.DataFrame(rows, columns=cols)


def all_deposits(store, runs: pd.DataFrame) -> pd.DataFrame:
    """Every single-head deposit the spec's rule finds in `runs`, whatever claim reads them: one row per (preset,
    setting, variant, task, seed) with a deposit table, the deposits (layer, head, drop) and what the run can show.
    The preset is a column: the scale ladder's rungs are never mixed into one row."""
    cols = ["preset", "setting", "variant", "task", "seed", "status", "deposits", "run_id"]
    deps = _deposits(store, runs.run_id)
    rows = [{"preset": r.preset, "setting": r.setting, "variant": r.variant, "task": r.task, "seed": r.seed,
             "status": r.status, "deposits": _deposit_text(deps[r.run_id], r.seed).split(": ", 1)[1],
             "run_id": r.run_id} for r in tuples(runs) if r.run_id in deps]
    return pd.DataFrame(rows, columns=cols)
