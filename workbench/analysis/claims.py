"""The core paper's claims (seed 003, docs/paper.md §6) checked against a set of runs: tidy tables, no I/O but reads.

    runs = run_table(store)            one row per finished run: setting, variant, seed, accuracies, cost
    t1 = table1(runs)                  Table 1: the paper's numbers next to the mean and 95 % interval over seeds
    cl = claims(store, runs)           one row per (claim, setting): verdict, evidence, the runs behind it
    one_setting(store, runs)           the authors' settings with one field changed, next to their baseline

Verdicts: `reproduced` (every seed agrees), `mixed` (some seeds, or the mean agrees but seeds do not),
`not reproduced` (no seed agrees), `pending` (the runs it needs are not finished yet). Thresholds are
parameters (`Thresholds`); they are printed with the verdicts. Intervals over seeds are Student-t 95 %
intervals of the mean (n seeds, n - 1 degrees of freedom); with one seed there is no interval.
Everything here reads the runs' stored tables only (config, run.json, metrics, deposit tables), so the
same verdicts come out of a shipped results store without weights.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from ._common import scheme_label, task_label
from .baselines import run_baselines
from .experiments import PAPER_TABLE1, _kwargs, final_metrics
from .registry import load_registry
from .run_status import StatusRules, run_status, wilson  # noqa: F401 (wilson: re-exported, the one definition)
from .settings import SETTINGS, setting_of  # noqa: F401 (the one definition of a run's setting)

STATUS_COLUMNS = ("learned", "settled", "still_learning", "diverged", "ceiling", "reference", "status", "why")

TASKS = ("trigger-distance", "trigger-count")


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
    min_seeds: int = 2            # 1: the scale ladder's reading of one seed (`ladder`): what that seed shows
                                  # (all agree / none), said as one seed's, never a verdict; else the share rule


BASE = "repro"  # the preset of the reproduction's main tables; the scale ladder's other rungs are compared to it


def base_preset(runs: pd.DataFrame) -> str:
    """The preset whose runs make the main tables (Table 1, the claims): `repro` when the runs have any, else
    their most common preset (a store of `smoke` or `cpu` runs gets a comparison of those)."""
    presets = runs.preset.dropna() if "preset" in runs else pd.Series([], dtype=object)
    if (presets == BASE).any() or presets.empty:
        return BASE
    return str(presets.value_counts().index[0])


def cpu_time_share(info: dict) -> float:
    """A run's training CPU time in seconds. A run trained in a pack of K (`train/packed.py`) records its share, the
    pack process's CPU time / K; runs packed before that rule (no `pack_cpu_time_s` in run.json) recorded the whole
    process's time, so theirs is divided by K here: a total over runs counts each process once."""
    cpu = float(info.get("cpu_time_s") or np.nan)
    packed = int(info.get("packed") or 1)
    return cpu / packed if packed > 1 and "pack_cpu_time_s" not in info else cpu


def run_table(store=None, runs=None) -> pd.DataFrame:
    """One row per finished run: id, setting, variant (tag or scheme), scheme, task, seed, preset, the final and
    epoch-1 test accuracy, the mean test accuracy over epochs (area under the learning curve), train accuracy
    (running mean; `train_acc_eval` measured after the epoch where recorded), epochs, wall and CPU time (a packed
    run's share: `cpu_time_share`), threads, code version, the test set's size, chance and length-only levels, and
    what the run can show (`run_status.run_status`: learned, still_learning, diverged, ceiling, reference, status,
    why).
    From a store: its finished runs that read; `.attrs["corrupt"]` holds {run id: why} for those that cannot be
    read (`workbench.store.finished_runs`)."""
    corrupt: dict[str, str] = {}
    if runs is None:
        from workbench.store import finished_runs

        runs, corrupt = finished_runs(store)
    rows = []
    for run in runs:
        cfg, info = run.config, run.info
        m = run.metrics()
        fm = final_metrics(run)
        kw = _kwargs(run)
        bl = run_baselines(run)
        test_bl = bl[bl["split"] == "test"].iloc[0] if bl is not None else {}
        n_classes = int(cfg["model"].get("n_classes") or 2)
        n_test = int(test_bl.get("n", 0)) or None
        st = run_status(m, n_classes, float(test_bl.get("length_only", np.nan)), n_test=n_test) if len(m) else {}
        rows.append({
            "run_id": run.id, "setting": setting_of(cfg), "variant": cfg.get("tag") or cfg["model"]["scheme"],
            "scheme": cfg["model"]["scheme"], "partial": bool(kw.get("rope_heads") is not None
                                                              or kw.get("rope_layers") is not None),
            "task": cfg["task"]["task"], "seed": int(cfg["train"]["seed"]), "data_seed": _data_seed(cfg),
            "preset": cfg.get("preset"), "started": info.get("started") or info.get("created"),
            "test_acc": fm["test_acc"], "train_acc": fm["train_acc"],
            "test_acc_epoch1": float(m["test_acc"].iloc[0]) if len(m) else np.nan,
            "test_acc_auc": float(m["test_acc"].mean()) if len(m) else np.nan,
            "epochs": int(len(m)), "wall_time_s": float(info.get("wall_time_s") or np.nan),
            "cpu_time_s": cpu_time_share(info), "threads": info.get("threads"),
            "code_version": info.get("code_version"), "cpu": (info.get("machine") or {}).get("cpu"),
            "train_acc_eval": float(m["train_acc_eval"].iloc[-1]) if "train_acc_eval" in m and len(m) else np.nan,
            "n_test": n_test, "chance": 1.0 / n_classes,
            "length_only": float(test_bl.get("length_only", np.nan)),
            **{k: st.get(k, np.nan if k == "reference" else False) for k in STATUS_COLUMNS},
        })
    cols = ["run_id", "setting", "variant", "scheme", "partial", "task", "seed", "data_seed", "preset", "started",
            "test_acc", "train_acc",
            "test_acc_epoch1", "test_acc_auc", "epochs", "wall_time_s", "cpu_time_s", "threads", "code_version", "cpu",
            "train_acc_eval", "n_test", "chance", "length_only", *STATUS_COLUMNS]
    df = pd.DataFrame(rows, columns=cols).sort_values(["setting", "variant", "task", "seed"], ignore_index=True)
    df.attrs["corrupt"] = corrupt
    return df


DEFAULT_DATA_SEED = 42  # task.seed of every run before the seed study (the task presets' default)


def _data_seed(cfg: dict) -> int:
    """The run's data seed: config task.seed (the draw of its whole dataset), the presets' 42 where absent."""
    v = (cfg.get("task") or {}).get("seed")
    return int(v) if v is not None else DEFAULT_DATA_SEED


def seeds_text(sub: pd.DataFrame) -> str:
    """'3 training seeds x 1 data seed (42)': what a row rests on (a data seed is a new draw of the dataset)."""
    if sub is None or len(sub) == 0:
        return "no run"
    ds = sorted(set(sub["data_seed"])) if "data_seed" in sub else [DEFAULT_DATA_SEED]
    nt = sub["seed"].nunique()
    return (f"{nt} training seed{'s' if nt != 1 else ''} x {len(ds)} data seed{'s' if len(ds) != 1 else ''} "
            f"({', '.join(str(d) for d in ds)})")


def _rests(counted: pd.DataFrame, sub: pd.DataFrame) -> str:
    """What a row rests on: its counted runs' seeds, or none counted of the runs it read."""
    if len(counted):
        return seeds_text(counted)
    return f"no counted run (of {seeds_text(sub)})" if len(sub) else "no run"


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, lo, hi, n): Student-t interval of the mean over seeds (lo = hi = NaN for n < 2)."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return np.nan, np.nan, np.nan, 0
    if len(v) == 1:
        return float(v[0]), np.nan, np.nan, 1
    half = stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean()), float(v.mean() - half), float(v.mean() + half), len(v)


def accuracy_ci(values, n_test: int | None = None) -> tuple[float, float, float, int]:
    """(mean, lo, hi, n seeds) of test accuracies: with >= 2 seeds, lo and hi are the smallest and largest seed
    (a t interval from 2-3 seeds is wider than the range an accuracy can take, or collapses at 100 %); with one
    seed, the Wilson interval on its `n_test` test examples (NaN when unknown)."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return np.nan, np.nan, np.nan, 0
    if len(v) == 1:
        return (float(v[0]), *wilson(float(v[0]), n_test or 0), 1)
    return float(v.mean()), float(v.min()), float(v.max()), len(v)


def _n_test(sub: pd.DataFrame) -> int | None:
    n = sub["n_test"].dropna() if "n_test" in sub else []
    return int(n.iloc[0]) if len(n) else None


def _statuses(sub: pd.DataFrame) -> str:
    """'3 ceiling' / '2 still learning, 1 learned': what the runs can show (run_status)."""
    return ", ".join(f"{n} {k}" for k, n in sub["status"].value_counts().items()) if "status" in sub else ""


def table1(runs: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 1 (MLA, RoPE, NoPE; test accuracy) next to ours: one row per (setting, scheme, task):
    mean over seeds, lo-hi (`accuracy_ci`: the seeds' range, or a single run's Wilson interval), the per-seed
    values, what the runs can show (`status`), and the runs' mean chance and length-only levels (the reference
    marks of the Table 1 figure)."""
    rows = []
    for setting in SETTINGS:
        for scheme in ("mla", "rope", "nope"):
            for task in TASKS:
                sub = runs[(runs.setting == setting) & (runs.variant == scheme) & (runs.task == task)]
                mean, lo, hi, n = accuracy_ci(sub["test_acc"], _n_test(sub))
                if n == 0:
                    continue
                rows.append({"setting": setting, "scheme": scheme, "task": task,
                             "paper": PAPER_TABLE1.get((scheme, task), np.nan), "mean": mean, "lo": lo, "hi": hi,
                             "n_seeds": n, "rests_on": seeds_text(sub),
                             "seeds": ", ".join(f"{a:.3f}" for a in sub["test_acc"]),
                             "status": _statuses(sub), "chance": _mean(sub, "chance"),
                             "length_only": _mean(sub, "length_only"), "runs": list(sub["run_id"])})
    return pd.DataFrame(rows, columns=["setting", "scheme", "task", "paper", "mean", "lo", "hi", "n_seeds", "rests_on",
                                       "seeds",
                                       "status", "chance", "length_only", "runs"])


