"""The registered seed study (`[study]`, grids/study.toml): its runs, tidy, and its readouts, with the runs trained
before the registration beside them, never pooled."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..common import exact, scheme_label, task_label, tuples
from .registry import load_registry
from .mla import largest_drop
from .orderings import no_generalise_counted, paired, _no_generalise_claim, _order_verdict
from .rules import (TESTS, Thresholds, largest_deposit, share, specific_or_not, specificity, _at, _deposits,
                    _settled, _stored)
from .runs import DEFAULT_DATA_SEED, is_study, seeds_text


STUDY_COLUMNS = ["group", "scheme", "train_seed", "data_seed", "status", "counted", "layer_005", "head_005",
                 "drop_005", "layer_010", "head_010", "drop_010", "largest_drop", "largest_drop_layer",
                 "largest_drop_head", "has_deposit", "has_ablation", "test_acc", "run_id"]


#: Each study scheme's deciding readout (`study_readouts`), named so in the readouts table and the study map's panels.
DECIDING = {"rope": "largest deposit in layer 0", "mla": "largest drop of any head < threshold"}
NEVER_DECIDING = "shown, never deciding"  # a readout's decision where its reading is registered as never deciding


def planned_runs(all_schemes: bool = False, tier: int = 1) -> int:
    """The registered study's runs a scheme, training seeds x data seeds (tier `tier` of grids/study.toml); with
    `all_schemes`, of all its schemes."""
    st = _tier(tier)
    return len(st["train_seeds"]) * len(st["data_seeds"]) * (len(st["schemes"]) if all_schemes else 1)


def study_runs(runs: pd.DataFrame, tier: int = 1) -> pd.DataFrame:
    """The runs the registered seed study reads (tier 1: `[study]`; tier N: `[study.tierN]`): its preset, the
    `paper` arch, its task and schemes (full, not partial), with a `group` column: "study" for its registered
    training x data seeds, "ladder seeds" for the scale ladder's runs at the study's preset (seeds 42-44, data
    seed 42, all trained before the registration; tier 2's seed 43 re-created bit for bit on 2026-11-27 to add its
    tables); shown beside, never pooled into the study's decision)."""
    st = _tier(tier)
    sub = runs[(runs.preset == st["preset"]) & (runs.setting == st["arch"]) & (runs.task == st["task"])
               & runs.variant.isin(st["schemes"]) & (runs.variant == runs.scheme) & ~runs.partial.astype(bool)]
    ds = sub["data_seed"] if "data_seed" in sub else pd.Series(DEFAULT_DATA_SEED, index=sub.index)
    study = sub.seed.isin(st["train_seeds"]) & ds.isin(st["data_seeds"])
    return sub.assign(group=np.where(study, "study", "ladder seeds"))[study | ~is_study(sub)]


def registered_tiers() -> list[int]:
    """The study's registered tiers, in order: 1 (`[study]`) and each `[study.tierN]`."""
    return list(load_registry().tiers)


def _tier(tier: int) -> dict:
    """The registration of the study's tier `tier` (1: `[study]`, N: `[study.tierN]`)."""
    tiers = load_registry().tiers
    if tier not in tiers:
        raise ValueError(f"the seed study has tiers {list(tiers)}, not {tier!r}")
    return tiers[tier]


