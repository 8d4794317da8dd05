"""The registered decisions every family of claims uses (registry `[deposit]`, `[decision.*]`): the thresholds, the
share rule (the Wilson interval of the agreeing share against 1/2), both thresholds and threshold-sensitivity,
specificity against the contrast scheme, which runs count (learned and settled), the outcomes, and the helpers
that read a run's stored tables."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..common import exact, tuples
from .registry import load_registry
from .status import StatusRules, wilson
from .runs import DEFAULT_DATA_SEED


def _registered(section: str, key: str, i: int | None = None):
    v = getattr(load_registry(), section)[key]
    return v[i] if i is not None else v


@dataclass(frozen=True)
class Thresholds:
    """The numbers a verdict depends on: the registration's (registry.toml; docs/preregistration.md)."""

    indispensable: float = field(default_factory=lambda: _registered("deposit", "thresholds", 0))  # deciding
    also: float = field(default_factory=lambda: _registered("deposit", "thresholds", 1))  # shown beside it
    overfit_gap: float = 0.05     # train - test accuracy at the end of training that counts as overfitting
    shallow_layer: int = 0        # the paper's "first layer": layer 0 decides (registered)
    shallow_second: int = 1       # layer <= 1: shown as a second reading, never deciding
    min_runs: int = field(default_factory=lambda: int(_registered("decision", "share")["min_runs"]))
    min_pairs: int = field(default_factory=lambda: int(_registered("decision", "ordering")["min_pairs"]))
    # fewer counted runs: inconclusive (too few seeds) (registered `[decision.share]` min_counted, version 3: the
    # fewest runs whose Wilson interval can lie off 1/2); 1: the scale ladder's reading of one seed (`ladder`):
    # what that seed shows
    min_seeds: int = field(default_factory=lambda: int(_registered("decision", "share")["min_counted"]))


def _runs(runs: pd.DataFrame, setting: str, variant: str, task: str) -> pd.DataFrame:
    return runs[(runs.setting == setting) & (runs.variant == variant) & (runs.task == task)]


def _stored(store, run_ids, table: str) -> dict[str, pd.DataFrame]:
    """run id -> its stored `table`; runs without one are left out."""
    runs = (store.get(rid) for rid in run_ids)
    return {run.id: run.load_table(table) for run in runs if table in run.tables()}


def _deposits(store, run_ids) -> dict[str, pd.DataFrame]:
    """run id -> the accuracy rows of its stored deposit table."""
    return {rid: dep[dep["metric"] == "accuracy"] for rid, dep in _stored(store, run_ids, "deposit").items()}


def _waiting(sub: pd.DataFrame, have, table: str) -> str:
    """The evidence's note on finished runs of `sub` whose `table` is not computed yet ("" when none)."""
    seeds = [str(r.seed) for r in tuples(sub) if r.run_id not in have]
    return f"; seed {', '.join(seeds)}: trained, {table} not computed yet" if seeds else ""


def _made_before(store, sub: pd.DataFrame, have, table: str) -> str:
    """The evidence's note on runs of `sub` whose stored `table` was made before its analysis, or that of a table
    it joins, changed its numbers (`reproduce.made_before`): their numbers may move when it is re-made ("" when
    none)."""
    from ..reproduce import made_before

    old = {r.seed: made_before(table, store.get(r.run_id)) for r in tuples(sub) if r.run_id in have}
    old = {seed: changes for seed, changes in old.items() if changes}
    commits = sorted({c.commit for changes in old.values() for _, c in changes})
    return (f"; seed {', '.join(map(str, old))}: {table} made before {', '.join(commits)} changed the numbers it "
            "reads (reproduce.CHANGES; `workbench verify --refresh` re-makes it)") if old else ""


def _learned(sub: pd.DataFrame) -> pd.DataFrame:
    """The runs of `sub` that learned the task, settled or still learning (their evidence is shown either way)."""
    return sub[sub.learned.astype(bool)]


def _is_settled(sub: pd.DataFrame) -> pd.Series:
    """run_status's `settled` (the registered window rule); a hand-made table without it: not still learning."""
    if "settled" in sub:
        return sub["settled"].astype(bool)
    return ~sub.still_learning.astype(bool)


def _settled(sub: pd.DataFrame) -> pd.DataFrame:
    """The runs of `sub` that COUNT for a claim about how a working model computes (deposits, heads): they learned
    the task and settled (run_status, registered: < 1 point over the last half of training), and did not diverge.
    The ceiling does not exempt a run: a ceiling run that rose in its last half may still be forming its
    mechanism (the authors' MLA grew an indispensable head at repro-long)."""
    return sub[sub.learned.astype(bool) & _is_settled(sub)]