def _mean(sub: pd.DataFrame, col: str) -> float:
    v = sub[col].dropna() if col in sub else []
    return float(np.mean(v)) if len(v) else np.nan


# ---- evidence helpers ---------------------------------------------------------------------------------
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
    seeds = [str(r.seed) for r in sub.itertuples() if r.run_id not in have]
    return f"; seed {', '.join(seeds)}: trained, {table} not computed yet" if seeds else ""


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
            for r in sub.itertuples() if not (r.learned and _row_settled(r))]


def _row_settled(r) -> bool:
    return bool(getattr(r, "settled", not getattr(r, "still_learning", False)))


# The outcomes of a claim row. Only the first three test the paper; the others say why the runs cannot.
TESTS = ("reproduced", "mixed", "not reproduced")
# A comparison the runs cannot rank: both sides at the ceiling, or their difference within the seeds' spread.
UNRANKED = ("inconclusive (ceiling)", "inconclusive (within seed spread)")
OUTCOMES = TESTS + ("inconclusive (did not learn)", *UNRANKED, "inconclusive (still learning)",
                    "inconclusive (one seed)", "inconclusive (few pairs)",
                    "not testable at this preset", "beyond the paper", "pending")
OUTCOME_RULES = {
    "reproduced": "a claim read run by run: the Wilson 95 % interval of the share of counted runs that agree lies "
                  "above 1/2; an ordering: the Student-t 95 % interval of the mean paired difference lies above 0 "
                  "(the registered rules, docs/preregistration.md)",
    "mixed": "the Wilson 95 % interval of the share of agreeing runs contains 1/2: the runs cannot say which way it "
             "goes (3 of 3 agreeing gives [0.44, 1.00]: a share on fewer than 10 counted runs is marked "
             "\"(few runs)\")",
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
    "inconclusive (one seed)": "a single seed can show the claim (the others are not run yet or did not learn): "
                               "one seed cannot tell a finding from seed noise; the evidence says what it shows",
    "inconclusive (few pairs)": "an ordering with fewer than 3 paired runs (same training and data seed): no "
                                "interval to decide it",
    "not testable at this preset": "the claim needs what the preset does not have (training long enough to "
                                   "overfit; an optimiser not tuned on one scheme; a control the preset lacks)",
    "beyond the paper": "PE-Lab's own question (another task, method or setting than the paper's claim): shown, not "
                        "counted as a test of the paper",
    "pending": "its runs are not finished yet",
}


def verdict_summary(cl: pd.DataFrame) -> str:
    """'Of 35 claim rows, 20 test the paper at this preset: 8 reproduced, ...; the other 15: ...'."""
    counts = cl.verdict.value_counts()
    tested = int(sum(counts.get(v, 0) for v in TESTS))
    rest = [f"{int(counts.get(v, 0))} {v}" for v in OUTCOMES[len(TESTS):] if counts.get(v, 0)]
    return (f"of {len(cl)} claim rows, {tested} test the paper at this preset: "
            + ", ".join(f"{int(counts.get(v, 0))} {v}" for v in TESTS)
            + (f"; the other {len(cl) - tested}: " + ", ".join(rest) if rest else ""))


def share(agree: list[bool], th: Thresholds | None = None) -> dict[str, Any]:
    """The registered share decision (`[decision.share]`): k of the n counted runs agree; the Wilson 95 % interval
    of k / n against 1/2 decides: reproduced (it lies above), not reproduced (below), mixed (it contains 1/2);
    n = 0: pending. `few`: n < min_runs, shown "(few runs)". {verdict, k, n, lo, hi, few, text}."""
    th = th or Thresholds()
    against = float(load_registry().decision["share"]["against"])
    k, n = int(sum(bool(a) for a in agree)), len(agree)
    if n == 0:
        return {"verdict": "pending", "k": 0, "n": 0, "lo": np.nan, "hi": np.nan, "few": True, "text": "no run"}
    lo, hi = wilson(k / n, n)
    verdict = "reproduced" if lo > against else "not reproduced" if hi < against else "mixed"
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


def _at(dep: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """A deposit table judged at another threshold: a single-head deposit at `threshold` is one at the spec's 0.05
    whose drop is also >= `threshold` (the ratio and interval conditions do not depend on it)."""
    if threshold <= 0.05 + 1e-12:
        return dep
    d = dep.copy()
    d["single_head_deposit"] = d["single_head_deposit"].astype(bool) & (d["top_delta"] >= threshold)
    return d


def specificity(contrast_agree: list[bool], th: Thresholds, name: str) -> tuple[str, str]:
    """The registered specificity check: the claim's rule applied to the runs of the scheme the paper contrasts it
    with. (label, text): "not specific" when the contrast passes the same rule (its share decision reproduced),
    "specific" when it fails (not reproduced), "specificity not shown" when its share is mixed, "no contrast
    run" when none counts."""
    if not contrast_agree:
        return "no contrast run", f"contrast {name}: no counted run"
    sh = share(contrast_agree, th)
    label = {"reproduced": "not specific", "not reproduced": "specific"}.get(sh["verdict"], "specificity not shown")
    return label, f"contrast {name}: {sh['text']} ({label})"


def _single_layers(dep: pd.DataFrame) -> list[int]:
    return sorted(int(l) for l in dep.loc[dep["single_head_deposit"], "layer"])


def _dep_shows(dep: pd.DataFrame) -> str:
    """'single-head deposit L1.H6 0.54 [0.51, 0.57], ...' or 'no single-head deposit (average deposit at ...)'."""
    s = dep[dep["single_head_deposit"]]
    if len(s):
        return "single-head deposit " + ", ".join(
            f"L{int(r.layer)}.H{int(r.top_head)} {r.top_delta:.2f} [{r.top_lo:.2f}, {r.top_hi:.2f}]"
            for r in s.itertuples())
    a = dep[dep["average_deposit"]]
    return "no single-head deposit" + (
        f" (average deposit at layer {', '.join(str(int(l)) for l in a['layer'])})" if len(a) else "")


ROW_COLUMNS = ["claim", "paper_says", "setting", "verdict", "evidence", "runs", "result", "claim_id", "verdict_also",
               "threshold_sensitive", "specificity", "rests_on", "few_runs"]


def _row(claim: str, paper: str, setting: str, verdict: str, evidence: str, run_ids,
         result: str | None = None, **extra) -> dict[str, Any]:
    """One claim row; `result`: what the seeds show (reproduced / mixed / not reproduced) where `verdict` says the
    row is not a test of the paper (beyond the paper), else the verdict itself. `extra`: claim_id (the registered
    claim it reads, "" for PE-Lab's own rows), verdict_also (at the second threshold), threshold_sensitive,
    specificity and rests_on (training x data seeds)."""
    return {"claim": claim, "paper_says": paper, "setting": setting, "verdict": verdict, "evidence": evidence,
            "runs": list(run_ids), "result": result or verdict, "claim_id": extra.get("claim_id", ""),
            "verdict_also": extra.get("verdict_also", verdict),
            "threshold_sensitive": bool(extra.get("threshold_sensitive", False)),
            "specificity": extra.get("specificity", ""), "rests_on": extra.get("rests_on", ""),
            "few_runs": bool(extra.get("few_runs", False))}


def _largest(dep: pd.DataFrame) -> tuple[int | None, str]:
    """(layer, "Ll.Hh drop") of the largest single-head deposit (largest zero-ablation drop), or (None, "none")."""
    s = dep[dep["single_head_deposit"]]
    if s.empty:
        return None, "none"
    r = s.loc[s["top_delta"].idxmax()]
    return int(r.layer), f"L{int(r.layer)}.H{int(r.top_head)} {r.top_delta:.2f}"


PAPER_SIX = ("rope", "sinusoidal", "learned", "alibi", "nope", "relative")  # the paper's Figure 2 schemes (its
# "random" is a trained N(0, 1) table: PE-Lab's `learned`, docs/fidelity.md)


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
            for r in good.itertuples() if r.run_id in deps]


def _per_seed_deposit_claim(store, runs, th, claim, paper, variant, task, agrees: Callable[[pd.DataFrame], bool],
                            settings=("paper", "authors"), outcome: str | None = None, claim_id: str = "",
                            contrast: tuple[str, str] | None = None, second: Callable | None = None,
                            second_label: str = "") -> list[dict]:
    """One row per setting: each counted run's deposit table judged by `agrees` at both registered thresholds,
    decided by the share rule (`share`). Only runs that learned and settled count (`_settled`); the evidence still
    shows an uncounted run's deposits, marked not counted; none left: inconclusive (did not learn / still
    learning). `contrast` (variant, task): the same rule on the scheme the paper contrasts the claim with
    (`specificity`). `second`: a second reading shown beside, never deciding (`second_label` names it).
    `outcome` replaces the verdict for rows that do not test the paper (e.g. "beyond the paper")."""
    out = []
    for setting in settings:
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
            extra.update(verdict_also=two["verdict_also"], threshold_sensitive=two["threshold_sensitive"], few_runs=two["few"])
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