def study_table(store, runs: pd.DataFrame) -> pd.DataFrame:
    """The seed study, tidy: one row per run of `study_runs` with its group, scheme, training and data seed, what
    it can show (status; counted = learned and settled, the registered rule), its largest single-head deposit at
    each registered threshold (layer, head, drop; NaN: none) and the largest zero-ablation drop of any head (its
    layer and head), from the run's deposit and ablation tables (lean ships carry both; `has_deposit`,
    `has_ablation` say whether it has them: a run without is not read)."""
    sub = study_runs(runs)
    th = Thresholds()
    deps = _deposits(store, sub.run_id)
    abl = _stored(store, sub.run_id, "ablation")
    counted = set(_settled(sub).run_id)
    rows = []
    for r in tuples(sub):
        row = {"group": r.group, "scheme": r.scheme, "train_seed": int(r.seed),
               "data_seed": int(getattr(r, "data_seed", DEFAULT_DATA_SEED)), "status": r.status,
               "counted": r.run_id in counted, "test_acc": r.test_acc, "run_id": r.run_id}
        for t, tag in ((th.indispensable, "005"), (th.also, "010")):
            top = largest_deposit(_at(deps[r.run_id], t)) if r.run_id in deps else None
            row[f"layer_{tag}"] = int(top.layer) if top is not None else np.nan
            row[f"head_{tag}"] = int(top.top_head) if top is not None else np.nan
            row[f"drop_{tag}"] = float(top.top_delta) if top is not None else np.nan
        top = largest_drop(abl[r.run_id]) if r.run_id in abl else None
        row["largest_drop"] = float(top.delta) if top is not None else np.nan
        row["largest_drop_layer"] = int(top.layer) if top is not None else np.nan
        row["largest_drop_head"] = int(top["head"]) if top is not None else np.nan
        row["has_deposit"], row["has_ablation"] = r.run_id in deps, r.run_id in abl
        rows.append(row)
    out = pd.DataFrame(rows, columns=STUDY_COLUMNS)
    return out.sort_values(["group", "scheme", "data_seed", "train_seed"], ascending=[False, False, True, True],
                           ignore_index=True)


def _decided(s: dict, interim: str) -> str:
    """A share decision with its marks: "(few runs)" under the registered minimum, and the interim note."""
    marks = (["few runs"] * bool(s["few"] and s["n"] and s["verdict"] in TESTS)
             + [interim] * bool(interim and s["n"]))
    return s["verdict"] + (f" ({'; '.join(marks)})" if marks else "")


def study_readouts(st: pd.DataFrame) -> pd.DataFrame:
    """The study's registered readouts per (group, scheme), from `study_table`: counted runs (with the table the
    readout reads) of how many; for RoPE the share with the largest deposit in layer 0 (deciding) and in layer
    <= 1, each with its Wilson interval and the share decision, at 0.05 (and 0.10 beside); for MLA the largest
    drop's distribution and the share below 0.05 and below 0.10. The two groups are never pooled. A study decision
    taken before all its registered runs (training x data seeds) are shipped says "interim: k of N runs": the
    registered rule applied to what has finished, not the study's answer. Each share is also read on the runs of
    its claim's registered contrast in the same group (MLA's: RoPE, of `mla-no-indispensable-head`; RoPE's: ALiBi,
    of `rope-deposit-first-layer`, which has no study run), at each threshold, and a decision that would read
    reproduced stands only where the contrast fails the rule (`rules.specific_or_not`, `[decision.share]` versions
    2 and 3): with no counted contrast run it reads inconclusive (specificity not shown)."""
    th = Thresholds()
    reg = load_registry()
    contrasts = {"mla": reg.claim("mla-no-indispensable-head")["contrast"],
                 "rope": reg.claim("rope-deposit-first-layer")["contrast"]}
    planned = planned_runs()
    cols = ["group", "scheme", "runs", "counted", "rests_on", "readout", "at_005", "at_010", "decision",
            "decision_010"]
    rows = []
    for (group, scheme), g in st.groupby(["group", "scheme"], sort=False):
        interim = f"interim: {len(g)} of {planned} runs" if group == "study" and len(g) < planned else ""
        c = g[g.counted & g["has_ablation" if scheme == "mla" else "has_deposit"]]  # a table not shipped: not read
        base = {"group": group, "scheme": scheme, "runs": len(g), "counted": len(c),
                "rests_on": seeds_text(c.rename(columns={"train_seed": "seed"}))}
        contrast = contrasts.get(scheme)
        cr = st[(st.group == group) & (st.scheme == contrast) & st.counted
                & st["has_ablation" if scheme == "mla" else "has_deposit"]]
        if scheme == "mla":
            drop, drop_c = exact(c.largest_drop), exact(cr.largest_drop)
            reads = [(DECIDING["mla"], True, drop < th.indispensable, drop < th.also,
                      (drop_c < th.indispensable, drop_c < th.also))]
        else:
            reads = [(DECIDING["rope"], True, c.layer_005 == 0, c.layer_010 == 0,
                      (cr.layer_005 == 0, cr.layer_010 == 0)),
                     ("largest deposit in layer <= 1 (second reading)", False, c.layer_005 <= 1, c.layer_010 <= 1,
                      (cr.layer_005 <= 1, cr.layer_010 <= 1))]  # the registry's second reading: a share, no verdict
        for name, deciding, a5, a10, against in reads:
            s5, s10 = share(list(a5), th), share(list(a10), th)
            t5, t10 = s5["text"], s10["text"]
            if contrast is not None:
                (l5, x5), (l10, x10) = (specificity(list(a), th, scheme_label(contrast)) for a in against)
                s5, s10 = ({**s, "verdict": specific_or_not(s["verdict"], lab)} for s, lab in ((s5, l5), (s10, l10)))
                t5, t10 = f"{t5}; {x5}", f"{t10}; {x10}"
            rows.append({**base, "readout": name, "at_005": t5, "at_010": t10,
                         "decision": _decided(s5, interim) if deciding else NEVER_DECIDING,
                         "decision_010": _decided(s10, interim) if deciding else NEVER_DECIDING})
        if scheme == "mla" and len(c):
            d = c.largest_drop.dropna()
            rows.append({**base, "readout": "largest drop of any head: min / median / max",
                         "at_005": (f"{d.min():.3f} / {d.median():.3f} / {d.max():.3f}" if len(d) else "no table"),
                         "at_010": "", "decision": "", "decision_010": ""})
    return pd.DataFrame(rows, columns=cols)


