"""The scale ladder: every claim at each rung (seed 42's reading, and every seed where a rung ran more), the rows
whose outcome changes across rungs (beyond-the-paper rows included), Table 1's cells per rung and which gaps a
rung explains (only after its runs pass the status checks), and `base_claims`, what COMPARISON.md shows."""
from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..common import tuples
from ..experiments import PAPER_TABLE1
from ..settings import SETTINGS
from .deposits import ROPE_SHALLOW
from .judge import claims
from .questions import ANSWER_OF, answer_of
from .rules import Thresholds, _runs
from .runs import TASKS, base_preset, is_study
from .registry import load_registry
from .study import share_tiers, study_table, tier2_readouts, tier_readouts


LADDER_QUESTIONS = (  # (question, kind, spec): "learns": a cell (setting, variant, task); "claim": a Table 1 order
    # claim (prefix, setting, its variants, task); "deposit": the RoPE shallow-deposit claim (its setting)
    ("Does the authors' MLA learn Task 1 with more epochs?", "learns", ("authors-mla", "mla", "trigger-distance")),
    ("Does RoPE fall behind NoPE on Task 2 with the paper's data?", "claim",
     ("NoPE beats RoPE on Task 2", "paper", ("rope", "nope"), "trigger-count")),
    ("Is RoPE's largest Task 1 deposit in a shallow layer at each scale (PE-Lab `paper` arch)?", "deposit", "paper"),
    ("Is RoPE's largest Task 1 deposit in a shallow layer at each scale (the authors' transformer script)?",
     "deposit", "authors"),
)


def _learns_answer(sub: pd.DataFrame) -> str:
    """Does the cell learn at a rung, from its runs' status (`run_status`): yes / no in every seed run (two or
    more), in some seeds only, or cannot tell (one seed; still learning when none learned yet); a yes names the runs
    that learned and are still rising (their accuracy is not final). A description of the seeds, not a share
    decision: the share's minimum (`Thresholds.min_seeds`) does not apply."""
    k, n = int(sub.learned.sum()), len(sub)
    if k == 0 and sub.still_learning.any():
        return ANSWER_OF["inconclusive (still learning)"]
    if n == 1:
        return ANSWER_OF["inconclusive (one seed)"] + f": seed {sub.seed.iloc[0]} {'did' if k else 'did not'} learn"
    rising = int((sub.learned.astype(bool) & sub.still_learning.astype(bool)).sum())
    still = "" if not rising else f" ({'all' if rising == k else rising} still learning at the last epoch)"
    return f"yes, in all {n} seeds{still}" if k == n else "no" if k == 0 else f"in some seeds only ({k} of {n}){still}"


def ladder_answers(store, runs: pd.DataFrame, rungs, th: Thresholds = Thresholds(),
                   every: pd.DataFrame | None = None) -> pd.DataFrame:
    """The questions the scale ladder was built for (LADDER_QUESTIONS), answered at each rung other than the base
    (`rungs[0]`) where their runs exist, on every seed run there and by the claims' rules (a share needs four
    counted runs: fewer say "cannot tell (fewer than 4 counted runs)"; whether a cell learns, on one seed, "cannot
    tell (one seed)"), with what the runs show: the "claim" and "deposit" questions read the rung's
    claim rows (`every`: `every_seed_claims`, computed from `store` when not given). One row per (question,
    rung): answer and evidence."""
    every = every_seed_claims(store, runs, rungs, th) if every is None else every
    rows = []
    for question, kind, spec in LADDER_QUESTIONS:
        for rung in rungs[1:]:
            at = runs[runs.preset == rung]
            if kind == "learns":
                sub = _runs(at, *spec).sort_values("seed")
                if sub.empty:
                    continue
                answer = _learns_answer(sub)
                ev = ", ".join(f"seed {r.seed} {100 * r.test_acc:.2f} % ({r.status})" for r in tuples(sub))
            else:
                prefix, setting, variants, task = (ROPE_SHALLOW, spec, ("rope",), "trigger-distance") \
                    if kind == "deposit" else spec
                if any(_runs(at, setting, v, task).empty for v in variants):
                    continue
                row = every[(every.rung == rung) & every.claim.str.startswith(prefix)
                            & (every.setting == setting)].iloc[0]
                answer, ev = answer_of(row["result"]), row["evidence"]
                study = load_registry().study
                if kind == "deposit" and (rung, setting) == (study["preset"], study["arch"]):
                    answer += " on the ladder's runs (the seed study below reads this rung on its registered runs)"
            rows.append({"question": question, "rung": rung, "answer": answer, "evidence": ev})
    return pd.DataFrame(rows, columns=["question", "rung", "answer", "evidence"])