def _seed_label(r) -> str:
    """'42' for a run on the default data seed, '45 (data 43)' for one on another draw of the dataset."""
    ds = getattr(r, "data_seed", DEFAULT_DATA_SEED)
    return f"{r.seed}" if ds in (DEFAULT_DATA_SEED, None) or pd.isna(ds) else f"{r.seed} (data {int(ds)})"


def _ranking_claim(runs, claim, paper, scheme, rank, task="trigger-distance", claim_id: str = "") -> dict:
    """`scheme` has rank `rank` (1 = first) by the area under the test-accuracy curve among the paper's six
    Figure-2 schemes (PAPER_SIX) in the `paper` arch, per seed and on the seed mean; only seeds with all six
    finished count. Not testable at this preset: lr, batch and clipping were tuned on RoPE, Task 1, seed 42
    (docs/training.md), so a convergence order favours RoPE by construction; the ranks are shown as evidence."""
    sub = runs[(runs.setting == "paper") & (runs.task == task) & (runs.variant == runs.scheme) & ~runs.partial
               & runs.scheme.isin(PAPER_SIX)]
    complete = [seed for seed, s in sub.groupby("seed") if set(PAPER_SIX) <= set(s.scheme)]
    if not complete:
        have = ", ".join(f"seed {seed}: {len(set(s.scheme))} of {len(PAPER_SIX)}" for seed, s in sub.groupby("seed"))
        return _row(claim, paper, "paper", "pending", "needs the paper's six schemes of a seed finished"
                    + (f" ({have})" if have else ""), sub[sub.scheme == scheme]["run_id"], claim_id=claim_id)
    sub = sub[sub.seed.isin(complete)]
    notes = []
    for seed, s in sub.groupby("seed"):
        order = list(s.sort_values("test_acc_auc", ascending=False).scheme)
        notes.append(f"seed {seed}: rank {order.index(scheme) + 1} of {len(order)}"
                     f" ({'agrees' if order.index(scheme) + 1 == rank else 'does not'})")
    means = sub.groupby("scheme")["test_acc_auc"].mean().sort_values(ascending=False)
    mean_rank = list(means.index).index(scheme) + 1
    order = ", ".join(f"{scheme_label(k)} {v:.3f}" for k, v in means.items())
    ev = (f"{load_registry().claim('rope-converges-fastest')['why']}. Among the paper's six schemes, mean test accuracy over epochs (area under the "
          f"curve), seed mean: {order}; {scheme_label(scheme)} ranks {mean_rank}; " + "; ".join(notes))
    return _row(claim, paper, "paper", "not testable at this preset", ev, sub[sub.scheme == scheme]["run_id"],
                claim_id=claim_id, rests_on=seeds_text(sub[sub.scheme == scheme]))


ROPE_SHALLOW = "RoPE's largest single-head deposit is in the first layer (layer 0) on Task 1"


def largest_layer(dep: pd.DataFrame) -> int | None:
    """The layer of the run's largest single-head deposit (None: no single-head deposit)."""
    return _largest(dep)[0]


def _rope_shallow_claim(store, runs, th, settings=("paper", "authors")) -> list[dict]:
    """The registered headline `rope-deposit-first-layer`: the paper's "ablating a single shallow-layer head causes
    a pronounced accuracy loss" (5.1), whose first layer 5.2 names: a counted run agrees when its largest
    single-head deposit is in layer 0 (`th.shallow_layer`); layer <= 1 is shown as a second reading, never
    deciding; ALiBi (which the paper calls scattered) is the contrast."""
    return _per_seed_deposit_claim(
        store, runs, th, ROPE_SHALLOW, "single-head deposit in the first (shallow) layer", "rope", "trigger-distance",
        lambda d: (layer := _largest(d)[0]) is not None and layer <= th.shallow_layer, settings=settings,
        claim_id="rope-deposit-first-layer", contrast=("alibi", "trigger-distance"),
        second=lambda d: (layer := _largest(d)[0]) is not None and layer <= th.shallow_second,
        second_label=f"largest deposit in layer <= {th.shallow_second}")


def claims(store, runs: pd.DataFrame | None = None, th: Thresholds = Thresholds()) -> pd.DataFrame:
    """Every qualitative claim of the core paper (docs/paper.md), one row per (claim, setting) with an outcome
    (OUTCOMES), its evidence, the runs behind it and what kind of evidence it rests on (`evidence_kind`:
    accuracy, curves, deposits or overfit). `runs` must be of one preset (the claims compare settings, not
    scales; `ladder` compares presets): ValueError otherwise."""
    runs = run_table(store) if runs is None else runs
    presets = sorted(set(runs.preset.dropna()))
    if len(presets) > 1:
        raise ValueError(f"claims: the runs span presets {presets}; pass the runs of one preset "
                         "(e.g. runs[runs.preset == 'repro'])")
    t1, t2 = "trigger-distance", "trigger-count"
    rows: list[dict] = []
    kinds: list[str] = []

    def add(new, kind: str) -> None:
        new = [new] if isinstance(new, dict) else new
        rows.extend(new)
        kinds.extend([kind] * len(new))

    add(_ranking_claim(runs, "RoPE converges fastest on Task 1", "RoPE converges fastest", "rope", 1,
                       claim_id="rope-converges-fastest"), "curves")
    add(_ranking_claim(runs, "absolute (sinusoidal) converges second on Task 1", "absolute is second",
                       "sinusoidal", 2, claim_id="absolute-second"), "curves")
    add(_absolute_heads_claim(store, runs, th), "deposits")
    add(_rope_shallow_claim(store, runs, th), "deposits")
    for scheme in ("nope", "alibi", "relative"):
        add(_per_seed_deposit_claim(
            store, runs, th, f"no deposit for {scheme_label(scheme)} on Task 1", "no deposit for NoPE, ALiBi, "
            "relative", scheme, t1, lambda d: not d["single_head_deposit"].any(),
            settings=("paper", "authors") if scheme == "nope" else ("paper",), claim_id=f"no-deposit-{scheme}-t1",
            contrast=("rope", t1)), "deposits")
    add(_per_seed_deposit_claim(
        store, runs, th, "no deposit for RoPE on Task 2", "none for RoPE on Task 2", "rope", t2,
        lambda d: not d["single_head_deposit"].any(), claim_id="no-deposit-rope-t2", contrast=("rope", t1)),
        "deposits")
    add(_rope_absolute_claim(store, runs, th), "deposits")
    add(_overfit_claim(runs, th), "overfit")
    add(_poor_claim(runs, th, "alibi", "ALiBi converges poorly on Task 1", "ALiBi converges poorly"), "accuracy")
    for scheme in ("nope", "relative"):
        add(_no_generalise_claim(runs, th, scheme), "accuracy")
    add(_mla_claims(store, runs, th), "deposits")
    add(_table1_order_claims(runs, th), "accuracy")
    add(_partial_rope_claim(store, runs, th), "deposits")
    add(_causal_claims(store, runs, th), "deposits")
    out = pd.DataFrame(rows, columns=ROW_COLUMNS)
    out["evidence_kind"] = kinds
    return out


def _overfit_claim(runs, th) -> dict:
    """Not testable at this preset: the paper trained 100 epochs; 3 are too few to overfit, and the recorded
    train accuracy is a running mean over the epoch (biased low against the test accuracy measured after it).
    Where every run's test accuracy is at the ceiling (run_status), no train - test gap can open on this data
    whatever the epochs, and the evidence says so first. The gap is shown from `train_acc_eval` (measured after
    the epoch) where a run recorded it."""
    claim, paper = "learned / random position embeddings overfit on Task 1", "learned/\"random\" overfits"
    sub = runs[(runs.setting == "paper") & (runs.task == "trigger-distance") & runs.variant.isin(["learned", "random"])]
    if sub.empty:
        return _row(claim, paper, "paper", "pending", "runs not finished yet", [])
    measured = sub.train_acc_eval.notna().all()
    train = sub.train_acc_eval if measured else sub.train_acc
    at_ceiling = sub.ceiling.astype(bool).all()
    ev = (("test accuracy at the ceiling in every run: no train - test gap can open on this data; " if at_ceiling
           else "") + f"{int(sub.epochs.max())} epochs against the paper's 100, too few to overfit; train accuracy "
          + ("measured after the last epoch" if measured else "recorded as a running mean over the last epoch "
             "(biased low)") + ": "
          + "; ".join(f"{scheme_label(r.scheme)} seed {r.seed}: train {t:.3f} vs test {r.test_acc:.3f}"
                      for r, t in zip(sub.itertuples(), train)) + f" (overfitting: gap >= {th.overfit_gap})")
    return _row(claim, paper, "paper", "not testable at this preset", ev, sub.run_id, claim_id="random-overfits",
                rests_on=seeds_text(sub))


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
    big, small = int((d >= threshold).sum()), int((d < quiet).sum())
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
                for r in good.itertuples() if r.run_id in abl], abl, good

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
        extra.update(verdict_also=two["verdict_also"], threshold_sensitive=two["threshold_sensitive"], few_runs=two["few"],
                     specificity=label)
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
    for r in good.itertuples():
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
    elif controls and not any(controls):
        verdict = "not testable at this preset"
        ev = "full RoPE has no single-head deposit in layer 0 to move in any seed (the control): " + ev
    else:
        verdict = _verdict(a5, th)
        if a5:
            two = _two_thresholds(a5, a10, th)
            ev += f". Decision: {two['text']}"
            extra.update(verdict_also=two["verdict_also"], threshold_sensitive=two["threshold_sensitive"], few_runs=two["few"])
    return _row(claim, paper, "paper", verdict, ev, list(sub.run_id) + list(full.run_id), **extra)