TIER2_COLUMNS = ["group", "pairs", "rests_on", "readout", "evidence", "decision"]


def _tier2_sides(runs: pd.DataFrame):
    """(group, the winner's runs, the loser's runs) of tier 2 per group, paired by training x data seed
    (`orderings.paired`; the `[study.tier2]` schemes, winner first)."""
    schemes = _tier(2)["schemes"]
    for group, g in study_runs(runs, tier=2).groupby("group", sort=False):
        yield (group, *paired(*(g[g.variant == s].sort_values(["data_seed", "seed"]) for s in schemes)))


def tier2_title() -> str:
    """Tier 2's one-line name from `[study.tier2]`: "NoPE vs RoPE on Task 2 at `repro-paperdata-long`"."""
    return study_title(2, " vs ")


def study_title(tier: int = 1, joiner: str = " and ") -> str:
    """A tier's one-line name from its registration: "RoPE and MLA on Task 1 at `repro-long`"."""
    t = _tier(tier)
    return f"{joiner.join(scheme_label(s) for s in t['schemes'])} on {task_label(t['task'])} at `{t['preset']}`"


def tier2_pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """Tier 2's runs (`study_runs(runs, tier=2)`), paired by training x data seed, one row per pair: the
    ordering's two sides (`[study.tier2]` schemes, winner first) with each side's test accuracy and status."""
    rows = []
    for group, win, lose in _tier2_sides(runs):
        for a, b in zip(tuples(win), tuples(lose)):
            rows.append({"group": group, "train_seed": int(a.seed), "data_seed": int(a.data_seed),
                         "win_acc": a.test_acc, "win_status": a.status, "lose_acc": b.test_acc,
                         "lose_status": b.status, "diff": a.test_acc - b.test_acc,
                         "win_run": a.run_id, "lose_run": b.run_id})
    return pd.DataFrame(rows, columns=["group", "train_seed", "data_seed", "win_acc", "win_status", "lose_acc",
                                       "lose_status", "diff", "win_run", "lose_run"])


