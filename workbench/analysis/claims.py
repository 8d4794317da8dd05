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

from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from ._common import scheme_label, task_label
from .baselines import run_baselines
from .experiments import PAPER_TABLE1, _kwargs, final_metrics
from .run_status import StatusRules, run_status
from .settings import SETTINGS, setting_of  # noqa: F401 (the one definition of a run's setting)

STATUS_COLUMNS = ("learned", "still_learning", "diverged", "ceiling", "reference", "status", "why")

TASKS = ("trigger-distance", "trigger-count")


@dataclass(frozen=True)
class Thresholds:
    """The numbers a verdict depends on (defaults: the spec's deposit thresholds)."""

    indispensable: float = 0.05   # a head is indispensable when ablating it costs >= this much test accuracy
    overfit_gap: float = 0.05     # train - test accuracy at the end of training that counts as overfitting
    poor: float = 0.10            # "converges poorly": final test accuracy at least this far below RoPE's
    shallow_layer: int = 1        # "shallow": layer 0 or 1
    beats: float = 0.01           # "A beats B": A's test accuracy at least this much higher (paper: 4-28 points)
    min_seeds: int = 2            # a verdict rests on at least this many seeds that can show the claim (the
                                  # scale ladder reads seed 42 alone per rung, and says so: `ladder` sets 1)


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
        st = run_status(m, n_classes, float(test_bl.get("length_only", np.nan))) if len(m) else {}
        rows.append({
            "run_id": run.id, "setting": setting_of(cfg), "variant": cfg.get("tag") or cfg["model"]["scheme"],
            "scheme": cfg["model"]["scheme"], "partial": bool(kw.get("rope_heads") is not None
                                                              or kw.get("rope_layers") is not None),
            "task": cfg["task"]["task"], "seed": int(cfg["train"]["seed"]), "preset": cfg.get("preset"),
            "test_acc": fm["test_acc"], "train_acc": fm["train_acc"],
            "test_acc_epoch1": float(m["test_acc"].iloc[0]) if len(m) else np.nan,
            "test_acc_auc": float(m["test_acc"].mean()) if len(m) else np.nan,
            "epochs": int(len(m)), "wall_time_s": float(info.get("wall_time_s") or np.nan),
            "cpu_time_s": cpu_time_share(info), "threads": info.get("threads"),
            "code_version": info.get("code_version"), "cpu": (info.get("machine") or {}).get("cpu"),
            "train_acc_eval": float(m["train_acc_eval"].iloc[-1]) if "train_acc_eval" in m and len(m) else np.nan,
            "n_test": int(test_bl.get("n", 0)) or None, "chance": 1.0 / n_classes,
            "length_only": float(test_bl.get("length_only", np.nan)),
            **{k: st.get(k, np.nan if k == "reference" else False) for k in STATUS_COLUMNS},
        })
    cols = ["run_id", "setting", "variant", "scheme", "partial", "task", "seed", "preset", "test_acc", "train_acc",
            "test_acc_epoch1", "test_acc_auc", "epochs", "wall_time_s", "cpu_time_s", "threads", "code_version", "cpu",
            "train_acc_eval", "n_test", "chance", "length_only", *STATUS_COLUMNS]
    df = pd.DataFrame(rows, columns=cols).sort_values(["setting", "variant", "task", "seed"], ignore_index=True)
    df.attrs["corrupt"] = corrupt
    return df


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, lo, hi, n): Student-t interval of the mean over seeds (lo = hi = NaN for n < 2)."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return np.nan, np.nan, np.nan, 0
    if len(v) == 1:
        return float(v[0]), np.nan, np.nan, 1
    half = stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean()), float(v.mean() - half), float(v.mean() + half), len(v)