def _seed_noise(a: pd.DataFrame, b: pd.DataFrame, floor: float) -> float:
    """How far apart two sides' test accuracies must be to count as a difference: the larger seed standard
    deviation of the two sides (>= 2 seeds), else twice the binomial standard error of the difference on the
    test set (one seed), and never below `floor`."""
    if len(a) >= 2 and len(b) >= 2:
        return max(floor, float(a.test_acc.std(ddof=1)), float(b.test_acc.std(ddof=1)))
    pa, pb = float(a.test_acc.mean()), float(b.test_acc.mean())
    na = a.n_test.dropna()
    n = float(na.iloc[0]) if len(na) else np.nan
    se = np.sqrt(pa * (1 - pa) / n + pb * (1 - pb) / n) if np.isfinite(n) and n > 0 else 0.0
    return max(floor, 2 * se)


def paired(ra: pd.DataFrame, rb: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs of two sides with the same training and data seed, in the same order (a paired comparison)."""
    key = (lambda d: list(zip(d.seed, d["data_seed"] if "data_seed" in d else [DEFAULT_DATA_SEED] * len(d))))
    kb = dict(zip(key(rb), range(len(rb))))
    ia = [i for i, k in enumerate(key(ra)) if k in kb]
    return ra.iloc[ia], rb.iloc[[kb[k] for k in (key(ra)[i] for i in ia)]]


def _comparison_outcome(win: pd.DataFrame, lose: pd.DataFrame, th) -> str | None:
    """The registered ordering's checks, in order (`[decision.ordering]`), on paired runs: a run did not learn ->
    did not learn; every run of both sides at the ceiling -> ceiling; a run not settled and below the ceiling ->
    still learning; fewer than `th.min_pairs` pairs -> few pairs (the ladder's one-seed reading: one pair reads
    its difference against twice the binomial standard error); None: the t interval decides (`_order_verdict`)."""
    if not win.learned.astype(bool).all() or not lose.learned.astype(bool).all():
        return "inconclusive (did not learn)"
    ceiling = StatusRules().ceiling
    if (win.test_acc >= ceiling).all() and (lose.test_acc >= ceiling).all():
        return "inconclusive (ceiling)"
    if win.still_learning.astype(bool).any() or lose.still_learning.astype(bool).any():
        return "inconclusive (still learning)"
    if th.min_seeds <= 1:
        diff = float(win.test_acc.mean() - lose.test_acc.mean())
        return "inconclusive (within seed spread)" if abs(diff) < _seed_noise(win, lose, 0.0) else None
    if len(win) < th.min_pairs:
        return "inconclusive (few pairs)"
    return None


def _order_verdict(win: pd.DataFrame, lose: pd.DataFrame, th) -> tuple[str, str]:
    """(verdict, text) of "win beats lose" on paired runs: the Student-t 95 % interval of the mean paired
    difference above 0 -> reproduced, below 0 -> not reproduced, else within the seeds' spread; the checks of
    `_comparison_outcome` first."""
    d = win.test_acc.to_numpy(dtype=float) - lose.test_acc.to_numpy(dtype=float)
    mean, lo, hi, n = mean_ci(d, float(load_registry().decision["ordering"]["level"]))
    text = (f"paired difference {mean:+.3f}" + (f", t 95 % [{lo:+.3f}, {hi:+.3f}]" if n >= 2 else "")
            + f" over {n} pair{'s' if n != 1 else ''} (training x data seed)")
    first = _comparison_outcome(win, lose, th)
    if first:
        return first, text
    if th.min_seeds <= 1:
        return ("reproduced" if mean > 0 else "not reproduced"), text
    return ("reproduced" if lo > 0 else "not reproduced" if hi < 0 else "inconclusive (within seed spread)"), text


def _unranked_why(verdict: str, win: pd.DataFrame, lose: pd.DataFrame, th) -> str:
    """Why two sides cannot be ranked, for an UNRANKED `verdict`: both at the ceiling, or the t interval of their
    paired difference containing 0, with the numbers."""
    if verdict == "inconclusive (ceiling)":
        return f"cannot rank: every run at >= {StatusRules().ceiling:.2f}"
    return f"cannot rank: {_order_verdict(win, lose, th)[1]} contains 0"


def _poor_claim(runs, th, scheme, claim, paper) -> dict:
    """"ALiBi converges poorly" (`alibi-converges-poorly`): registered not testable (the optimiser was tuned on
    RoPE, so every other scheme converges slower than it would with its own); the paired accuracies are shown."""
    why = load_registry().claim("alibi-converges-poorly")["why"]
    sub, rope = _runs(runs, "paper", scheme, "trigger-distance"), _runs(runs, "paper", "rope", "trigger-distance")
    if sub.empty or rope.empty:
        return _row(claim, paper, "paper", "pending", "runs not finished yet", [], claim_id="alibi-converges-poorly")
    pa, pr = paired(sub, rope)
    ev = f"{why}. " + "; ".join(f"seed {_seed_label(r)}: {r.test_acc:.3f} vs RoPE {q.test_acc:.3f} ({r.status})"
                                for r, q in zip(pa.itertuples(), pr.itertuples()))
    return _row(claim, paper, "paper", "not testable at this preset", ev, sub.run_id,
                claim_id="alibi-converges-poorly", rests_on=seeds_text(pa))


def _no_generalise_claim(runs, th, scheme) -> dict:
    """"does not generalise" (`nope-no-generalise-t1`, whose sentence names relative too): a settled run agrees
    when it did not learn the task (run_status); a run not settled is left out (more epochs might change it);
    the share rule decides; full RoPE is the contrast (it must not "not generalise")."""
    claim, paper = f"{scheme_label(scheme)} does not generalise on Task 1", "NoPE and relative do not generalise"
    sub = _runs(runs, "paper", scheme, "trigger-distance")
    if sub.empty:
        return _row(claim, paper, "paper", "pending", "runs not finished yet", [], claim_id="nope-no-generalise-t1")
    settled = sub[_is_settled(sub) | sub.diverged.astype(bool)]
    agree = list(~settled.learned.astype(bool))
    ev = "; ".join(f"seed {_seed_label(r)}: {r.status} ({r.why})" for r in sub.itertuples())
    extra = {"claim_id": "nope-no-generalise-t1", "rests_on": _rests(settled, sub)}
    if agree:
        rope = _runs(runs, "paper", "rope", "trigger-distance")
        rope = rope[_is_settled(rope)]
        label, text = specificity(list(~rope.learned.astype(bool)), th, "RoPE Task 1")
        ev += f". Decision: {share(agree, th)['text']}; {text}"
        extra.update(specificity=label, few_runs=share(agree, th)["few"])
    verdict = "inconclusive (still learning)" if settled.empty else _verdict(agree, th)
    return _row(claim, paper, "paper", verdict, ev, sub.run_id, **extra)


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
        return good, abl, tops, [(r, bool(tops[r.run_id].delta < th.indispensable),
                                  bool(tops[r.run_id].delta < th.also)) for r in good.itertuples() if r.run_id in tops]

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
                extra.update(verdict_also=two["verdict_also"], threshold_sensitive=two["threshold_sensitive"], few_runs=two["few"])
                rope = _contrast_runs(runs, "authors" if setting == "authors-mla" else setting, "rope", task)
                c = judged(rope)[3]
                label, text = specificity([a for _, a, _ in c], th, f"RoPE {task_label(task)}")
                ev += f"; {text}"
                extra["specificity"] = label
            verdict = _unshown(sub) if len(sub) and good.empty else _verdict(agree, th)
            result = verdict
            if task != "trigger-distance" and verdict in TESTS:
                verdict = "beyond the paper"
            out.append(_row(f"{claim}, {task_label(task)}", paper, setting, verdict, ev, sub.run_id, result, **extra))
    return out


ORDER_IDS = {("mla", "rope", "trigger-count"): "mla-beats-rope-t2", ("rope", "mla", "trigger-distance"):
             "rope-beats-mla-t1", ("nope", "rope", "trigger-count"): "nope-beats-rope-t2"}


def _table1_order_claims(runs, th) -> list[dict]:
    """The orderings Table 1 shows (registered `[decision.ordering]`): MLA beats RoPE on Task 2, RoPE beats MLA on
    Task 1, NoPE beats RoPE on Task 2. Paired runs (same training and data seed); the status checks first
    (`_comparison_outcome`), then the Student-t 95 % interval of the mean paired difference (`_order_verdict`)."""
    out = []
    for a, b, task, text in (("mla", "rope", "trigger-count", "MLA beats RoPE on Task 2 (97.41 vs 69.43)"),
                             ("rope", "mla", "trigger-distance", "RoPE beats MLA on Task 1 (92.64 vs 88.34)"),
                             ("nope", "rope", "trigger-count", "NoPE beats RoPE on Task 2 (77.69 vs 69.43)")):
        cid = ORDER_IDS[(a, b, task)]
        for setting in SETTINGS:
            # the authors ran MLA in their MLA script: compare it with their transformer script's RoPE/NoPE
            sa = "authors-mla" if (setting == "authors" and a == "mla") else setting
            sb = "authors-mla" if (setting == "authors" and b == "mla") else setting
            if setting == "authors-mla":
                continue
            ra, rb = _runs(runs, sa, a, task), _runs(runs, sb, b, task)
            if ra.empty or rb.empty:
                if setting in ("paper", "authors"):
                    out.append(_row(text, "Table 1", setting, "pending", "runs not finished yet", [], claim_id=cid))
                continue
            pa, pb = paired(ra, rb)
            where = (f"{scheme_label(a)} ({SETTINGS[sa]}) vs {scheme_label(b)} ({SETTINGS[sb]})"
                     if sa != sb else "same architecture and settings")
            la, lb = scheme_label(a), scheme_label(b)  # each number names its side: "NoPE 0.750 vs RoPE 0.672"
            if len(pa):
                verdict, how = _order_verdict(pa, pb, th)
                ev = (f"{where}: mean over the {len(pa)} paired seed(s) {la} {pa.test_acc.mean():.3f} vs "
                      f"{lb} {pb.test_acc.mean():.3f}; per seed ({la} vs {lb}) "
                      + ", ".join(f"{_seed_label(x)}: {x.test_acc:.3f} ({x.status}) vs {y.test_acc:.3f} ({y.status})"
                                  for x, y in zip(pa.itertuples(), pb.itertuples()))
                      + f"; {how}")
            else:
                verdict, ev = "pending", "no seed with both runs finished yet"
            if verdict in UNRANKED:
                ev += f"; {_unranked_why(verdict, pa, pb, th)}"
            out.append(_row(text, "Table 1", setting, verdict, ev, list(ra.run_id) + list(rb.run_id),
                            claim_id=cid, rests_on=seeds_text(pa)))
    return out


def _partial_and_full_rope(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The `paper`-arch RoPE runs with RoPE on some heads only (tier 2), and full RoPE (tier 1)."""
    rope = runs[(runs.setting == "paper") & (runs.scheme == "rope")]
    return rope[rope.partial], rope[(rope.variant == "rope") & ~rope.partial]


DEEPER_LAYERS = (1, 2)  # 0-based: the paper's "second or third layer" (C.3)


def _partial_rope_claim(store, runs, th) -> dict:
    """The registered `partial-rope-deeper` (C.3: "the most significant deposit pattern is not necessarily in the
    first layer, but may be in the second or third layer"), on Task 1 only (C.1: the paper ran its partial-RoPE
    experiments on Task 1): a counted partial-RoPE run of the `paper` arch agrees when its largest single-head
    deposit is in layer 1 or 2 (0-based); "may be" is read as "in most counted runs", by the share rule over every
    counted partial-RoPE run (an existential reading passes on any one run); full RoPE is the contrast. The
    evidence names each run's largest deposit, whether layer 0 has one, and full RoPE's of the same seed."""
    claim = ("partial RoPE puts its most significant deposit in the second or third layer (layer 1 or 2) on Task 1")
    paper = "the most significant deposit is not necessarily in the first layer, but may be in the second or third"
    t1 = "trigger-distance"
    all_sub, full = _partial_and_full_rope(runs)
    if not all_sub.empty:
        all_sub, full = all_sub[all_sub.task == t1], full[full.task == t1]
    if all_sub.empty:
        return _row(claim, paper, "paper", "pending", "no partial-RoPE run on Task 1 yet (tier 2 of grids/repro.toml)",
                    [], claim_id="partial-rope-deeper")
    learned, sub = _learned(all_sub), _settled(all_sub)

    def deeper(d):
        return largest_layer(d) in DEEPER_LAYERS

    deps = _deposits(store, list(learned["run_id"]) + list(full["run_id"]))
    notes = []
    for r in learned.itertuples():
        if r.run_id not in deps:
            notes.append(f"{r.variant} seed {_seed_label(r)}: trained, deposit not computed yet")
            continue
        d = deps[r.run_id]
        base = [_largest(deps[b])[1] for b in full[full.seed == r.seed].run_id if b in deps]
        counted = r.run_id in set(sub.run_id)
        notes.append(f"{r.variant} seed {_seed_label(r)} ("
                     + (f"test acc {r.test_acc:.3f}" if counted else f"not settled: {r.why}, not counted")
                     + f"): largest single-head deposit {_largest(d)[1]}"
                     + (f" ({'agrees' if deeper(d) else 'does not'})" if counted else "")
                     + f", layer 0 {'has one' if 0 in _single_layers(d) else 'has none'}; "
                     f"full RoPE {base[0] if base else 'not shipped'}")
    notes += _uncounted_notes(all_sub[~all_sub.learned.astype(bool)], label=lambda r: f"{r.variant} ")
    judged = _deposit_agreement(store, all_sub, th, deeper)
    agree, agree_also = [a for _, a, _ in judged], [b for _, _, b in judged]
    ev = "; ".join(notes)
    extra = {"claim_id": "partial-rope-deeper", "rests_on": _rests(sub, all_sub)}
    if judged:
        two = _two_thresholds(agree, agree_also, th)
        label, text = specificity([a for _, a, _ in _deposit_agreement(store, full, th, deeper)], th, "full RoPE Task 1")
        ev += f". Decision: {two['text']}; {text}"
        extra.update(verdict_also=two["verdict_also"], threshold_sensitive=two["threshold_sensitive"], few_runs=two["few"],
                     specificity=label)
    if sub.empty:
        verdict = _unshown(all_sub)
    elif not judged:
        verdict = "pending"
    else:
        verdict = _verdict(agree, th)
    return _row(claim, paper, "paper", verdict, ev, all_sub.run_id, **extra)


def _causal_claims(store, runs, th) -> list[dict]:
    """Beyond zero-ablation (issue 14), from each run's `head_summary` table (votes of ablation, patching, probe
    and direct logit attribution): does RoPE's ablation deposit head also carry the distance, and does MLA have a
    head that two methods agree on? The paper used ablation alone: these rows are beyond the paper (shown, not
    counted as tests of it). Settled seeds only (`_settled`: learned, not still learning)."""
    out = []
    claim = "RoPE's ablation deposit head also carries the distance (>= 2 methods agree), Task 1"
    for setting in ("paper", "authors"):
        all_sub = _runs(runs, setting, "rope", "trigger-distance")
        sub = _settled(all_sub)
        hs = _stored(store, sub["run_id"], "head_summary")
        agree, notes = [], []
        for r in sub.itertuples():
            if r.run_id not in hs:
                continue
            h = hs[r.run_id]
            paper = h[h["paper_deposit"].astype(bool)]
            if paper.empty:
                notes.append(f"seed {r.seed}: no ablation deposit head")
                agree.append(False)
                continue
            both = paper[paper["deposit_head"].astype(bool)]
            agree.append(not both.empty)
            notes.append(f"seed {r.seed}: " + ", ".join(
                f"L{int(x.layer)}.H{int(x['head'])} patching {x.patch_effect:.2f}, probe selectivity "
                f"{x.probe_selectivity:.2f}, votes {x.methods or 'none'}" for _, x in paper.iterrows()))
        if all_sub.empty and setting != "paper":
            continue
        notes += _uncounted_notes(all_sub)
        out.append(_row(claim, "one shallow head carries the bulk of positional computations", setting,
                        _beyond(agree, all_sub, sub), "; ".join(notes) + _waiting(sub, hs, "head_summary") if notes
                        else "no finished run with a head_summary table yet", all_sub["run_id"], _verdict(agree, th)))
    claim = "MLA has no head that a causal method and a second method mark as a deposit head"
    for setting in ("paper", "authors-mla"):
        for task in TASKS:
            all_sub = _runs(runs, setting, "mla", task)
            sub = _settled(all_sub)
            hs = _stored(store, sub["run_id"], "head_summary")
            agree, notes = [], []
            for r in sub.itertuples():
                if r.run_id not in hs:
                    continue
                dep = hs[r.run_id][hs[r.run_id]["deposit_head"].astype(bool)]
                causal = dep[dep["methods"].map(_has_causal_vote)]
                agree.append(causal.empty)
                notes.append(f"seed {r.seed}: {len(dep)} heads with >= 2 votes, {len(causal)} with a causal one"
                             + (f" ({_vote_counts(dep)})" if len(dep) else ""))
            if all_sub.empty and setting != "paper":
                continue
            parts = notes + _uncounted_notes(all_sub)
            out.append(_row(f"{claim}, {task_label(task)}", "MLA shows no indispensable single head", setting,
                            _beyond(agree, all_sub, sub),
                            "; ".join(parts) + _waiting(sub, hs, "head_summary") if parts
                            else "no finished run with a head_summary table yet", all_sub["run_id"], _verdict(agree, th)))
    return out


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


# The questions issue 13 asks of the reproduction: (question, the claim rows that answer it, the answer when the
# claim is reproduced, when it is not, the settings that answer it: None = all)
QUESTIONS = (
    ("Does RoPE put its positional computation in one shallow head (Task 1)?",
     ROPE_SHALLOW, "yes", "no", None),
    ("Does MLA's Task 2 advantage over RoPE survive when MLA runs in the same architecture as RoPE?",
     "MLA beats RoPE on Task 2", "yes", "no", ("paper", "encoder", "decoder")),
    ("Is there an indispensable head in MLA when heads are actually ablated?",
     "MLA has no indispensable single head", "no", "yes", None),
)
ANSWER_OF = {"mixed": "mixed (the share of agreeing runs may lie on either side of 1/2)", "inconclusive (did not learn)": "cannot tell (the model did not learn)",
             "inconclusive (ceiling)": "cannot tell (both at the ceiling)",
             "inconclusive (within seed spread)": "cannot tell (within the seeds' spread)",
             "inconclusive (still learning)": "cannot tell (still learning at its last epoch)",
             "inconclusive (one seed)": "cannot tell (one seed)",
             "inconclusive (few pairs)": "cannot tell (fewer than 3 paired runs)",
             "not testable at this preset": "cannot tell at this preset", "pending": "not known yet"}


def answer_of(result: str, yes: str = "yes", no: str = "no") -> str:
    """A claim's outcome said as the answer to its question: `yes` if reproduced, `no` if not, else ANSWER_OF."""
    return {"reproduced": yes, "not reproduced": no}.get(result) or ANSWER_OF[result]


def answers(cl: pd.DataFrame) -> pd.DataFrame:
    """QUESTIONS answered from the claims' verdicts: one row per (question, setting[, task]) with the answer
    (yes / no / in some seeds only / cannot tell / not known yet), the verdict and its evidence."""
    rows = []
    for question, prefix, yes, no, settings in QUESTIONS:
        sub = cl[cl.claim.str.startswith(prefix)]
        for r in (sub[sub.setting.isin(settings)] if settings else sub).itertuples():
            task = f", {r.claim.split(', ')[-1]}" if ", Task" in r.claim else ""
            rows.append({"question": question, "setting": SETTINGS.get(r.setting, r.setting) + task,
                         "answer": answer_of(r.result, yes, no),
                         "verdict": r.verdict, "evidence": r.evidence})
    return pd.DataFrame(rows, columns=["question", "setting", "answer", "verdict", "evidence"])


LADDER_QUESTIONS = (  # (question, kind, spec): "learns": a cell (setting, variant, task); "claim": a Table 1 order
    # claim (prefix, setting, its variants, task); "deposit": the RoPE shallow-deposit claim (its setting)
    ("Does the authors' MLA learn Task 1 with more epochs?", "learns", ("authors-mla", "mla", "trigger-distance")),
    ("Does RoPE fall behind NoPE on Task 2 with the paper's data?", "claim",
     ("NoPE beats RoPE on Task 2", "paper", ("rope", "nope"), "trigger-count")),
    ("Is RoPE's largest Task 1 deposit in a shallow layer at each scale (PE-Lab `paper` arch)?", "deposit", "paper"),
    ("Is RoPE's largest Task 1 deposit in a shallow layer at each scale (the authors' transformer script)?",
     "deposit", "authors"),
)


def _learns_answer(sub: pd.DataFrame, th: Thresholds) -> str:
    """Does the cell learn at a rung, from its runs' status (`run_status`): yes / no in at least `th.min_seeds`
    seeds, in some seeds only, or cannot tell (one seed; still learning when none learned yet)."""
    k, n = int(sub.learned.sum()), len(sub)
    if k == 0 and sub.still_learning.any():
        return ANSWER_OF["inconclusive (still learning)"]
    if n < th.min_seeds:
        return ANSWER_OF["inconclusive (one seed)"] + f": seed {sub.seed.iloc[0]} {'did' if k else 'did not'} learn"
    return f"yes, in all {n} seeds" if k == n else "no" if k == 0 else f"in some seeds only ({k} of {n})"


def ladder_answers(store, runs: pd.DataFrame, rungs, th: Thresholds = Thresholds(),
                   every: pd.DataFrame | None = None) -> pd.DataFrame:
    """The questions the scale ladder was built for (LADDER_QUESTIONS), answered at each rung other than the base
    (`rungs[0]`) where their runs exist, on every seed run there and by the claims' rules (two seeds at least; one
    seed says "cannot tell (one seed)" and what it shows): the "claim" and "deposit" questions read the rung's
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
                answer = _learns_answer(sub, th)
                ev = ", ".join(f"seed {r.seed} {100 * r.test_acc:.2f} % ({r.status})" for r in sub.itertuples())
            else:
                prefix, setting, variants, task = (ROPE_SHALLOW, spec, ("rope",), "trigger-distance") \
                    if kind == "deposit" else spec
                if any(_runs(at, setting, v, task).empty for v in variants):
                    continue
                row = every[(every.rung == rung) & every.claim.str.startswith(prefix)
                            & (every.setting == setting)].iloc[0]
                answer, ev = answer_of(row["result"]), row["evidence"]
            rows.append({"question": question, "rung": rung, "answer": answer, "evidence": ev})
    return pd.DataFrame(rows, columns=["question", "rung", "answer", "evidence"])


def decodable_layers(store, runs: pd.DataFrame, min_acc: float = 0.5) -> pd.DataFrame:
    """Where the label first becomes linearly decodable: per run, the first layer whose pooled-stream label probe
    reaches `min_acc` accuracy with positive selectivity (probes table, `label_stream`); -1 = the embedded input."""
    rows = []
    for r in runs.itertuples():
        run = store.get(r.run_id)
        if "probes" not in run.tables():
            continue
        p = run.load_table("probes")
        p = p[(p["probe"] == "label_stream")].sort_values("layer")
        hit = p[(p["score"] >= min_acc) & (p["selectivity"] > 0)]
        rows.append({"setting": r.setting, "variant": r.variant, "task": r.task, "seed": r.seed,
                     "first_layer": int(hit["layer"].iloc[0]) if len(hit) else None,
                     "best_score": float(p["score"].max()) if len(p) else np.nan, "min_acc": min_acc})
    return pd.DataFrame(rows, columns=["setting", "variant", "task", "seed", "first_layer", "best_score", "min_acc"])


def thresholds_table(th: Thresholds = Thresholds(), rules: StatusRules = StatusRules()) -> pd.DataFrame:
    """The claims' thresholds and the run rules (run_status) they rest on, one row each."""
    return pd.DataFrame([{"threshold": k, "value": str(v)} for k, v in asdict(th).items()]
                        + [{"threshold": f"run: {k}", "value": str(v)} for k, v in asdict(rules).items()])


# ---- one setting at a time ------------------------------------------------------------------------------
BASE_VARIANTS = ("rope", "nope", "mla")  # Table 1's variants; tier 4 names its runs `<base>-<what changed>`
PAD_FIELDS = ("model.attn_pad_mask", "model.readout_include_pad", "model.pad_trained")  # what pads change


def _leaves(d: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A nested config section as {dotted key: leaf value} (lists kept whole; an empty dict has no leaves)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_leaves(v, f"{prefix}.{k}") if isinstance(v, dict) else {f"{prefix}.{k}": v})
    return out


def config_changes(base: dict[str, Any], other: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The fields of the model, task and train sections where `other` differs from `base`: {key: (base, other)}
    (None where a field is absent). A field added after one of the two was stored counts as the value that run
    implicitly had (`store.with_later_defaults`), not as a change."""
    from workbench.store import with_later_defaults

    a, b = ({k: v for s in ("model", "task", "train") for k, v in _leaves(c.get(s) or {}, s).items()}
            for c in map(with_later_defaults, (base, other)))
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def one_setting(store, runs: pd.DataFrame) -> pd.DataFrame:
    """Each run of the authors' settings named `<base>-<what>` (base one of BASE_VARIANTS: the tier-4 variants
    of grids/repro.toml) next to the `<base>` run of the same setting, task and seed: the fields changed (from
    the two config.json), both test accuracies and the difference. Aggregated over seeds per (setting, variant,
    task): mean difference with a Student-t 95 % interval, and whether it is beyond the baseline's seed spread
    (`seed_spread`: the range of the baseline's test accuracy over its seeds; a single-seed difference inside it
    is not an effect), and whether each side learned the task in every seed (`base_learned`, `learned`: run_status;
    a difference between two runs that both did not learn is no effect of the setting), whether the two trained
    identically in every seed (`identical`: same losses and accuracies every epoch) and whether the data has no
    pad tokens (`pad_free`) and the change touches pad fields only (`pad_only`). This traces a gap between the
    paper's numbers and PE-Lab's `paper` arch to one setting."""
    cols = ["setting", "variant", "base", "change", "task", "n_seeds", "base_acc", "acc", "delta", "delta_lo",
            "delta_hi", "seed_spread", "beyond_spread", "base_learned", "learned", "settled", "identical", "pad_free",
            "pad_only", "base_deposit", "deposit", "runs"]
    auth = runs[runs.setting.isin(("authors", "authors-mla"))]
    pairs = []
    for r in auth.itertuples():
        base = next((b for b in BASE_VARIANTS if r.variant.startswith(f"{b}-")), None)
        b = auth[(auth.variant == base) & (auth.setting == r.setting) & (auth.task == r.task) & (auth.seed == r.seed)]
        if base is None or b.empty:
            continue
        b = b.iloc[0]
        cfg = store.get(r.run_id).config
        change = config_changes(store.get(b.run_id).config, cfg)
        pairs.append({"setting": r.setting, "variant": r.variant, "base": base, "task": r.task, "seed": r.seed,
                      "change": "; ".join(f"{k}: {json_value(v0)} -> {json_value(v1)}"
                                          for k, (v0, v1) in change.items()),
                      "base_acc": b.test_acc, "acc": r.test_acc, "runs": [b.run_id, r.run_id],
                      "base_learned": bool(b.learned), "learned": bool(r.learned),
                      "settled": _row_settled(b) and _row_settled(r),
                      "identical": _same_training(store, b.run_id, r.run_id),
                      "pad_free": not _has_pads(cfg["task"]), "pad_only": set(change) <= set(PAD_FIELDS),
                      "base_deposit": _deposit_heads(store, b.run_id, r.seed),
                      "deposit": _deposit_heads(store, r.run_id, r.seed)})
    if not pairs:
        return pd.DataFrame(columns=cols)
    rows = []
    for (setting, variant, base, change, task), g in pd.DataFrame(pairs).groupby(
            ["setting", "variant", "base", "change", "task"], sort=False):
        mean, lo, hi, n = mean_ci(g["acc"] - g["base_acc"])
        seeds = auth[(auth.variant == base) & (auth.setting == setting) & (auth.task == task)].test_acc
        spread = float(seeds.max() - seeds.min()) if len(seeds) >= 2 else np.nan
        rows.append({"setting": setting, "variant": variant, "base": base, "change": change, "task": task,
                     "n_seeds": n, "base_acc": float(g["base_acc"].mean()), "acc": float(g["acc"].mean()),
                     "delta": mean, "delta_lo": lo, "delta_hi": hi, "seed_spread": spread,
                     "beyond_spread": bool(abs(mean) > spread) if np.isfinite(spread) else None,
                     "base_learned": bool(g["base_learned"].all()), "learned": bool(g["learned"].all()),
                     "settled": bool(g["settled"].all()),
                     "identical": bool(g["identical"].all()), "pad_free": bool(g["pad_free"].all()),
                     "pad_only": bool(g["pad_only"].all()),
                     "base_deposit": "; ".join(g["base_deposit"]), "deposit": "; ".join(g["deposit"]),
                     "runs": [x for rr in g["runs"] for x in rr]})
    return pd.DataFrame(rows, columns=cols).sort_values(["setting", "base", "task", "variant"], ignore_index=True)


def _same_training(store, a: str, b: str) -> bool:
    """Whether runs `a` and `b` have the same losses and accuracies in every epoch."""
    cols = ["epoch", "train_loss", "test_loss", "test_acc"]
    ma, mb = (store.get(r).metrics() for r in (a, b))
    return (len(ma) > 0 and all(c in ma and c in mb for c in cols) and len(ma) == len(mb)
            and ma[cols].reset_index(drop=True).equals(mb[cols].reset_index(drop=True)))


def _has_pads(task_cfg: dict[str, Any]) -> bool:
    """Whether a run's data has pad tokens: Task 2 has `pads_per_example` in every example; Task 1's lengths vary
    (it has no fixed count, and pads)."""
    from synthetic_tasks import spec_of_task

    return getattr(spec_of_task(task_cfg), "pads_per_example", None) != 0


def one_setting_effect(r) -> str:
    """What a row of `one_setting` can show: no effect where both runs trained identically (a pad setting on data
    without pads cannot act), nothing where neither run learned the task, else whether its difference is within
    or beyond the baseline's seed spread (a single-seed difference within it is no effect)."""
    if getattr(r, "identical", False):
        why = (" (it has no pad tokens: every example fills seq_len, so a pad setting cannot act)"
               if getattr(r, "pad_free", False) and getattr(r, "pad_only", False) else "")
        return f"identical losses and accuracies in every epoch: no effect on this data{why}"
    if not r.base_learned and not r.learned:
        return "neither run learned the task: no effect to read"
    if not getattr(r, "settled", True):
        return ("a run of the pair had not settled (its test accuracy moved >= 1 point over its last half of "
                "training): a difference between runs still learning is no effect to read")
    if r.beyond_spread is None or (isinstance(r.beyond_spread, float) and np.isnan(r.beyond_spread)):
        return "no seed spread measured"
    return (f"{'beyond' if r.beyond_spread else 'within'} the baseline's seed spread ({100 * r.seed_spread:.2f} "
            "points)")


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
                     "deposit": "; ".join(_deposit_heads(store, r.run_id, r.seed) for r in g.itertuples()),
                     "runs": list(g.run_id)})
    return pd.DataFrame(rows, columns=cols)