def tier2_readouts(runs: pd.DataFrame) -> pd.DataFrame:
    """Tier 2's registered readout per group: the claim's own decision (`nope-beats-rope-t2`, the ordering rule:
    the status checks first, then the Student-t 95 % interval of the mean paired difference winner - loser), with
    "interim: k of N pairs" while the study group's registered pairs are not all shipped. The groups are never
    pooled."""
    st, th = _tier(2), Thresholds()
    planned = planned_runs(tier=2)
    win_label, lose_label = (scheme_label(s) for s in st["schemes"])
    rows = []
    for group, win, lose in _tier2_sides(runs):
        verdict, text = _order_verdict(win, lose, th) if len(win) else ("pending", "no pair finished yet")
        interim = f"interim: {len(win)} of {planned} pairs" if group == "study" and len(win) < planned else ""
        rows.append({"group": group, "pairs": len(win), "rests_on": seeds_text(win),
                     "readout": f"paired test accuracy {win_label} - {lose_label} ({st['claims'][0]})",
                     "evidence": text, "decision": verdict + (f" ({interim})" if interim and len(win) else "")})
    return pd.DataFrame(rows, columns=TIER2_COLUMNS)


TIER_COLUMNS = ["group", "scheme", "role", "runs", "counted", "rests_on", "evidence", "decision"]
BY_CONSTRUCTION = "instrument check: cannot come out otherwise"
#: Why a scheme a tier registers `by_construction` cannot come out otherwise, as every surface says it.
WHY_BY_CONSTRUCTION = {"nope": "without position the `paper` arch is permutation-invariant (a function of the multiset "
                               "of its tokens), so it cannot compute the distance Task 1's label is"}


def share_tiers() -> list[int]:
    """The study's tiers read scheme by scheme by a claim's share rule at a pinned version (their registration names
    `rule_version` and `contrast_tier`: tiers 3 and 4), in order."""
    return [t for t in registered_tiers()[1:] if "rule_version" in _tier(t)]


def tier_readouts(runs: pd.DataFrame, tier: int) -> pd.DataFrame:
    """A share tier's registered readout per scheme and group (`[study.tierN]`, `share_tiers`): the claim's own rule
    at the version the tier names (`nope-no-generalise-t1` version 3, `orderings._no_generalise_claim`: a settled,
    not diverged run agrees when it clearly did not learn, disagrees when it learned, is not counted in between; the
    share decision) on the tier's runs of the scheme, its contrast (the claim's `contrast`, RoPE) read by the same
    rule on tier `contrast_tier`'s runs of the same group, so a reproduced stands only where RoPE fails it
    (`specific_or_not`). The decision is marked "(few runs)" under the registered minimum and "interim: k of N
    runs" while the study group's runs of the scheme are not all shipped, whatever it reads (a scheme with none:
    pending, 0 of N). `role`: an instrument check for the schemes whose outcome the architecture fixes
    (`by_construction`), else a test. Schemes, groups and tiers are never pooled. ValueError when the claim's
    registered version is not the one the tier is read by."""
    st, th, reg = _tier(tier), Thresholds(), load_registry()
    if tier not in share_tiers():
        raise ValueError(f"study tier {tier} is not read scheme by scheme (share tiers: {share_tiers()})")
    claim = reg.claim(st["claims"][0])
    if claim["version"] != st["rule_version"]:
        raise ValueError(f"study tier {tier} is registered to be read by {claim['id']} version {st['rule_version']}, "
                         f"and the registry holds version {claim['version']}: register the tier again for the new "
                         "rule")
    mine, other = study_runs(runs, tier=tier), study_runs(runs, tier=st["contrast_tier"])
    other = other[other.variant == claim["contrast"]]
    planned = planned_runs(tier=tier)
    rows = []
    for scheme in st["schemes"]:
        role = BY_CONSTRUCTION if scheme in st.get("by_construction", []) else "test"
        groups = {"study": mine.iloc[:0]} | dict(tuple(mine[mine.variant == scheme].groupby("group", sort=False)))
        for group, g in groups.items():
            if g.empty:
                rows.append({"group": group, "scheme": scheme, "role": role, "runs": 0, "counted": 0, "rests_on": "",
                             "evidence": "no run shipped yet", "decision": f"pending (0 of {planned} runs)"})
                continue
            [row] = _no_generalise_claim(pd.concat([g, other[other.group == group]]), th, scheme, ("paper",))
            n = len(no_generalise_counted(g))
            interim = f"interim: {len(g)} of {planned} runs" if group == "study" and len(g) < planned else ""
            marks = ["few runs"] * (row["verdict"] in TESTS and n < th.min_runs) + [interim] * bool(interim)
            rows.append({"group": group, "scheme": scheme, "role": role, "runs": len(g), "counted": n,
                         "rests_on": row["rests_on"], "evidence": row["evidence"],
                         "decision": row["verdict"] + (f" ({'; '.join(marks)})" if marks else "")})
    return pd.DataFrame(rows, columns=TIER_COLUMNS).sort_values(["group", "scheme"], ascending=[False, True],
                                                                 ignore_index=True)