def wilson(p: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score 95 % interval of an accuracy p measured on n test examples (Wilson 1927): the test set's
    sampling error alone, for a single run."""
    if not n or not np.isfinite(p):
        return np.nan, np.nan
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


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
                             "n_seeds": n, "seeds": ", ".join(f"{a:.3f}" for a in sub["test_acc"]),
                             "status": _statuses(sub), "chance": _mean(sub, "chance"),
                             "length_only": _mean(sub, "length_only"), "runs": list(sub["run_id"])})
    return pd.DataFrame(rows, columns=["setting", "scheme", "task", "paper", "mean", "lo", "hi", "n_seeds", "seeds",
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


def _settled(sub: pd.DataFrame) -> pd.DataFrame:
    """The runs of `sub` that can show how a working model computes (deposits, heads): they learned the task
    (run_status: clearly above chance and the length-only predictor, not diverged) and were not still improving at
    their last epoch (a mechanism still forming may move with more epochs, as the authors' MLA did at repro-long)."""
    return sub[sub.learned.astype(bool) & ~sub.still_learning.astype(bool)]


def _unshown(sub: pd.DataFrame) -> str:
    """The outcome of a mechanism claim none of whose runs is `_settled`: still learning if one learned."""
    return "inconclusive (still learning)" if sub.learned.astype(bool).any() else "inconclusive (did not learn)"


def _uncounted_notes(sub: pd.DataFrame, shows: dict[str, str] | None = None,
                     label: Callable[[Any], str] = lambda r: "") -> list[str]:
    """What each run of `sub` that a mechanism claim does not count is: did not learn, or still learning (with what
    it shows, `shows[run_id]`, where the claim computed it); each note starts with `label(run row)`."""
    shows = shows or {}
    return [f"{label(r)}seed {r.seed}: {r.status} ({r.why})" if not r.learned else
            f"{label(r)}seed {r.seed}: still learning ({r.why}), not counted"
            + (f": {shows[r.run_id]}" if r.run_id in shows else "")
            for r in sub.itertuples() if not (r.learned and not r.still_learning)]


# The outcomes of a claim row. Only the first three test the paper; the others say why the runs cannot.
TESTS = ("reproduced", "mixed", "not reproduced")
# A comparison the runs cannot rank: both sides at the ceiling, or their difference within the seeds' spread.
UNRANKED = ("inconclusive (ceiling)", "inconclusive (within seed spread)")
OUTCOMES = TESTS + ("inconclusive (did not learn)", *UNRANKED, "inconclusive (still learning)",
                    "inconclusive (one seed)",
                    "not testable at this preset", "beyond the paper", "pending")
OUTCOME_RULES = {
    "reproduced": "every seed that can show it agrees with the paper",
    "mixed": "some seeds agree, some do not",
    "not reproduced": "no seed agrees, at this preset: not a refutation of the paper (its setup differs, see the "
                      "disclaimer)",
    "inconclusive (did not learn)": "the runs the claim needs did not learn the task (test accuracy below chance or "
                                    "the length-only level + 0.10) or diverged: nothing to show",
    "inconclusive (ceiling)": "both sides of a comparison are at >= 98 % in every seed: they cannot be ranked",
    "inconclusive (within seed spread)": "the two sides' mean difference is smaller than the seeds' spread (or, with "
                                         "one seed, twice the binomial standard error): it may be seed noise",
    "inconclusive (still learning)": "a run the comparison needs was still improving at its last epoch (test "
                                     "accuracy +1 point or more): more epochs may change the order; for a claim "
                                     "about deposits or heads, every run that learned was still improving: its "
                                     "mechanism may still move",
    "inconclusive (one seed)": "a single seed can show the claim (the others are not run yet or did not learn): "
                               "one seed cannot tell a finding from seed noise; the evidence says what it shows",
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


def _verdict(agree: list[bool], th: Thresholds) -> str:
    """reproduced / mixed / not reproduced from each seed's agreement; fewer than `th.min_seeds` seeds:
    inconclusive (one seed); none: pending."""
    if not agree:
        return "pending"
    if len(agree) < th.min_seeds:
        return "inconclusive (one seed)"
    return "reproduced" if all(agree) else ("mixed" if any(agree) else "not reproduced")


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


def _row(claim: str, paper: str, setting: str, verdict: str, evidence: str, run_ids,
         result: str | None = None) -> dict[str, Any]:
    """One claim row; `result`: what the seeds show (reproduced / mixed / not reproduced) where `verdict` says the
    row is not a test of the paper (beyond the paper), else the verdict itself."""
    return {"claim": claim, "paper_says": paper, "setting": setting, "verdict": verdict, "evidence": evidence,
            "runs": list(run_ids), "result": result or verdict}


def _largest(dep: pd.DataFrame) -> tuple[int | None, str]:
    """(layer, "Ll.Hh drop") of the largest single-head deposit (largest zero-ablation drop), or (None, "none")."""
    s = dep[dep["single_head_deposit"]]
    if s.empty:
        return None, "none"
    r = s.loc[s["top_delta"].idxmax()]
    return int(r.layer), f"L{int(r.layer)}.H{int(r.top_head)} {r.top_delta:.2f}"


PAPER_SIX = ("rope", "sinusoidal", "learned", "alibi", "nope", "relative")  # the paper's Figure 2 schemes (its
# "random" is a trained N(0, 1) table: PE-Lab's `learned`, docs/fidelity.md)


def _per_seed_deposit_claim(store, runs, th, claim, paper, variant, task, agrees: Callable[[pd.DataFrame], bool],
                            settings=("paper", "authors"), outcome: str | None = None) -> list[dict]:
    """One row per setting: each seed's deposit table judged by `agrees`. Only settled seeds count (`_settled`: a
    model that did not learn has nothing to deposit, one still improving may move its deposit; the evidence still
    shows a still-learning seed's deposits, marked not counted); none left: inconclusive (did not learn / still
    learning). `outcome` replaces the verdict for rows that do not test the paper (e.g. "beyond the paper")."""
    out = []
    for setting in settings:
        sub = _runs(runs, setting, variant, task)
        if sub.empty and setting != "paper":
            continue
        good = _settled(sub)
        deps = _deposits(store, _learned(sub)["run_id"])
        judged = [(r, agrees(deps[r.run_id])) for r in good.itertuples() if r.run_id in deps]
        agree = [a for _, a in judged]
        shows = {rid: _dep_shows(d) for rid, d in deps.items()}
        notes = [f"seed {r.seed}: {_dep_shows(deps[r.run_id])} ({'agrees' if a else 'does not'})"
                 for r, a in judged] + _uncounted_notes(sub, shows)
        ev = "; ".join(notes) + _waiting(good, deps, "deposit") if notes else "no finished run with a deposit table yet"
        verdict = _unshown(sub) if len(sub) and good.empty else _verdict(agree, th)
        if outcome and verdict not in ("pending",):
            verdict = outcome
        out.append(_row(claim, paper, setting, verdict, ev, sub["run_id"]))
    return out


def _ranking_claim(runs, claim, paper, scheme, rank, task="trigger-distance") -> dict:
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
                    + (f" ({have})" if have else ""), sub[sub.scheme == scheme]["run_id"])
    sub = sub[sub.seed.isin(complete)]
    notes = []
    for seed, s in sub.groupby("seed"):
        order = list(s.sort_values("test_acc_auc", ascending=False).scheme)
        notes.append(f"seed {seed}: rank {order.index(scheme) + 1} of {len(order)}"
                     f" ({'agrees' if order.index(scheme) + 1 == rank else 'does not'})")
    means = sub.groupby("scheme")["test_acc_auc"].mean().sort_values(ascending=False)
    mean_rank = list(means.index).index(scheme) + 1
    order = ", ".join(f"{scheme_label(k)} {v:.3f}" for k, v in means.items())
    ev = ("the optimiser (lr, batch, clipping) was tuned on RoPE, Task 1, seed 42 only, so the preset cannot rank "
          f"convergence speed fairly. Among the paper's six schemes, mean test accuracy over epochs (area under the "
          f"curve), seed mean: {order}; {scheme_label(scheme)} ranks {mean_rank}; " + "; ".join(notes))
    return _row(claim, paper, "paper", "not testable at this preset", ev, sub[sub.scheme == scheme]["run_id"])


ROPE_SHALLOW = "RoPE's largest single-head deposit is in a shallow layer on Task 1"


def _rope_shallow_claim(store, runs, th, settings=("paper", "authors")) -> list[dict]:
    """The paper's "one shallow head carries the bulk of positional computations" (docs/paper.md), per seed: the
    largest single-head deposit of the Task 1 RoPE run is in layer <= `th.shallow_layer`."""
    return _per_seed_deposit_claim(store, runs, th, ROPE_SHALLOW, "single-head deposit in a shallow layer", "rope",
                                   "trigger-distance",
                                   lambda d: (layer := _largest(d)[0]) is not None and layer <= th.shallow_layer,
                                   settings=settings)


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

    add(_ranking_claim(runs, "RoPE converges fastest on Task 1", "RoPE converges fastest", "rope", 1), "curves")
    add(_ranking_claim(runs, "absolute (sinusoidal) converges second on Task 1", "absolute is second",
                       "sinusoidal", 2), "curves")
    add(_absolute_heads_claim(store, runs, th), "deposits")
    add(_rope_shallow_claim(store, runs, th), "deposits")
    for scheme in ("nope", "alibi", "relative"):
        add(_per_seed_deposit_claim(
            store, runs, th, f"no deposit for {scheme_label(scheme)} on Task 1", "no deposit for NoPE, ALiBi, "
            "relative", scheme, t1, lambda d: not d["single_head_deposit"].any(),
            settings=("paper", "authors") if scheme == "nope" else ("paper",)), "deposits")
    add(_per_seed_deposit_claim(
        store, runs, th, "no deposit for RoPE on Task 2", "none for RoPE on Task 2", "rope", t2,
        lambda d: not d["single_head_deposit"].any()), "deposits")
    add(_rope_absolute_claim(store, runs, th), "deposits")
    add(_overfit_claim(runs, th), "overfit")
    add(_poor_claim(runs, th, "alibi", "ALiBi converges poorly on Task 1", "ALiBi converges poorly"), "accuracy")
    for scheme in ("nope", "relative"):
        add(_no_generalise_claim(runs, th, scheme), "accuracy")
    add(_mla_claims(store, runs, th), "deposits")
    add(_table1_order_claims(runs, th), "accuracy")
    add(_partial_rope_claim(store, runs, th), "deposits")
    add(_causal_claims(store, runs, th), "deposits")
    out = pd.DataFrame(rows, columns=["claim", "paper_says", "setting", "verdict", "evidence", "runs", "result"])
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
    return _row(claim, paper, "paper", "not testable at this preset", ev, sub.run_id)


def _absolute_heads_claim(store, runs, th) -> dict:
    """Appendix C.2 on absolute PE's ablation atlas: "some significant heads and some insignificant heads in the
    shallow layer, and the whole is oscillating". Read as: in layers 0..shallow_layer, at least two heads are
    significant (zero-ablation drop >= indispensable with its interval above 0) and at least one is not -- a
    mixture across heads, not a single-head deposit and not a uniform layer. Settled seeds only (`_settled`: learned, not still learning)."""
    claim = "absolute (sinusoidal) has both significant and insignificant heads in the shallow layers on Task 1"
    paper = "absolute: some significant and some insignificant heads in the shallow layer, oscillating"
    sub = _runs(runs, "paper", "sinusoidal", "trigger-distance")
    good = _settled(sub)
    abl = _stored(store, good["run_id"], "ablation")
    agree, notes = [], []
    for r in good.itertuples():
        if r.run_id not in abl:
            continue
        a = abl[r.run_id]
        a = a[(a["metric"] == "accuracy") & (a["layer"] <= th.shallow_layer)]
        sig = a[(a["delta"] >= th.indispensable) & (a["ci_lo"] > 0)]
        agree.append(len(sig) >= 2 and len(sig) < len(a))
        notes.append(f"seed {r.seed}: {len(sig)} of {len(a)} heads in layers 0-{th.shallow_layer} significant"
                     + (" (" + ", ".join(f"L{int(x.layer)}.H{int(x['head'])} {x.delta:.2f}"
                                         for _, x in sig.sort_values("delta", ascending=False).head(6).iterrows())
                        + (", ..." if len(sig) > 6 else "") + ")" if len(sig) else ""))
    notes += _uncounted_notes(sub)
    ev = ("; ".join(notes) + f" (significant: drop >= {th.indispensable}, interval above 0)"
          + _waiting(good, abl, "ablation")) if notes else "no finished run with an ablation table yet"
    verdict = _unshown(sub) if len(sub) and good.empty else _verdict(agree, th)
    return _row(claim, paper, "paper", verdict, ev, sub.run_id)


def _rope_absolute_claim(store, runs, th) -> dict:
    """"RoPE+absolute moves the deposit out of layer 0; it reappears from layer 1", judged against full RoPE of
    the same task and seed as the control: a seed tests the claim only when its full RoPE has a single-head
    deposit in layer 0 to move; it agrees when RoPE+absolute then has none in layer 0 and one in a later layer.
    No seed with a layer-0 deposit in full RoPE: not testable at this preset. Settled seeds only (`_settled`: learned, not still learning)."""
    claim = "RoPE+absolute moves the deposit out of layer 0 (full RoPE as the control); it reappears from layer 1"
    paper = "the deposit leaves layer 0 and reappears from layer 1"
    sub = _runs(runs, "paper", "rope+sinusoidal", "trigger-distance")
    full = _runs(runs, "paper", "rope", "trigger-distance")
    good, good_full = _settled(sub), _settled(full)
    deps = _deposits(store, list(good.run_id) + list(good_full.run_id))
    agree, notes, controls = [], [], []
    for r in good.itertuples():
        base = [b for b in good_full[good_full.seed == r.seed].run_id if b in deps]
        if r.run_id not in deps or not base:
            continue
        d, b = deps[r.run_id], deps[base[0]]
        has0 = 0 in _single_layers(b)
        controls.append(has0)
        moved = 0 not in _single_layers(d) and any(l >= 1 for l in _single_layers(d))
        if has0:
            agree.append(moved)
        notes.append(f"seed {r.seed}: full RoPE {', '.join(f'L{l}' for l in _single_layers(b)) or 'no deposit'}"
                     f" -> RoPE+absolute {', '.join(f'L{l}' for l in _single_layers(d)) or 'no deposit'}")
    notes += _uncounted_notes(sub) + [f"full RoPE {n}" for n in _uncounted_notes(full)]
    ev = "; ".join(notes) if notes else "no seed with both deposit tables yet"
    if len(sub) and good.empty:
        verdict = _unshown(sub)
    elif controls and not any(controls):
        verdict = "not testable at this preset"
        ev = "full RoPE has no single-head deposit in layer 0 to move in any seed (the control): " + ev
    else:
        verdict = _verdict(agree, th)
    return _row(claim, paper, "paper", verdict, ev, list(sub.run_id) + list(full.run_id))


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


def _comparison_outcome(win: pd.DataFrame, lose: pd.DataFrame, th) -> str | None:
    """The outcome of "`win` beats `lose`" when the runs cannot decide it (None: they can): did not learn
    (either side), ceiling (both sides >= the ceiling), within seed spread (means closer than `_seed_noise`),
    still learning (either side improving at its last epoch)."""
    if not win.learned.any() or not lose.learned.any():
        return "inconclusive (did not learn)"
    ceiling = StatusRules().ceiling
    diff = float(win.test_acc.mean() - lose.test_acc.mean())
    if (win.test_acc >= ceiling).all() and (lose.test_acc >= ceiling).all():
        return "inconclusive (ceiling)"
    if abs(diff) < _seed_noise(win, lose, th.beats):
        return "inconclusive (within seed spread)"
    if win.still_learning.any() or lose.still_learning.any():
        return "inconclusive (still learning)"
    return None


def _unranked_why(verdict: str, win: pd.DataFrame, lose: pd.DataFrame, th) -> str:
    """Why two sides cannot be ranked, for `_comparison_outcome`'s UNRANKED `verdict`: both at the ceiling, or the
    difference of their means within the seeds' spread (`_seed_noise`), with the numbers."""
    if verdict == "inconclusive (ceiling)":
        return f"cannot rank: every run at >= {StatusRules().ceiling:.2f}"
    diff = float(win.test_acc.mean() - lose.test_acc.mean())
    return f"cannot rank: the difference {diff:+.3f} is within the seeds' spread {_seed_noise(win, lose, th.beats):.3f}"


def _poor_claim(runs, th, scheme, claim, paper) -> dict:
    sub, rope = _runs(runs, "paper", scheme, "trigger-distance"), _runs(runs, "paper", "rope", "trigger-distance")
    if sub.empty or rope.empty:
        return _row(claim, paper, "paper", "pending", "runs not finished yet", [])
    rope_by_seed = dict(zip(rope.seed, rope.test_acc))
    paired = sub[sub.seed.isin(rope_by_seed)]
    if paired.empty:
        return _row(claim, paper, "paper", "pending", "no seed with both runs finished yet", sub.run_id)
    agree = [r.test_acc <= rope_by_seed[r.seed] - th.poor for r in paired.itertuples()]
    ev = "; ".join(f"seed {r.seed}: {r.test_acc:.3f} vs RoPE {rope_by_seed[r.seed]:.3f} ({r.status})"
                   for r in paired.itertuples()) + f" (needs at least {th.poor} below RoPE)"
    rope_p = rope[rope.seed.isin(paired.seed)]
    verdict = _comparison_outcome(rope_p, paired, th) or _verdict(agree, th)
    if verdict in UNRANKED:
        ev += f"; {_unranked_why(verdict, rope_p, paired, th)}"
    return _row(claim, paper, "paper", verdict, ev, sub.run_id)


def _no_generalise_claim(runs, th, scheme) -> dict:
    """"does not generalise": a seed agrees when it did not learn the task (run_status) and was not still
    improving at its last epoch (then more epochs might change it: that seed is left out)."""
    claim, paper = f"{scheme_label(scheme)} does not generalise on Task 1", "NoPE and relative do not generalise"
    sub = _runs(runs, "paper", scheme, "trigger-distance")
    if sub.empty:
        return _row(claim, paper, "paper", "pending", "runs not finished yet", [])
    settled = sub[~sub.still_learning.astype(bool)]
    agree = list(~settled.learned.astype(bool))
    ev = "; ".join(f"seed {r.seed}: {r.status} ({r.why})" for r in sub.itertuples())
    verdict = "inconclusive (still learning)" if settled.empty else _verdict(agree, th)
    return _row(claim, paper, "paper", verdict, ev, sub.run_id)


def _mla_claims(store, runs, th) -> list[dict]:
    """"MLA shows no indispensable single head", with heads actually ablated (zero and mean ablation). The paper
    claims it on Task 1; Task 2 rows are beyond the paper. Settled seeds only (`_settled`: learned, not still learning)."""
    out = []
    claim, paper = "MLA has no indispensable single head (heads ablated)", "MLA shows no indispensable single head"
    for setting in ("paper", "authors-mla", "encoder"):
        for task in TASKS:
            sub = _runs(runs, setting, "mla", task)
            if sub.empty and setting != "paper":
                continue
            good = _settled(sub)
            agree, notes, shows, top_drop = [], [], {}, {}
            ablations = _stored(store, _learned(sub)["run_id"], "ablation")
            for rid, abl in ablations.items():
                acc = abl[abl["metric"] == "accuracy"]
                top = acc.loc[acc["delta"].idxmax()]
                top_drop[rid] = top.delta
                shows[rid] = (f"largest zero-ablation drop L{int(top.layer)}.H{int(top['head'])} "
                              f"{top.delta:.3f} [{top.ci_lo:.3f}, {top.ci_hi:.3f}]")
            for r in good.itertuples():
                if r.run_id not in ablations:
                    continue
                agree.append(bool(top_drop[r.run_id] < th.indispensable))
                notes.append(f"seed {r.seed} (test acc {r.test_acc:.3f}): {shows[r.run_id]}")
            parts = (["; ".join(notes) + f" (indispensable: drop >= {th.indispensable})"] if notes else []) \
                + _uncounted_notes(sub, shows)
            ev = "; ".join(parts) + _waiting(good, ablations, "ablation") if parts \
                else "no finished run with an ablation table yet"
            verdict = _unshown(sub) if len(sub) and good.empty else _verdict(agree, th)
            result = verdict
            if task != "trigger-distance" and verdict in TESTS:
                verdict = "beyond the paper"
            out.append(_row(f"{claim}, {task_label(task)}", paper, setting, verdict, ev, sub.run_id, result))
    return out


def _table1_order_claims(runs, th) -> list[dict]:
    """The orderings Table 1 shows: MLA beats RoPE on Task 2, RoPE beats MLA on Task 1, NoPE beats RoPE on Task 2.
    Paired seeds; the runs decide only when both sides learned, are not both at the ceiling or within the seeds'
    spread, and neither was still improving (`_comparison_outcome`)."""
    out = []
    for a, b, task, text in (("mla", "rope", "trigger-count", "MLA beats RoPE on Task 2 (97.41 vs 69.43)"),
                             ("rope", "mla", "trigger-distance", "RoPE beats MLA on Task 1 (92.64 vs 88.34)"),
                             ("nope", "rope", "trigger-count", "NoPE beats RoPE on Task 2 (77.69 vs 69.43)")):
        for setting in SETTINGS:
            # the authors ran MLA in their MLA script: compare it with their transformer script's RoPE/NoPE
            sa = "authors-mla" if (setting == "authors" and a == "mla") else setting
            sb = "authors-mla" if (setting == "authors" and b == "mla") else setting
            if setting == "authors-mla":
                continue
            ra, rb = _runs(runs, sa, a, task), _runs(runs, sb, b, task)
            if ra.empty or rb.empty:
                if setting in ("paper", "authors"):
                    out.append(_row(text, "Table 1", setting, "pending", "runs not finished yet", []))
                continue
            by_b = dict(zip(rb.seed, rb.test_acc))
            pa, pb = ra[ra.seed.isin(by_b)], rb[rb.seed.isin(ra.seed)]  # seeds with both runs: a paired comparison
            agree = [r.test_acc >= by_b[r.seed] + th.beats for r in pa.itertuples()]
            where = (f"{scheme_label(a)} ({SETTINGS[sa]}) vs {scheme_label(b)} ({SETTINGS[sb]})"
                     if sa != sb else "same architecture and settings")
            status = {r.run_id: r.status for r in pd.concat([pa, pb]).itertuples()}
            la, lb = scheme_label(a), scheme_label(b)  # each number names its side: "NoPE 0.750 vs RoPE 0.672"
            ev = (f"{where}: mean over the {len(pa)} paired seed(s) {la} {pa.test_acc.mean():.3f} vs "
                  f"{lb} {pb.test_acc.mean():.3f}; per seed ({la} vs {lb}) "
                  + ", ".join(f"{r.seed}: {r.test_acc:.3f} ({status[r.run_id]}) vs {by_b[r.seed]:.3f} "
                              f"({status[pb[pb.seed == r.seed].run_id.iloc[0]]})" for r in pa.itertuples())
                  + f" (a win needs at least {th.beats} more and more than the seeds' spread)"
                  if len(pa) else "no seed with both runs finished yet")
            verdict = (_comparison_outcome(pa, pb, th) or _verdict(agree, th)) if len(pa) else "pending"
            if verdict in UNRANKED:
                ev += f"; {_unranked_why(verdict, pa, pb, th)}"
            out.append(_row(text, "Table 1", setting, verdict, ev, list(ra.run_id) + list(rb.run_id)))
    return out


def _partial_and_full_rope(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The `paper`-arch RoPE runs with RoPE on some heads only (tier 2), and full RoPE (tier 1)."""
    rope = runs[(runs.setting == "paper") & (runs.scheme == "rope")]
    return rope[rope.partial], rope[(rope.variant == "rope") & ~rope.partial]


def _partial_rope_claim(store, runs, th) -> dict:
    """Appendix C.3 of the core paper, on RoPE in only some heads: "the most significant deposit pattern is not
    necessarily in the first layer, but may be in the second or third layer. In some cases, the first layer does
    not even have a deposit pattern." Per partial-RoPE run of the `paper` arch: the layer of its largest single-head
    deposit (largest zero-ablation drop). It agrees when that layer is past layer 0 and deeper than full RoPE's
    largest deposit of the same task and seed (past layer 0 alone when full RoPE has none). "Can": one partial-RoPE
    variant (on one task) agreeing in `th.min_seeds` seeds suffices; agreeing in one seed only, or every variant
    disagreeing with fewer seeds than that: inconclusive (one seed). The evidence names the layers (0-based: the
    paper's second and third layers are 1 and 2; docs/paper.md §6 counts them from 1 as 2 and 3) and whether layer
    0 has a deposit at all."""
    claim = "partial RoPE can move the most significant deposit deeper than full RoPE's (paper: to the second or third layer)"
    paper = "the most significant deposit is not necessarily in the first layer, but may be in the second or third"
    all_sub, full = _partial_and_full_rope(runs)
    if all_sub.empty:
        return _row(claim, paper, "paper", "pending", "tier 2 of grids/repro.toml not run yet", [])
    learned, sub, full = _learned(all_sub), _settled(all_sub), _settled(full)
    deps = _deposits(store, list(learned["run_id"]) + list(full["run_id"]))

    agree, notes, seeds = {}, [], sub.groupby(["variant", "task"]).size()
    for r in learned.itertuples():
        if r.run_id not in deps:
            notes.append(f"{r.variant} {task_label(r.task)} seed {r.seed}: trained, deposit not computed yet")
            continue
        d = deps[r.run_id]
        layer, txt = _largest(d)
        base = [_largest(deps[b]) for b in full[(full.task == r.task) & (full.seed == r.seed)].run_id if b in deps]
        base_layer, base_txt = base[0] if base else (None, "not shipped")
        counted = not r.still_learning
        if counted:
            agree.setdefault((r.variant, r.task), []).append(
                layer is not None and layer >= 1 and (base_layer is None or layer > base_layer))
        notes.append(f"{r.variant} {task_label(r.task)} seed {r.seed} ("
                     + (f"test acc {r.test_acc:.3f}" if counted else f"still learning: {r.why}, not counted")
                     + "): largest "
                     f"single-head deposit {txt}, layer 0 {'has one' if 0 in _single_layers(d) else 'has none'};"
                     f" full RoPE {base_txt}")
    notes += _uncounted_notes(all_sub[~all_sub.learned.astype(bool)],
                              label=lambda r: f"{r.variant} {task_label(r.task)} ")
    if sub.empty:
        verdict = _unshown(all_sub)
    elif not agree:
        verdict = "pending"
    elif max(sum(a) for a in agree.values()) >= th.min_seeds:
        verdict = "reproduced"
    elif any(map(any, agree.values())) or seeds.max() < th.min_seeds:
        verdict = "inconclusive (one seed)"
    else:
        verdict = "not reproduced"
    return _row(claim, paper, "paper", verdict, "; ".join(notes), all_sub.run_id)


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
ANSWER_OF = {"mixed": "in some seeds only", "inconclusive (did not learn)": "cannot tell (the model did not learn)",
             "inconclusive (ceiling)": "cannot tell (both at the ceiling)",
             "inconclusive (within seed spread)": "cannot tell (within the seeds' spread)",
             "inconclusive (still learning)": "cannot tell (still learning at its last epoch)",
             "inconclusive (one seed)": "cannot tell (one seed)",
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
            "delta_hi", "seed_spread", "beyond_spread", "base_learned", "learned", "identical", "pad_free",
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
        v0 = b.verdict.iloc[0]
        changed = [f"changes at {o.rung}: {seed_verdict(v0, seed)} -> {seed_verdict(o.verdict, seed)}"
                   + (f"; on every seed run there: {on_all[(o.rung, r.claim, r.setting)]}"
                      if (o.rung, r.claim, r.setting) in on_all else "")
                   for o in others.itertuples() if o.verdict != v0]
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
    base = base_preset(runs_all)
    runs = runs_all[runs_all.preset == base]
    rungs = ladder_rungs(base, ladder_presets)
    cl = claims(store, runs, th)
    lad = ladder(store, runs_all, rungs, th)
    every = every_seed_claims(store, runs_all, rungs, th)
    seeded = rung_claims(store, runs_all, rungs, th, every=every)
    cl["holds_across_scale"] = holds_across_scale(cl, lad, base, seeded) if len(cl) else pd.Series(dtype=object)
    return BaseClaims(runs_all, base, runs, cl, lad, rungs, seeded, ladder_answers(store, runs_all, rungs, th, every=every))


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


GAP_CLOSER = 0.05  # a rung "explains" a gap to the paper when it brings the cell this much closer (5 points)


def ladder_gaps(t: pd.DataFrame, rungs) -> pd.DataFrame:
    """Per Table-1 cell and rung other than the base (`t`: `ladder_table1`): does the rung explain the cell's gap
    to the paper? `no gap` when the base is already within GAP_CLOSER of the paper (nothing to explain);
    `explains` when |base - paper| - |acc - paper| >= GAP_CLOSER; `cannot tell yet` when it does not and the run
    at the rung was still learning at its last epoch; `does not explain` otherwise. Columns: setting, scheme,
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
            gap = ("no gap" if abs(base - paper) < GAP_CLOSER else "explains" if closer >= GAP_CLOSER else
                   "cannot tell yet" if "still learning" in str(status) else "does not explain")
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