def _unshown(sub: pd.DataFrame) -> str:
    """The outcome of a mechanism claim none of whose runs is `_settled`: still learning if one learned."""
    return "inconclusive (still learning)" if sub.learned.astype(bool).any() else "inconclusive (did not learn)"


def _uncounted_notes(sub: pd.DataFrame, shows: dict[str, str] | None = None,
                     label: Callable[[Any], str] = lambda r: "") -> list[str]:
    """What each run of `sub` that a mechanism claim does not count is: did not learn, or still learning (with what
    it shows, `shows[run_id]`, where the claim computed it); each note starts with `label(run row)`."""
    shows = shows or {}
    return [f"{label(r)}seed {r.seed}: {r.status} ({r.why})" if not r.learned else
            f"{label(r)}seed {r.seed}: not settled ({r.why}), not counted"
            + (f": {shows[r.run_id]}" if r.run_id in shows else "")
            for r in tuples(sub) if not (r.learned and _row_settled(r))]


def _row_settled(r) -> bool:
    return bool(getattr(r, "settled", not getattr(r, "still_learning", False)))


# The outcomes of a claim row. Only the first three test the paper; the others say why the runs cannot.
TESTS = ("reproduced", "mixed", "not reproduced")
# A comparison the runs cannot rank: both sides at the ceiling, or their difference within the seeds' spread.
UNRANKED = ("inconclusive (ceiling)", "inconclusive (within seed spread)")


FEW_SEEDS = "inconclusive (too few seeds)"  # a share on fewer counted runs than can decide it (version 3)
ONE_SEED_CELL = "inconclusive (one seed)"  # a ladder or Findings cell that rests on seed 42 alone (no share rule)
NOT_SPECIFIC = "inconclusive (not specific)"
UNSHOWN_SPECIFIC = "inconclusive (specificity not shown)"
OUTCOMES = TESTS + ("inconclusive (did not learn)", *UNRANKED, "inconclusive (still learning)",
                    FEW_SEEDS, ONE_SEED_CELL, NOT_SPECIFIC, UNSHOWN_SPECIFIC, "inconclusive (few pairs)",
                    "not testable at this preset", "beyond the paper", "pending")


OUTCOME_RULES = {
    "reproduced": "a claim read run by run: the Wilson 95 % interval of the share of counted runs that agree lies "
                  "above 1/2; an ordering: the Student-t 95 % interval of the mean paired difference lies above 0 "
                  "(the registered rules, docs/preregistration.md)",
    "mixed": "the Wilson 95 % interval of the share of agreeing runs (on 4 or more counted runs) contains 1/2: the "
             "runs cannot say which way it goes (a share on fewer than 10 counted runs is marked \"(few runs)\")",
    "not reproduced": "the interval lies below 1/2 (an ordering: below 0), at this preset: not a refutation of the "
                      "paper (its setup differs, see the disclaimer)",
    "inconclusive (did not learn)": "a run the claim needs did not learn the task (the Wilson lower bound of its test "
                                    "accuracy below the reference + 0.20 x the room above it) or diverged: nothing "
                                    "to show",
    "inconclusive (ceiling)": "both sides of a comparison are at >= 98 % in every seed: they cannot be ranked",
    "inconclusive (within seed spread)": "the t interval of the mean paired difference contains 0 (the ladder's one "
                                         "seed: the difference is within twice its binomial standard error)",
    "inconclusive (still learning)": "a run the comparison needs is not settled (its test accuracy moved >= 1 point "
                                     "over the last half of training) and below the ceiling; for a claim about "
                                     "deposits or heads, no run that learned has settled (a ceiling run that rose "
                                     "late counts as not settled): its mechanism may still move",
    FEW_SEEDS: "fewer than 4 counted runs can show the claim (the others are not run yet or cannot show it: did not "
               "learn, diverged, still learning, or at the ceiling where the claim needs room below it): on 3 or "
               "fewer the Wilson interval contains 1/2 whatever they show (3 of 3 agreeing: [0.44, 1.00]), so the "
               "share cannot decide (registered, version 3); the evidence says what they show",
    ONE_SEED_CELL: "a cell of the scale ladder or the Findings page that rests on seed 42 alone: what that seed "
                   "shows, not a verdict",
    NOT_SPECIFIC: "the share would read reproduced, but the scheme the paper contrasts the claim with passes the "
                  "same rule: the rule cannot tell the claimed pattern from the contrasted one",
    UNSHOWN_SPECIFIC: "the share would read reproduced, but the same rule is not shown to fail on the scheme the "
                      "paper contrasts the claim with (its share is mixed, rests on too few runs, or it has no "
                      "counted run): the rule may pass the contrasted pattern too (registered, version 3)",
    "inconclusive (few pairs)": "an ordering with fewer than 3 paired runs (same training and data seed): no "
                                "interval to decide it",
    "not testable at this preset": "the claim needs what the preset does not have (training long enough to "
                                   "overfit; an optimiser not tuned on one scheme; a control the preset lacks)",
    "beyond the paper": "PE-Lab's own question (another task, method or setting than the paper's claim): shown, not "
                        "counted as a test of the paper",
    "pending": "its runs are not finished yet",
}