def by_construction_note(tier: int) -> str:
    """What a share tier says first of its schemes registered `by_construction` (an instrument check, and why it
    cannot come out otherwise), "" when it has none."""
    return " ".join(f"{scheme_label(s)}'s half cannot come out otherwise: {WHY_BY_CONSTRUCTION.get(s, 'by its arch')}"
                    "; it shows only that the rule reads \"did not learn\" for a model that cannot learn (an "
                    "instrument check), not that a slow learner would be read right."
                    for s in _tier(tier).get("by_construction", []))


TIER_RUN_COLUMNS = ["group", "scheme", "train_seed", "data_seed", "test_acc_epoch1", "test_acc", "train_acc",
                    "train_acc_measured", "status", "run_id", "earlier_tier", "earlier_preset", "earlier_test_acc",
                    "earlier_status", "earlier_run"]


def tier_runs(runs: pd.DataFrame, tier: int) -> pd.DataFrame:
    """A share tier's runs, tidy, one row per run (study group first, then the runs of its preset trained before
    the registration): test accuracy at epoch 1 and at the last, train accuracy (measured after the last epoch
    where recorded, `train_acc_measured`, else the epoch's running mean), status; and beside it the study run of an
    earlier share tier with the same scheme, training seed and data seed (tier 4's Relative at 24 epochs beside tier
    3's at 12; `earlier_*`, NaN where none), never pooled: each tier is judged on its own runs."""
    mine = study_runs(runs, tier=tier)
    earlier = {}
    for t in (t for t in share_tiers() if t < tier):
        sub = study_runs(runs, tier=t)
        earlier |= {(r.variant, r.seed, r.data_seed): (t, r) for r in tuples(sub[sub.group == "study"])}
    rows = []
    for r in tuples(mine.sort_values(["group", "variant", "data_seed", "seed"], ascending=[False, True, True, True])):
        t, e = earlier.get((r.variant, r.seed, r.data_seed), (np.nan, None))
        measured = np.isfinite(r.train_acc_eval)
        rows.append({"group": r.group, "scheme": r.variant, "train_seed": int(r.seed), "data_seed": int(r.data_seed),
                     "test_acc_epoch1": r.test_acc_epoch1, "test_acc": r.test_acc,
                     "train_acc": r.train_acc_eval if measured else r.train_acc, "train_acc_measured": measured,
                     "status": r.status, "run_id": r.run_id, "earlier_tier": t,
                     "earlier_preset": e.preset if e is not None else None,
                     "earlier_test_acc": e.test_acc if e is not None else np.nan,
                     "earlier_status": e.status if e is not None else None,
                     "earlier_run": e.run_id if e is not None else None})
    return pd.DataFrame(rows, columns=TIER_RUN_COLUMNS)