def partial_rope_pairs(store, runs: pd.DataFrame) -> pd.DataFrame:
    """Tier 2's partial RoPE (RoPE on the first k heads of every layer, as the authors' partial-RoPE script, or of
    one layer only, as the paper's appendix C.3; NoPE on the other heads), `paper` arch, one row per (variant,
    task): k, the RoPE layers, seeds, mean test accuracy next to full RoPE's on the same task and seeds, and both
    runs' single-head deposits per seed (layer, head, zero-ablation drop), and how many of the partial run's
    deposits sit on a head that has RoPE (head < k in a RoPE layer): does the deposit follow the rotary heads?"""
    cols = ["variant", "rope_heads", "rope_layers", "task", "n_seeds", "acc", "full_acc", "deposit",
            "deposits_on_rope_heads", "full_deposit", "runs"]
    sub, full = _partial_and_full_rope(runs)
    deps = _deposits(store, list(sub.run_id) + list(full.run_id))
    rows = []
    for (variant, task), g in sub.groupby(["variant", "task"], sort=False):
        kw = _kwargs(store.get(g.run_id.iloc[0]))
        layers, k = kw.get("rope_layers"), kw.get("rope_heads")
        base = full[(full.task == task) & full.seed.isin(g.seed)]
        on_rope = []
        for r in g.itertuples():
            if r.run_id in deps:
                d = deps[r.run_id]
                d = d[d["single_head_deposit"]]
                hit = ((k is None or d["top_head"] < k) & (d["layer"].isin(layers) if layers is not None else True))
                on_rope.append(f"seed {r.seed}: {int(hit.sum())} of {len(d)}")
        rows.append({"variant": variant, "rope_heads": kw.get("rope_heads"), "task": task, "n_seeds": len(g),
                     "rope_layers": "every" if layers is None else ", ".join(str(l) for l in layers),
                     "acc": float(g.test_acc.mean()),
                     "full_acc": float(base.test_acc.mean()) if len(base) else np.nan,
                     "deposit": "; ".join(_deposit_text(deps.get(r.run_id), r.seed) for r in g.itertuples()),
                     "deposits_on_rope_heads": "; ".join(on_rope) or "not computed yet",
                     "full_deposit": "; ".join(_deposit_text(deps.get(r.run_id), r.seed) for r in base.itertuples())
                     or "no run", "runs": list(g.run_id) + list(base.run_id)})
    if not rows:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame(rows, columns=cols).sort_values(["task", "rope_layers", "rope_heads"], ignore_index=True)


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
                                         for r in s.itertuples()) or "none")