def verdict_summary(cl: pd.DataFrame) -> str:
    """'of 35 claim rows (6 of them PE-Lab's own questions), 20 test the paper at this preset: 8 reproduced, ...; the
    other 15: ...'. PE-Lab's own rows are those that read no registered claim (`claim_id` empty)."""
    counts = cl.verdict.value_counts()
    tested = int(sum(counts.get(v, 0) for v in TESTS))
    rest = [f"{int(counts.get(v, 0))} {v}" for v in OUTCOMES[len(TESTS):] if counts.get(v, 0)]
    own = int((cl["claim_id"].fillna("") == "").sum()) if "claim_id" in cl else 0
    return (f"of {len(cl)} claim rows" + (f" ({own} of them PE-Lab's own questions)" if own else "")
            + f", {tested} test the paper at this preset: "
            + ", ".join(f"{int(counts.get(v, 0))} {v}" for v in TESTS)
            + (f"; the other {len(cl) - tested}: " + ", ".join(rest) if rest else ""))


def share(agree: list[bool], th: Thresholds | None = None) -> dict[str, Any]:
    """The registered share decision (`[decision.share]`): k of the n counted runs agree; the Wilson 95 % interval
    of k / n against 1/2 decides: reproduced (it lies above), not reproduced (below), mixed (it contains 1/2);
    n = 0: pending; 0 < n < `th.min_seeds` (registered min_counted, 4: on fewer the interval contains 1/2 whatever
    they show): inconclusive (too few seeds). `few`: n < min_runs, shown "(few runs)". {verdict, k, n, lo, hi, few,
    text}."""
    th = th or Thresholds()
    against = float(load_registry().decision["share"]["against"])
    k, n = int(sum(bool(a) for a in agree)), len(agree)
    if n == 0:
        return {"verdict": "pending", "k": 0, "n": 0, "lo": np.nan, "hi": np.nan, "few": True, "text": "no run"}
    lo, hi = wilson(k / n, n)
    verdict = (FEW_SEEDS if n < th.min_seeds else "reproduced" if lo > against
               else "not reproduced" if hi < against else "mixed")
    few = n < th.min_runs
    return {"verdict": verdict, "k": k, "n": n, "lo": lo, "hi": hi, "few": few,
            "text": f"{k} of {n} counted runs agree, Wilson 95 % [{lo:.2f}, {hi:.2f}]" + (" (few runs)" if few else "")}


def _verdict(agree: list[bool], th: Thresholds) -> str:
    """The share decision's verdict (`share`); none: pending. `th.min_seeds` 1 is the ladder's reading of one seed:
    reproduced / mixed / not reproduced as every / some / no run agrees (what that seed shows, said as one
    seed's by `seed_verdict`, never a verdict)."""
    if not agree:
        return "pending"
    if th.min_seeds <= 1:
        return "reproduced" if all(agree) else ("mixed" if any(agree) else "not reproduced")
    return share(agree, th)["verdict"]


def _two_thresholds(agree: list[bool], agree_also: list[bool], th: Thresholds) -> dict[str, Any]:
    """The verdict at the deciding threshold and at the second one (registered: 0.05 and 0.10), and whether they
    differ ("threshold-sensitive"): {verdict, verdict_also, threshold_sensitive, text}."""
    v, v2 = _verdict(agree, th), _verdict(agree_also, th)
    s5, s10 = share(agree, th), share(agree_also, th)
    text = (f"at {th.indispensable:g}: {s5['text']}; at {th.also:g}: {s10['text']} ({v2})"
            + ("; threshold-sensitive" if v != v2 else "")) if agree else ""
    return {"verdict": v, "verdict_also": v2, "threshold_sensitive": bool(agree) and v != v2, "text": text,
            "few": bool(agree) and s5["few"]}