def ladder(store, runs: pd.DataFrame, rungs, th: Thresholds = Thresholds(), seed: int = 42) -> pd.DataFrame:
    """Every claim row at each rung of a scale ladder (`rungs`: presets, the base first), from the runs of `seed`
    alone (the ladder trains seed 42 on every rung): one row per (claim, setting, rung) with the verdict and what
    the seeds show (`result`). Rows pending at a rung were not run there."""
    out = []
    for rung in rungs:
        sub = runs[(runs.preset == rung) & (runs.seed == seed)]
        if sub.empty:
            continue
        cl = claims(store, sub, replace(th, min_seeds=1))  # seed 42 alone per rung, by design
        out += [{"claim": r.claim, "setting": r.setting, "rung": rung, "verdict": r.verdict, "result": r.result,
                 "evidence": r.evidence} for r in tuples(cl)]
    return pd.DataFrame(out, columns=["claim", "setting", "rung", "verdict", "result", "evidence"])


EVERY_COLUMNS = ["rung", "claim", "setting", "verdict", "result", "evidence", "runs"]


def every_seed_claims(store, runs: pd.DataFrame, rungs, th: Thresholds = Thresholds()) -> pd.DataFrame:
    """Every claim row at each rung other than the base (`rungs[0]`), judged once on every seed run there by the
    default rules (a share needs four counted runs, an ordering three pairs): what `rung_claims` and
    `ladder_answers` read. One row per (rung, claim,
    setting)."""
    out = []
    for rung in rungs[1:]:
        sub = runs[runs.preset == rung]
        if not sub.empty:
            out += [{"rung": rung, **{c: getattr(r, c) for c in EVERY_COLUMNS[1:]}}
                    for r in tuples(claims(store, sub, th))]
    return pd.DataFrame(out, columns=EVERY_COLUMNS)


def rung_claims(store, runs: pd.DataFrame, rungs, th: Thresholds = Thresholds(), seed: int = 42,
                every: pd.DataFrame | None = None) -> pd.DataFrame:
    """The claim rows at each rung other than the base (`rungs[0]`) that rest on more seeds than `seed` alone
    (a rung where seed 42's verdict changed gets seeds 43 and 44), from `every` (`every_seed_claims`, computed
    from `store` when not given). One row per (rung, claim, setting) with the verdict and evidence."""
    every = every_seed_claims(store, runs, rungs, th) if every is None else every
    by_id = dict(zip(runs.run_id, runs.seed))
    keep = [r.verdict != "pending" and any(by_id.get(x, seed) != seed for x in r.runs) for r in tuples(every)]
    return every.loc[np.array(keep, dtype=bool), ["rung", "claim", "setting", "verdict", "evidence"]].reset_index(
        drop=True)


ONE_SEED = {"reproduced": "agrees with the paper", "not reproduced": "does not agree with the paper",
            "mixed": "mixed"}  # a test verdict read from one seed: what it shows, never "reproduced" (min_seeds)


def seed_verdict(verdict: str, seed: int = 42) -> str:
    """A ladder verdict read from one seed, said as one: "seed 42 agrees with the paper" for *reproduced* (one seed
    cannot reproduce a claim: `Thresholds.min_seeds`); outcomes that are not tests (inconclusive, beyond the paper,
    not testable) unchanged."""
    return f"seed {seed} {ONE_SEED[verdict]}" if verdict in ONE_SEED else verdict