def json_value(v: Any) -> str:
    """A config value as it reads in config.json (true/false/null, compact lists)."""
    import json

    return json.dumps(v, separators=(",", ":"))


# ---- every deposit, and the scale ladder -----------------------------------------------------------------------
def all_deposits(store, runs: pd.DataFrame) -> pd.DataFrame:
    """Every single-head deposit the spec's rule finds in `runs`, whatever claim reads them: one row per (preset,
    setting, variant, task, seed) with a deposit table, the deposits (layer, head, drop) and what the run can show.
    The preset is a column: the scale ladder's rungs are never mixed into one row."""
    cols = ["preset", "setting", "variant", "task", "seed", "status", "deposits", "run_id"]
    deps = _deposits(store, runs.run_id)
    rows = [{"preset": r.preset, "setting": r.setting, "variant": r.variant, "task": r.task, "seed": r.seed,
             "status": r.status, "deposits": _deposit_text(deps[r.run_id], r.seed).split(": ", 1)[1],
             "run_id": r.run_id} for r in runs.itertuples() if r.run_id in deps]
    return pd.DataFrame(rows, columns=cols)


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
                 "evidence": r.evidence} for r in cl.itertuples()]
    return pd.DataFrame(out, columns=["claim", "setting", "rung", "verdict", "result", "evidence"])