def _two_extra(two: dict[str, Any]) -> dict[str, Any]:
    """The row fields of `_two_thresholds`: verdict_also, threshold_sensitive, few_runs."""
    return {"verdict_also": two["verdict_also"], "threshold_sensitive": two["threshold_sensitive"],
            "few_runs": two["few"]}


def _at(dep: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """A deposit table judged at another threshold: a single-head deposit at `threshold` is one at the spec's 0.05
    whose drop is also >= `threshold` (the ratio and interval conditions do not depend on it)."""
    if threshold <= 0.05 + 1e-12:
        return dep
    d = dep.copy()
    d["single_head_deposit"] = d["single_head_deposit"].astype(bool) & (exact(d["top_delta"]) >= threshold)
    return d


def specificity(contrast_agree: list[bool], th: Thresholds, name: str) -> tuple[str, str]:
    """The registered specificity check: the claim's rule applied to the runs of the scheme the paper contrasts it
    with. (label, text): "not specific" when the contrast passes the same rule (its share decision reproduced),
    "specific" when it fails (not reproduced), "specificity not shown" when its share is mixed or rests on too
    few runs, "no counted contrast run" when none counts. The contrast is read as the claim is (`_verdict`); in the
    ladder's reading of one seed (`th.min_seeds` 1, what the seed shows, never a verdict) a contrast that neither
    passes nor fails is "contrast not read", which blocks nothing (`specific_or_not`)."""
    unread = "contrast not read" if th.min_seeds <= 1 else None
    if not contrast_agree:
        return unread or "no counted contrast run", f"contrast {name}: no counted run"
    sh = share(contrast_agree, th)
    label = {"reproduced": "not specific", "not reproduced": "specific"}.get(_verdict(contrast_agree, th),
                                                                            unread or "specificity not shown")
    return label, f"contrast {name}: {sh['text']} ({label})"


def _single_layers(dep: pd.DataFrame) -> list[int]:
    return sorted(int(l) for l in dep.loc[dep["single_head_deposit"], "layer"])


def _dep_shows(dep: pd.DataFrame) -> str:
    """'single-head deposit L1.H6 0.54 [0.51, 0.57], ...' or 'no single-head deposit (average deposit at ...)'."""
    s = dep[dep["single_head_deposit"]]
    if len(s):
        return "single-head deposit " + ", ".join(
            f"L{int(r.layer)}.H{int(r.top_head)} {r.top_delta:.2f} [{r.top_lo:.2f}, {r.top_hi:.2f}]"
            for r in tuples(s))
    a = dep[dep["average_deposit"]]
    return "no single-head deposit" + (
        f" (average deposit at layer {', '.join(str(int(l)) for l in a['layer'])})" if len(a) else "")


ROW_COLUMNS = ["claim", "paper_says", "setting", "verdict", "evidence", "runs", "result", "claim_id", "verdict_also",
               "threshold_sensitive", "specificity", "rests_on", "few_runs"]


def specific_or_not(verdict: str, label: str) -> str:
    """`verdict` under its contrast's specificity `label` (`specificity`; "" where no contrast is registered): a
    reproduced stands only where the contrast fails the same rule ("specific"); one whose contrast passes it ("not
    specific") reads NOT_SPECIFIC (registered `[decision.share]` version 2), one whose contrast is mixed, too few
    or absent reads UNSHOWN_SPECIFIC (version 3); any other verdict, and the ladder's one seed whose contrast is
    "contrast not read", is unchanged."""
    if verdict != "reproduced" or label not in ("not specific", "specificity not shown", "no counted contrast run"):
        return verdict
    return NOT_SPECIFIC if label == "not specific" else UNSHOWN_SPECIFIC


def _row(claim: str, paper: str, setting: str, verdict: str, evidence: str, run_ids,
         result: str | None = None, **extra) -> dict[str, Any]:
    """One claim row; `result`: what the seeds show (reproduced / mixed / not reproduced, or why they cannot: too few
    seeds, ...) where `verdict` says the row is not a test of the paper (beyond the paper), else the verdict itself.
    `extra`: claim_id (the registered claim it reads, "" for PE-Lab's own rows), verdict_also (at the second
    threshold), threshold_sensitive, specificity and rests_on (training x data seeds). A "reproduced" verdict or
    result reads as `specific_or_not` says: it stands only where its contrast fails the same rule (registered
    `[decision.share]` versions 2, 3). The specificity is judged at the deciding threshold, so the verdict at the
    second one (`verdict_also`) is left as its share reads it."""
    label = extra.get("specificity", "")
    if label:
        extra = {**extra, "verdict_also": extra.get("verdict_also", verdict)}
        verdict, result = (specific_or_not(v, label) for v in (verdict, result or verdict))
    return {"claim": claim, "paper_says": paper, "setting": setting, "verdict": verdict, "evidence": evidence,
            "runs": list(run_ids), "result": result or verdict, "claim_id": extra.get("claim_id", ""),
            "verdict_also": extra.get("verdict_also", verdict),
            "threshold_sensitive": bool(extra.get("threshold_sensitive", False)),
            "specificity": extra.get("specificity", ""), "rests_on": extra.get("rests_on", ""),
            "few_runs": bool(extra.get("few_runs", False))}


def largest_deposit(dep: pd.DataFrame) -> pd.Series | None:
    """The deposit-table row (layer, top_head, top_delta) of the run's largest single-head deposit (the largest
    zero-ablation drop among the layers with one), or None when it has none."""
    s = dep[dep["single_head_deposit"].astype(bool)]
    return s.loc[s["top_delta"].idxmax()] if len(s) else None


def _largest(dep: pd.DataFrame) -> tuple[int | None, str]:
    """(layer, "Ll.Hh drop") of the largest single-head deposit, or (None, "none")."""
    r = largest_deposit(dep)
    if r is None:
        return None, "none"
    return int(r.layer), f"L{int(r.layer)}.H{int(r.top_head)} {r.top_delta:.2f}"


def _contrast_runs(runs, setting, variant, task) -> pd.DataFrame:
    """The contrast scheme's runs: of the same setting where it has any, else of the `paper` arch."""
    sub = _runs(runs, setting, variant, task)
    return sub if len(sub) else _runs(runs, "paper", variant, task)


def _deposit_agreement(store, sub: pd.DataFrame, th: Thresholds, agrees) -> list[tuple[Any, bool, bool]]:
    """(run row, agrees at the deciding threshold, agrees at the second) for each counted run of `sub` with a
    deposit table; `agrees(deposit table judged at a threshold)`."""
    good = _settled(sub)
    deps = _deposits(store, good["run_id"])
    return [(r, bool(agrees(_at(deps[r.run_id], th.indispensable))), bool(agrees(_at(deps[r.run_id], th.also))))
            for r in tuples(good) if r.run_id in deps]


def _seed_label(r) -> str:
    """'42' for a run on the default data seed, '45 (data 43)' for one on another draw of the dataset."""
    ds = getattr(r, "data_seed", DEFAULT_DATA_SEED)
    return f"{r.seed}" if ds in (DEFAULT_DATA_SEED, None) or pd.isna(ds) else f"{r.seed} (data {int(ds)})"


def largest_layer(dep: pd.DataFrame) -> int | None:
    """The layer of the run's largest single-head deposit (None: no single-head deposit)."""
    return _largest(dep)[0]


def thresholds_table(th: Thresholds = Thresholds(), rules: StatusRules = StatusRules()) -> pd.DataFrame:
    """The claims' thresholds and the run rules (run_status) they rest on, one row each."""
    return pd.DataFrame([{"threshold": k, "value": str(v)} for k, v in asdict(th).items()]
                        + [{"threshold": f"run: {k}", "value": str(v)} for k, v in asdict(rules).items()])


def _deposit_heads(store, run_id: str, seed: int) -> str:
    """'seed 42: L1.H6 0.54, L5.H13 0.08' (the single-head deposits), 'seed 42: none', or 'seed 42: not
    computed yet' (no deposit table)."""
    return _deposit_text(_deposits(store, [run_id]).get(run_id), seed)


def _deposit_text(dep: pd.DataFrame | None, seed: int) -> str:
    """`_deposit_heads` of an already loaded deposit table (None: not computed yet)."""
    if dep is None:
        return f"seed {seed}: not computed yet"
    s = dep[dep["single_head_deposit"]]
    return f"seed {seed}: " + (", ".join(f"L{int(r.layer)}.H{int(r.top_head)} {r.top_delta:.2f}"
                                         for r in tuples(s)) or "none")


def json_value(v: Any) -> str:
    """A config value as it reads in config.json (true/false/null, compact lists)."""
    import json

    return json.dumps(v, separators=(",", ":"))