def holds_across_scale(cl: pd.DataFrame, lad: pd.DataFrame, base: str, seeded: pd.DataFrame | None = None,
                       seed: int = 42) -> pd.Series:
    """Per row of `cl`: "unchanged at every rung run (r1, r2): seed 42 agrees with the paper" when each other
    rung's seed-42 verdict equals the base rung's seed-42 verdict (named, so that a verdict that stays "does not
    agree" or "inconclusive" is not read as the claim holding), "changes at r: v0 -> v1" where one differs (each
    side said as one seed's, `seed_verdict`), "not run at other rungs yet" otherwise. Where `seeded` (`rung_claims`) judges the row at that
    rung on more seeds, their verdict follows: "; on every seed run there: reproduced"."""
    on_all = {} if seeded is None else {(r.rung, r.claim, r.setting): r.verdict for r in tuples(seeded)}
    out = []
    for r in tuples(cl):
        rows = lad[(lad.claim == r.claim) & (lad.setting == r.setting)]
        b = rows[rows.rung == base]
        others = rows[(rows.rung != base) & (rows.verdict != "pending")]
        if b.empty or others.empty:
            out.append("not run at other rungs yet")
            continue
        col = "result" if "result" in rows else "verdict"  # what the seed shows: a "beyond the paper" row too
        v0 = b[col].iloc[0]
        changed = [f"changes at {o.rung}: {seed_verdict(v0, seed)} -> {seed_verdict(getattr(o, col), seed)}"
                   + (f"; on every seed run there: {on_all[(o.rung, r.claim, r.setting)]}"
                      if (o.rung, r.claim, r.setting) in on_all else "")
                   for o in tuples(others) if getattr(o, col) != v0]
        out.append("; ".join(changed) if changed else
                   f"unchanged at every rung run ({', '.join(others.rung)}): {seed_verdict(v0, seed)}")
    return pd.Series(out, index=cl.index, dtype=object)


def ladder_rungs(base: str, ladder_presets) -> tuple[str, ...]:
    """The scale ladder's rungs compared with `base`: the base first, then the other presets of the ladder."""
    return (base,) + tuple(p for p in ladder_presets if p != base)


class BaseClaims(NamedTuple):
    """What COMPARISON.md, the README block and the Findings page show (`base_claims`)."""
    runs_all: pd.DataFrame  # every run the claims were judged from (`run_table`: read once)
    base: str  # the base preset (`base_preset`)
    runs: pd.DataFrame  # its runs
    claims: pd.DataFrame  # its claims, with the `holds_across_scale` column
    ladder: pd.DataFrame  # the claim rows of seed 42 at each rung (`ladder`)
    rungs: tuple  # the base first, then the ladder's other presets
    seeded: pd.DataFrame  # the claims at rungs run with more seeds, on all of them (`rung_claims`)
    answers: pd.DataFrame  # the ladder's questions at each rung (`ladder_answers`)
    study: pd.DataFrame  # the registered seed study, one row per run (`study_table`), judged apart from the rest
    tier2: pd.DataFrame  # its tier 2's ordering readout per group (`tier2_readouts`)
    tiers: dict  # its share tiers' readouts per scheme and group, by tier (`tier_readouts`: tiers 3 and 4)
    every: pd.DataFrame  # every claim row at the other rungs on every seed run there (`every_seed_claims`)


def base_claims(store, runs_all: pd.DataFrame, ladder_presets, th: Thresholds = Thresholds()) -> BaseClaims:
    """The base preset's claims and the scale ladder around them (BaseClaims), each rung's claims judged once on
    every seed (`every_seed_claims`) and read by `rung_claims` and `ladder_answers`; the seed study's table and its
    tier 2's and the share tiers' readouts beside."""
    pre = runs_all[~is_study(runs_all)]  # the seed study's runs are judged by the study alone, never pooled
    base = base_preset(pre if len(pre) else runs_all)
    runs = pre[pre.preset == base]
    rungs = ladder_rungs(base, ladder_presets)
    cl = claims(store, runs, th)
    lad = ladder(store, pre, rungs, th)
    every = every_seed_claims(store, pre, rungs, th)
    seeded = rung_claims(store, pre, rungs, th, every=every)
    cl["holds_across_scale"] = holds_across_scale(cl, lad, base, seeded) if len(cl) else pd.Series(dtype=object)
    return BaseClaims(runs_all, base, runs, cl, lad, rungs, seeded, ladder_answers(store, pre, rungs, th, every=every),
                      study_table(store, runs_all), tier2_readouts(runs_all),
                      {t: tier_readouts(runs_all, t) for t in share_tiers()}, every)