EVERY_COLUMNS = ["rung", "claim", "setting", "verdict", "result", "evidence", "runs"]


def every_seed_claims(store, runs: pd.DataFrame, rungs, th: Thresholds = Thresholds()) -> pd.DataFrame:
    """Every claim row at each rung other than the base (`rungs[0]`), judged once on every seed run there by the
    default rules (two seeds at least): what `rung_claims` and `ladder_answers` read. One row per (rung, claim,
    setting)."""
    out = []
    for rung in rungs[1:]:
        sub = runs[runs.preset == rung]
        if not sub.empty:
            out += [{"rung": rung, **{c: getattr(r, c) for c in EVERY_COLUMNS[1:]}}
                    for r in claims(store, sub, th).itertuples()]
    return pd.DataFrame(out, columns=EVERY_COLUMNS)


def rung_claims(store, runs: pd.DataFrame, rungs, th: Thresholds = Thresholds(), seed: int = 42,
                every: pd.DataFrame | None = None) -> pd.DataFrame:
    """The claim rows at each rung other than the base (`rungs[0]`) that rest on more seeds than `seed` alone
    (a rung where seed 42's verdict changed gets seeds 43 and 44), from `every` (`every_seed_claims`, computed
    from `store` when not given). One row per (rung, claim, setting) with the verdict and evidence."""
    every = every_seed_claims(store, runs, rungs, th) if every is None else every
    by_id = dict(zip(runs.run_id, runs.seed))
    keep = [r.verdict != "pending" and any(by_id.get(x, seed) != seed for x in r.runs) for r in every.itertuples()]
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
    on_all = {} if seeded is None else {(r.rung, r.claim, r.setting): r.verdict for r in seeded.itertuples()}
    out = []
    for r in cl.itertuples():
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
                   for o in others.itertuples() if getattr(o, col) != v0]
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


def base_claims(store, runs_all: pd.DataFrame, ladder_presets, th: Thresholds = Thresholds()) -> BaseClaims:
    """The base preset's claims and the scale ladder around them (BaseClaims), each rung's claims judged once on
    every seed (`every_seed_claims`) and read by `rung_claims` and `ladder_answers`."""
    pre = runs_all[~is_study(runs_all)]  # the seed study's runs are judged by the study alone, never pooled
    base = base_preset(pre if len(pre) else runs_all)
    runs = pre[pre.preset == base]
    rungs = ladder_rungs(base, ladder_presets)
    cl = claims(store, runs, th)
    lad = ladder(store, pre, rungs, th)
    every = every_seed_claims(store, pre, rungs, th)
    seeded = rung_claims(store, pre, rungs, th, every=every)
    cl["holds_across_scale"] = holds_across_scale(cl, lad, base, seeded) if len(cl) else pd.Series(dtype=object)
    return BaseClaims(runs_all, base, runs, cl, lad, rungs, seeded, ladder_answers(store, pre, rungs, th, every=every))


def is_study(runs: pd.DataFrame) -> pd.Series:
    """Whether each run belongs to the registered seed study (`[study]`: its training seeds or data seeds), whose
    runs are judged by the study's readouts alone and never pooled with the runs trained before the registration
    (seeds 42-44, data seed 42)."""
    study = load_registry().study
    seeds = set(study.get("train_seeds", []))  # tier 2 (phase2) trains seeds 45-51 of these
    data = set(study.get("data_seeds", []))
    ds = runs["data_seed"] if "data_seed" in runs else pd.Series(DEFAULT_DATA_SEED, index=runs.index)
    return runs["seed"].isin(seeds) | ds.isin(data)


def ladder_table1(runs: pd.DataFrame, rungs, seed: int = 42) -> pd.DataFrame:
    """Table 1's cells (setting, scheme, task) at each rung, seed `seed`: test accuracy and status per rung beside
    the paper's number; only cells run at a rung other than the base."""
    rows = []
    for setting in SETTINGS:
        for scheme in ("mla", "rope", "nope", "alibi"):
            for task in TASKS:
                cell = runs[(runs.setting == setting) & (runs.variant == scheme) & (runs.task == task)
                            & (runs.seed == seed)]
                by = {r.preset: r for r in cell.itertuples()}
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


def _status_settled(status: str) -> bool:
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
                   "cannot tell yet" if not _status_settled(status) else "does not explain")
            out.append({"setting": d["setting"], "scheme": d["scheme"], "task": d["task"], "rung": rung,
                        "base": base, "acc": acc, "paper": paper, "status": status, "closer": closer, "gap": gap})
    return pd.DataFrame(out, columns=cols)


def rung_seed_cells(runs: pd.DataFrame, rungs) -> pd.DataFrame:
    """The runs of each (rung, setting, variant, task) cell run with more than one seed at a rung other than the
    base (where seed 42's verdict changed): rung, setting, variant, task, seed, test_acc, status, run_id."""
    cols = ["rung", "setting", "variant", "task", "seed", "test_acc", "status", "run_id"]
    sub = runs[runs.preset.isin(rungs[1:])]
    if sub.empty:
        return pd.DataFrame(columns=cols)
    n = sub.groupby(["preset", "setting", "variant", "task"]).seed.transform("nunique")
    return (sub[n > 1].rename(columns={"preset": "rung"})[cols]
            .sort_values(["rung", "setting", "variant", "task", "seed"]).reset_index(drop=True))


# ---- the seed study (registry `[study]`, grids/study.toml) -----------------------------------------------------
STUDY_COLUMNS = ["group", "scheme", "train_seed", "data_seed", "status", "counted", "layer_005", "head_005",
                 "drop_005", "layer_010", "head_010", "drop_010", "largest_drop", "largest_drop_layer",
                 "largest_drop_head", "test_acc", "run_id"]


def study_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs the registered seed study reads: its preset, the `paper` arch, its task and schemes (full, not
    partial), with a `group` column: "study" for its registered training x data seeds, "pre-registration" for the
    runs trained before the registration (shown beside, never pooled into the study's decision)."""
    st = load_registry().study
    sub = runs[(runs.preset == st["preset"]) & (runs.setting == st["arch"]) & (runs.task == st["task"])
               & runs.variant.isin(st["schemes"]) & (runs.variant == runs.scheme) & ~runs.partial.astype(bool)]
    ds = sub["data_seed"] if "data_seed" in sub else pd.Series(DEFAULT_DATA_SEED, index=sub.index)
    study = sub.seed.isin(st["train_seeds"]) & ds.isin(st["data_seeds"])
    return sub.assign(group=np.where(study, "study", "pre-registration"))[study | ~is_study(sub)]


def study_table(store, runs: pd.DataFrame) -> pd.DataFrame:
    """The seed study, tidy: one row per run of `study_runs` with its group, scheme, training and data seed, what
    it can show (status; counted = learned and settled, the registered rule), its largest single-head deposit at
    each registered threshold (layer, head, drop; NaN: none) and the largest zero-ablation drop of any head (its
    layer and head), from the run's deposit and ablation tables (lean ships carry both)."""
    sub = study_runs(runs)
    th = Thresholds()
    deps = _deposits(store, sub.run_id)
    abl = _stored(store, sub.run_id, "ablation")
    counted = set(_settled(sub).run_id)
    rows = []
    for r in sub.itertuples():
        row = {"group": r.group, "scheme": r.scheme, "train_seed": int(r.seed),
               "data_seed": int(getattr(r, "data_seed", DEFAULT_DATA_SEED)), "status": r.status,
               "counted": r.run_id in counted, "test_acc": r.test_acc, "run_id": r.run_id}
        for t, tag in ((th.indispensable, "005"), (th.also, "010")):
            d = _at(deps[r.run_id], t) if r.run_id in deps else None
            s = d[d["single_head_deposit"]] if d is not None else pd.DataFrame()
            top = s.loc[s["top_delta"].idxmax()] if len(s) else None
            row[f"layer_{tag}"] = int(top.layer) if top is not None else np.nan
            row[f"head_{tag}"] = int(top.top_head) if top is not None else np.nan
            row[f"drop_{tag}"] = float(top.top_delta) if top is not None else np.nan
        top = largest_drop(abl[r.run_id]) if r.run_id in abl else None
        row["largest_drop"] = float(top.delta) if top is not None else np.nan
        row["largest_drop_layer"] = int(top.layer) if top is not None else np.nan
        row["largest_drop_head"] = int(top["head"]) if top is not None else np.nan
        rows.append(row)
    out = pd.DataFrame(rows, columns=STUDY_COLUMNS)
    return out.sort_values(["group", "scheme", "data_seed", "train_seed"], ascending=[False, False, True, True],
                           ignore_index=True)


def study_readouts(st: pd.DataFrame) -> pd.DataFrame:
    """The study's registered readouts per (group, scheme), from `study_table`: counted runs of how many; for RoPE
    the share with the largest deposit in layer 0 (deciding) and in layer <= 1, each with its Wilson interval and
    the share decision, at 0.05 (and 0.10 beside); for MLA the largest drop's distribution and the share below
    0.05 and below 0.10. The two groups are never pooled."""
    th = Thresholds()
    cols = ["group", "scheme", "runs", "counted", "rests_on", "readout", "at_005", "at_010", "decision",
            "decision_010"]
    rows = []
    for (group, scheme), g in st.groupby(["group", "scheme"], sort=False):
        c = g[g.counted]
        base = {"group": group, "scheme": scheme, "runs": len(g), "counted": len(c),
                "rests_on": seeds_text(c.rename(columns={"train_seed": "seed"}))}
        if scheme == "mla":
            reads = [("largest drop of any head < threshold", c.largest_drop < th.indispensable,
                      c.largest_drop < th.also)]
        else:
            reads = [("largest deposit in layer 0", c.layer_005 == 0, c.layer_010 == 0),
                     ("largest deposit in layer <= 1 (second reading)", c.layer_005 <= 1, c.layer_010 <= 1)]
        for name, a5, a10 in reads:
            s5, s10 = share(list(a5), th), share(list(a10), th)
            rows.append({**base, "readout": name, "at_005": s5["text"], "at_010": s10["text"],
                         "decision": s5["verdict"] + (" (few runs)" if s5["few"] and s5["n"] else ""),
                         "decision_010": s10["verdict"] + (" (few runs)" if s10["few"] and s10["n"] else "")})
        if scheme == "mla" and len(c):
            d = c.largest_drop.dropna()
            rows.append({**base, "readout": "largest drop of any head: min / median / max",
                         "at_005": (f"{d.min():.3f} / {d.median():.3f} / {d.max():.3f}" if len(d) else "no table"),
                         "at_010": "", "decision": "", "decision_010": ""})
    return pd.DataFrame(rows, columns=cols)