def ladder_table1(runs: pd.DataFrame, rungs, seed: int = 42) -> pd.DataFrame:
    """Table 1's cells (setting, scheme, task) at each rung, seed `seed`: test accuracy and status per rung beside
    the paper's number; only cells run at a rung other than the base."""
    rows = []
    for setting in SETTINGS:
        for scheme in ("mla", "rope", "nope", "alibi"):
            for task in TASKS:
                cell = runs[(runs.setting == setting) & (runs.variant == scheme) & (runs.task == task)
                            & (runs.seed == seed)]
                by = {r.preset: r for r in tuples(cell)}
                if not any(k in by for k in rungs[1:]):
                    continue
                row = {"setting": setting, "scheme": scheme, "task": task,
                       "paper": PAPER_TABLE1.get((scheme, task), np.nan)}
                for rung in rungs:
                    row[rung] = by[rung].test_acc if rung in by else np.nan
                    row[f"{rung} status"] = by[rung].status if rung in by else ""
                rows.append(row)
    return pd.DataFrame(rows)


PASSES_STATUS = ("learned", "ceiling")  # run_status's statuses of a run that learned and settled


def status_settled(status: str) -> bool:
    """Whether a run_status `status` is of a settled run (did not learn, or learned and settled; diverged too)."""
    return str(status) in ("learned", "ceiling", "did not learn", "diverged")


GAP_CLOSER = 0.05  # a rung "explains" a gap to the paper when it brings the cell this much closer (5 points)


def ladder_gaps(t: pd.DataFrame, rungs) -> pd.DataFrame:
    """Per Table-1 cell and rung other than the base (`t`: `ladder_table1`): does the rung explain the cell's gap
    to the paper? `no gap` when the base is already within GAP_CLOSER of the paper (nothing to explain);
    the status checks first (registered `[decision.ladder]`): `explains` when |base - paper| - |acc - paper| >=
    GAP_CLOSER and the run at the rung learned and settled, `cannot tell yet` when it is closer but its run did
    not pass them, or not closer and its run did not settle; `does not explain` otherwise. Columns: setting, scheme,
    task, rung, base, acc, paper, status, closer, gap."""
    cols = ["setting", "scheme", "task", "rung", "base", "acc", "paper", "status", "closer", "gap"]
    out = []
    for d in t.to_dict("records"):
        base, paper = d[rungs[0]], d["paper"]
        for rung in rungs[1:]:
            acc = d.get(rung, np.nan)
            if not (np.isfinite(acc) and np.isfinite(base) and np.isfinite(paper)):
                continue
            closer = abs(base - paper) - abs(acc - paper)
            status = d[rung + " status"]
            passes = str(status) in PASSES_STATUS  # learned and settled (registered: status checks come first)
            gap = ("no gap" if abs(base - paper) < GAP_CLOSER else
                   ("explains" if passes else "cannot tell yet") if closer >= GAP_CLOSER else
                   "cannot tell yet" if not status_settled(status) else "does not explain")
            out.append({"setting": d["setting"], "scheme": d["scheme"], "task": d["task"], "rung": rung,
                        "base": base, "acc": acc, "paper": paper, "status": status, "closer": closer, "gap": gap})
    return pd.DataFrame(out, columns=cols)


def rung_seed_cells(runs: pd.DataFrame, rungs) -> pd.DataFrame:
    """The runs of each (rung, setting, variant, task) cell run with more than one seed at a rung other than the
    base (where seed 42's verdict changed): rung, setting, variant, task, seed, test_acc, status, run_id. The seed
    study's runs are left out, as the rung's claims leave them out (`base_claims`): the study reads them itself."""
    cols = ["rung", "setting", "variant", "task", "seed", "test_acc", "status", "run_id"]
    sub = runs[runs.preset.isin(rungs[1:]) & ~is_study(runs)]
    if sub.empty:
        return pd.DataFrame(columns=cols)
    n = sub.groupby(["preset", "setting", "variant", "task"]).seed.transform("nunique")
    return (sub[n > 1].rename(columns={"preset": "rung"})[cols]
            .sort_values(["rung", "setting", "variant", "task", "seed"]).reset_index(drop=True))
