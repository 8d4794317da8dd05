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

from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
from scipy import stats

from ._common import scheme_label, task_label
from .experiments import PAPER_TABLE1, _kwargs, final_metrics

SETTINGS = {  # setting key -> label (the order of the tables)
    "paper": "PE-Lab `paper` arch",
    "authors": "authors' transformer script",
    "authors-mla": "authors' MLA script",
    "encoder": "PE-Lab `encoder` arch",
    "decoder": "PE-Lab `decoder` arch",
}
TASKS = ("trigger-distance", "trigger-count")
TIER1 = ("nope", "sinusoidal", "learned", "random", "relative", "alibi", "rope", "rope+sinusoidal", "mla")
def _learned(sub: pd.DataFrame, th) -> pd.DataFrame:
    """The runs of `sub` that learned the task (test accuracy >= th.no_generalise): a run that did not is
    inconclusive for a claim about how a working model computes, whatever its tables say."""
    return sub[sub.test_acc >= th.no_generalise]


VERDICTS = ("reproduced", "mixed", "not reproduced", "pending")


@dataclass(frozen=True)
class Thresholds:
    """The numbers a verdict depends on (defaults: the spec's deposit thresholds)."""

    indispensable: float = 0.05   # a head is indispensable when ablating it costs >= this much test accuracy
    overfit_gap: float = 0.05     # train - test accuracy at the end of training that counts as overfitting
    poor: float = 0.10            # "converges poorly": final test accuracy at least this far below RoPE's
    no_generalise: float = 0.50   # "does not generalise": final test accuracy below this
    shallow_layer: int = 1        # "shallow": layer 0 or 1
    beats: float = 0.01           # "A beats B": A's test accuracy at least this much higher (paper: 4-28 points)


def setting_of(config: dict[str, Any]) -> str:
    """The setting a run belongs to: the authors' named fidelity settings, else its architecture."""
    fidelity = config.get("fidelity") or "pelab"
    if fidelity in ("authors", "authors-mla"):
        return fidelity
    return (config.get("model") or {}).get("arch", "paper")


def run_table(store=None, runs=None) -> pd.DataFrame:
    """One row per finished run: id, setting, variant (tag or scheme), scheme, task, seed, the final and
    epoch-1 test accuracy, the mean test accuracy over epochs (area under the learning curve), train accuracy,
    epochs, wall and CPU time, threads, code version."""
    if runs is None:
        runs = store.runs(status="finished")
    rows = []
    for run in runs:
        cfg, info = run.config, run.info
        m = run.metrics()
        fm = final_metrics(run)
        kw = _kwargs(run)
        rows.append({
            "run_id": run.id, "setting": setting_of(cfg), "variant": cfg.get("tag") or cfg["model"]["scheme"],
            "scheme": cfg["model"]["scheme"], "partial": bool(kw.get("rope_heads") is not None
                                                              or kw.get("rope_layers") is not None),
            "task": cfg["task"]["task"], "seed": int(cfg["train"]["seed"]), "preset": cfg.get("preset"),
            "test_acc": fm["test_acc"], "train_acc": fm["train_acc"],
            "test_acc_epoch1": float(m["test_acc"].iloc[0]) if len(m) else np.nan,
            "test_acc_auc": float(m["test_acc"].mean()) if len(m) else np.nan,
            "epochs": int(len(m)), "wall_time_s": float(info.get("wall_time_s") or np.nan),
            "cpu_time_s": float(info.get("cpu_time_s") or np.nan), "threads": info.get("threads"),
            "code_version": info.get("code_version"), "cpu": (info.get("machine") or {}).get("cpu"),
        })
    cols = ["run_id", "setting", "variant", "scheme", "partial", "task", "seed", "preset", "test_acc", "train_acc",
            "test_acc_epoch1", "test_acc_auc", "epochs", "wall_time_s", "cpu_time_s", "threads", "code_version", "cpu"]
    return pd.DataFrame(rows, columns=cols).sort_values(["setting", "variant", "task", "seed"], ignore_index=True)


def mean_ci(values, level: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, lo, hi, n): Student-t interval of the mean over seeds (lo = hi = NaN for n < 2)."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return np.nan, np.nan, np.nan, 0
    if len(v) == 1:
        return float(v[0]), np.nan, np.nan, 1
    half = stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return float(v.mean()), float(v.mean() - half), float(v.mean() + half), len(v)


def accuracy_ci(values) -> tuple[float, float, float, int]:
    """`mean_ci` of accuracies with the interval clipped to [0, 1], the range of an accuracy (with 2-3 seeds the
    Student-t interval can reach past it)."""
    mean, lo, hi, n = mean_ci(values)
    return (mean, max(lo, 0.0), min(hi, 1.0), n) if n > 1 else (mean, lo, hi, n)


def table1(runs: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table 1 (MLA, RoPE, NoPE; test accuracy) next to ours: one row per (setting, scheme, task).
    The Student-t interval is clipped to [0, 1], the range of an accuracy (with 2-3 seeds it can reach past it)."""
    rows = []
    for setting in SETTINGS:
        for scheme in ("mla", "rope", "nope"):
            for task in TASKS:
                sub = runs[(runs.setting == setting) & (runs.variant == scheme) & (runs.task == task)]
                mean, lo, hi, n = accuracy_ci(sub["test_acc"])
                if n == 0:
                    continue
                rows.append({"setting": setting, "scheme": scheme, "task": task,
                             "paper": PAPER_TABLE1.get((scheme, task), np.nan), "mean": mean, "lo": lo, "hi": hi,
                             "n_seeds": n, "seeds": ", ".join(f"{a:.3f}" for a in sub["test_acc"]),
                             "runs": list(sub["run_id"])})
    return pd.DataFrame(rows, columns=["setting", "scheme", "task", "paper", "mean", "lo", "hi", "n_seeds", "seeds",
                                       "runs"])


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


def _learned(sub: pd.DataFrame, th) -> pd.DataFrame:
    """The runs of `sub` that learned the task (test accuracy >= th.no_generalise): a run that did not is
    inconclusive for a claim about how a working model computes, whatever its tables say."""
    return sub[sub.test_acc >= th.no_generalise]


VERDICTS = ("reproduced", "mixed", "not reproduced", "inconclusive", "pending")


def verdict_summary(cl: pd.DataFrame) -> str:
    """'15 reproduced, 0 mixed, ...': how many claim rows got each verdict."""
    counts = cl.verdict.value_counts()
    return ", ".join(f"{int(counts.get(v, 0))} {v}" for v in VERDICTS)


def _verdict(agree: list[bool]) -> str:
    if not agree:
        return "pending"
    return "reproduced" if all(agree) else ("mixed" if any(agree) else "not reproduced")


def _single_layers(dep: pd.DataFrame) -> list[int]:
    return sorted(int(l) for l in dep.loc[dep["single_head_deposit"], "layer"])


def _dep_text(rid: str, dep: pd.DataFrame, seed: int) -> str:
    s = dep[dep["single_head_deposit"]]
    if len(s):
        parts = [f"L{int(r.layer)}.H{int(r.top_head)} {r.top_delta:.2f} [{r.top_lo:.2f}, {r.top_hi:.2f}]"
                 for r in s.itertuples()]
        return f"seed {seed}: single-head deposit " + ", ".join(parts)
    a = dep[dep["average_deposit"]]
    return f"seed {seed}: no single-head deposit" + (
        f" (average deposit at layer {', '.join(str(int(l)) for l in a['layer'])})" if len(a) else "")


def _row(claim: str, paper: str, setting: str, verdict: str, evidence: str, run_ids) -> dict[str, Any]:
    return {"claim": claim, "paper_says": paper, "setting": setting, "verdict": verdict, "evidence": evidence,
            "runs": list(run_ids)}


def _per_seed_deposit_claim(store, runs, th, claim, paper, variant, task, agrees: Callable[[pd.DataFrame], bool],
                            settings=("paper", "authors")) -> list[dict]:
    out = []
    for setting in settings:
        sub = _runs(runs, setting, variant, task)
        deps = _deposits(store, sub["run_id"])
        agree = [agrees(deps[r.run_id]) for r in sub.itertuples() if r.run_id in deps]
        ev = "; ".join(_dep_text(r.run_id, deps[r.run_id], r.seed) for r in sub.itertuples() if r.run_id in deps)
        if sub.empty and setting != "paper":
            continue
        ev = (ev + _waiting(sub, deps, "deposit")) if ev else "no finished run with a deposit table yet"
        out.append(_row(claim, paper, setting, _verdict(agree), ev, sub["run_id"]))
    return out


def _ranking_claim(runs, claim, paper, scheme, rank, task="trigger-distance") -> dict:
    """`scheme` has rank `rank` (1 = first) by the area under the test-accuracy curve among the tier-1
    `paper`-arch schemes (TIER1), per seed and on the seed mean; only seeds with all of them finished count."""
    sub = runs[(runs.setting == "paper") & (runs.task == task) & (runs.variant == runs.scheme) & ~runs.partial
               & runs.scheme.isin(TIER1)]
    complete = [seed for seed, s in sub.groupby("seed") if set(TIER1) <= set(s.scheme)]
    if not complete:
        have = ", ".join(f"seed {seed}: {len(set(s.scheme))} of {len(TIER1)}" for seed, s in sub.groupby("seed"))
        return _row(claim, paper, "paper", "pending", "needs every tier-1 scheme of a seed finished"
                    + (f" ({have})" if have else ""), sub[sub.scheme == scheme]["run_id"])
    sub = sub[sub.seed.isin(complete)]
    agree, notes = [], []
    for seed, s in sub.groupby("seed"):
        order = list(s.sort_values("test_acc_auc", ascending=False).scheme)
        if scheme in order:
            agree.append(order.index(scheme) + 1 == rank)
            notes.append(f"seed {seed}: rank {order.index(scheme) + 1} of {len(order)}")
    means = sub.groupby("scheme")["test_acc_auc"].mean().sort_values(ascending=False)
    mean_rank = list(means.index).index(scheme) + 1
    verdict = _verdict(agree)
    if verdict == "reproduced" and mean_rank != rank:  # pragma: no cover - all seeds agree implies the mean does
        verdict = "mixed"
    order = ", ".join(f"{scheme_label(k)} {v:.3f}" for k, v in means.items())
    ev = (f"mean test accuracy over epochs (area under the curve), seed mean: {order}; "
          f"{scheme_label(scheme)} ranks {mean_rank}; " + "; ".join(notes))
    return _row(claim, paper, "paper", verdict, ev, sub[sub.scheme == scheme]["run_id"])


def claims(store, runs: pd.DataFrame | None = None, th: Thresholds = Thresholds()) -> pd.DataFrame:
    """Every qualitative claim of docs/paper.md §6, one row per (claim, setting) with a verdict and evidence."""
    runs = run_table(store) if runs is None else runs
    t1, t2 = "trigger-distance", "trigger-count"
    rows: list[dict] = []
    rows.append(_ranking_claim(runs, "RoPE converges fastest on Task 1",
                               "RoPE converges fastest", "rope", 1))
    rows.append(_ranking_claim(runs, "absolute (sinusoidal) converges second on Task 1",
                               "absolute is second", "sinusoidal", 2))
    rows.append(_absolute_heads_claim(store, runs, th))
    rows += _per_seed_deposit_claim(
        store, runs, th, "RoPE has a single-head deposit in a shallow layer on Task 1",
        "single-head deposit in a shallow layer", "rope", t1,
        lambda d: any(l <= th.shallow_layer for l in _single_layers(d)))
    for scheme in ("nope", "alibi", "relative"):
        rows += _per_seed_deposit_claim(
            store, runs, th, f"no deposit for {scheme_label(scheme)} on Task 1", "no deposit for NoPE, ALiBi, "
            "relative", scheme, t1, lambda d: not d["single_head_deposit"].any(),
            settings=("paper", "authors") if scheme == "nope" else ("paper",))
    rows += _per_seed_deposit_claim(
        store, runs, th, "no deposit for RoPE on Task 2", "none for RoPE on Task 2", "rope", t2,
        lambda d: not d["single_head_deposit"].any())
    rows += _per_seed_deposit_claim(
        store, runs, th, "RoPE+absolute moves the deposit out of layer 0; it reappears from layer 1",
        "the deposit leaves layer 0 and reappears from layer 1", "rope+sinusoidal", t1,
        lambda d: 0 not in _single_layers(d) and any(l >= 1 for l in _single_layers(d)), settings=("paper",))
    rows.append(_overfit_claim(runs, th))
    rows.append(_poor_claim(runs, th, "alibi", "ALiBi converges poorly on Task 1", "ALiBi converges poorly"))
    for scheme in ("nope", "relative"):
        rows.append(_no_generalise_claim(runs, th, scheme))
    rows += _mla_claims(store, runs, th)
    rows += _table1_order_claims(runs, th)
    rows.append(_partial_rope_claim(store, runs))
    rows += _causal_claims(store, runs, th)
    return pd.DataFrame(rows, columns=["claim", "paper_says", "setting", "verdict", "evidence", "runs"])


def _overfit_claim(runs, th) -> dict:
    claim, paper = "learned / random position embeddings overfit on Task 1", "learned/\"random\" overfits"
    sub = runs[(runs.setting == "paper") & (runs.task == "trigger-distance") & runs.variant.isin(["learned", "random"])]
    rope = _runs(runs, "paper", "rope", "trigger-distance")
    if sub.empty:
        return _row(claim, paper, "paper", "pending", "runs not finished yet", [])
    gap = sub.train_acc - sub.test_acc
    rope_gap = float((rope.train_acc - rope.test_acc).mean()) if len(rope) else np.nan
    agree = list(gap >= th.overfit_gap)
    ev = "; ".join(f"{scheme_label(r.scheme)} seed {r.seed}: train {r.train_acc:.3f} vs test {r.test_acc:.3f}"
                   for r in sub.itertuples())
    ev += f" (gap threshold {th.overfit_gap}; RoPE's mean gap {rope_gap:+.3f})"
    return _row(claim, paper, "paper", _verdict(agree), ev, sub.run_id)


def _absolute_heads_claim(store, runs, th) -> dict:
    """Appendix C.2 on absolute PE's ablation atlas: "some significant heads and some insignificant heads in the
    shallow layer, and the whole is oscillating". Read as: in layers 0..shallow_layer, at least two heads are
    significant (zero-ablation drop >= indispensable with its interval above 0) and at least one is not -- a
    mixture across heads, not a single-head deposit and not a uniform layer."""
    claim = "absolute (sinusoidal) has both significant and insignificant heads in the shallow layers on Task 1"
    paper = "absolute: some significant and some insignificant heads in the shallow layer, oscillating"
    sub = _runs(runs, "paper", "sinusoidal", "trigger-distance")
    abl = _stored(store, sub["run_id"], "ablation")
    agree, notes = [], []
    for r in sub.itertuples():
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
    ev = ("; ".join(notes) + f" (significant: drop >= {th.indispensable}, interval above 0)"
          + _waiting(sub, abl, "ablation")) if notes else "no finished run with an ablation table yet"
    return _row(claim, paper, "paper", _verdict(agree), ev, sub.run_id)


def _poor_claim(runs, th, scheme, claim, paper) -> dict:
    sub, rope = _runs(runs, "paper", scheme, "trigger-distance"), _runs(runs, "paper", "rope", "trigger-distance")
    if sub.empty or rope.empty:
        return _row(claim, paper, "paper", "pending", "runs not finished yet", [])
    rope_by_seed = dict(zip(rope.seed, rope.test_acc))
    paired = sub[sub.seed.isin(rope_by_seed)]
    if paired.empty:
        return _row(claim, paper, "paper", "pending", "no seed with both runs finished yet", sub.run_id)
    agree = [r.test_acc <= rope_by_seed[r.seed] - th.poor for r in paired.itertuples()]
    ev = "; ".join(f"seed {r.seed}: {r.test_acc:.3f} vs RoPE {rope_by_seed[r.seed]:.3f}"
                   for r in paired.itertuples()) + f" (needs at least {th.poor} below RoPE)"
    return _row(claim, paper, "paper", _verdict(agree), ev, sub.run_id)


def _no_generalise_claim(runs, th, scheme) -> dict:
    claim, paper = f"{scheme_label(scheme)} does not generalise on Task 1", "NoPE and relative do not generalise"
    sub = _runs(runs, "paper", scheme, "trigger-distance")
    if sub.empty:
        return _row(claim, paper, "paper", "pending", "runs not finished yet", [])
    agree = list(sub.test_acc < th.no_generalise)
    ev = "; ".join(f"seed {r.seed}: test {r.test_acc:.3f} (train {r.train_acc:.3f})" for r in sub.itertuples())
    return _row(claim, paper, "paper", _verdict(agree), ev + f" (threshold: test accuracy < {th.no_generalise})",
                sub.run_id)


def _mla_claims(store, runs, th) -> list[dict]:
    """"MLA shows no indispensable single head", with heads actually ablated (zero and mean ablation)."""
    out = []
    claim, paper = "MLA has no indispensable single head (heads ablated)", "MLA shows no indispensable single head"
    for setting in ("paper", "authors-mla", "encoder"):
        for task in TASKS:
            sub = _runs(runs, setting, "mla", task)
            if sub.empty and setting != "paper":
                continue
            agree, notes, unlearned = [], [], []
            ablations = _stored(store, sub["run_id"], "ablation")
            for r in sub.itertuples():
                if r.test_acc < th.no_generalise:  # a model that did not learn the task has nothing to deposit
                    unlearned.append(f"seed {r.seed} did not learn the task (test acc {r.test_acc:.3f})")
                    continue
                if r.run_id not in ablations:
                    continue
                abl = ablations[r.run_id]
                acc = abl[abl["metric"] == "accuracy"]
                top = acc.loc[acc["delta"].idxmax()]
                agree.append(bool(top.delta < th.indispensable))
                notes.append(f"seed {r.seed} (test acc {r.test_acc:.3f}): largest zero-ablation drop "
                             f"L{int(top.layer)}.H{int(top['head'])} "
                             f"{top.delta:.3f} [{top.ci_lo:.3f}, {top.ci_hi:.3f}]")
            parts = (["; ".join(notes) + f" (indispensable: drop >= {th.indispensable})"] if notes else []) + unlearned
            ev = "; ".join(parts) + _waiting(_learned(sub, th), ablations, "ablation") if parts \
                else "no finished run with an ablation table yet"
            verdict = "inconclusive" if unlearned and not agree else _verdict(agree)
            out.append(_row(f"{claim}, {task_label(task)}", paper, setting, verdict, ev, sub.run_id))
    return out


def _table1_order_claims(runs, th) -> list[dict]:
    """The orderings Table 1 shows: MLA beats RoPE on Task 2, RoPE beats MLA on Task 1, NoPE beats RoPE on Task 2."""
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
            pa = ra[ra.seed.isin(by_b)]  # seeds with both runs finished: the comparison is paired
            agree = [r.test_acc >= by_b[r.seed] + th.beats for r in pa.itertuples()]
            where = (f"{scheme_label(a)} ({SETTINGS[sa]}) vs {scheme_label(b)} ({SETTINGS[sb]})"
                     if sa != sb else "same architecture and settings")
            ev = (f"{where}: mean over the {len(pa)} paired seed(s) {pa.test_acc.mean():.3f} vs "
                  f"{np.mean([by_b[x] for x in pa.seed]):.3f}; per seed "
                  + ", ".join(f"{r.seed}: {r.test_acc:.3f} vs {by_b[r.seed]:.3f}" for r in pa.itertuples())
                  + f" (a win needs at least {th.beats} more)" if len(pa) else "no seed with both runs finished yet")
            out.append(_row(text, "Table 1", setting, _verdict(agree), ev, list(ra.run_id) + list(rb.run_id)))
    return out


def _partial_and_full_rope(runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The `paper`-arch RoPE runs with RoPE on some heads only (tier 2), and full RoPE (tier 1)."""
    rope = runs[(runs.setting == "paper") & (runs.scheme == "rope")]
    return rope[rope.partial], rope[(rope.variant == "rope") & ~rope.partial]


def _partial_rope_claim(store, runs) -> dict:
    """Appendix C.3 of the core paper, on RoPE in only some heads: "the most significant deposit pattern is not
    necessarily in the first layer, but may be in the second or third layer. In some cases, the first layer does
    not even have a deposit pattern." Per partial-RoPE run of the `paper` arch: the layer of its largest single-head
    deposit (largest zero-ablation drop). It agrees when that layer is past layer 0 and deeper than full RoPE's
    largest deposit of the same task and seed (past layer 0 alone when full RoPE has none). "Can": one agreeing run
    suffices. The evidence names the layers (0-based: the paper's second and third layers are 1 and 2; docs/paper.md §6
    counts them from 1 as 2 and 3) and whether layer 0 has a deposit at all."""
    claim = "partial RoPE can move the most significant deposit deeper than full RoPE's (paper: to the second or third layer)"
    paper = "the most significant deposit is not necessarily in the first layer, but may be in the second or third"
    sub, full = _partial_and_full_rope(runs)
    if sub.empty:
        return _row(claim, paper, "paper", "pending", "tier 2 of grids/repro.toml not run yet", [])
    deps = _deposits(store, list(sub["run_id"]) + list(full["run_id"]))

    def top(dep: pd.DataFrame):
        """(layer, "Ll.Hh drop") of the largest single-head deposit, or (None, "none")."""
        s = dep[dep["single_head_deposit"]]
        if s.empty:
            return None, "none"
        r = s.loc[s["top_delta"].idxmax()]
        return int(r.layer), f"L{int(r.layer)}.H{int(r.top_head)} {r.top_delta:.2f}"

    agree, notes = [], []
    for r in sub.itertuples():
        if r.run_id not in deps:
            notes.append(f"{r.variant} {task_label(r.task)} seed {r.seed}: trained, deposit not computed yet")
            continue
        d = deps[r.run_id]
        layer, txt = top(d)
        base = [top(deps[b]) for b in full[(full.task == r.task) & (full.seed == r.seed)].run_id if b in deps]
        base_layer, base_txt = base[0] if base else (None, "not shipped")
        agree.append(layer is not None and layer >= 1 and (base_layer is None or layer > base_layer))
        notes.append(f"{r.variant} {task_label(r.task)} seed {r.seed} (test acc {r.test_acc:.3f}): largest "
                     f"single-head deposit {txt}, layer 0 {'has one' if 0 in _single_layers(d) else 'has none'};"
                     f" full RoPE {base_txt}")
    verdict = "pending" if not agree else ("reproduced" if any(agree) else "not reproduced")
    return _row(claim, paper, "paper", verdict, "; ".join(notes), sub.run_id)


def _causal_claims(store, runs, th) -> list[dict]:
    """Beyond zero-ablation (issue 14), from each run's `head_summary` table (votes of ablation, patching, probe
    and direct logit attribution): does RoPE's ablation deposit head also carry the distance, and does MLA have a
    head that two methods agree on?"""
    out = []
    claim = "RoPE's ablation deposit head also carries the distance (>= 2 methods agree), Task 1"
    for setting in ("paper", "authors"):
        sub = _runs(runs, setting, "rope", "trigger-distance")
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
        if sub.empty and setting != "paper":
            continue
        out.append(_row(claim, "one shallow head carries the bulk of positional computations", setting,
                        _verdict(agree), "; ".join(notes) + _waiting(sub, hs, "head_summary") if notes
                        else "no finished run with a head_summary table yet", sub["run_id"]))
    claim = "MLA has no head that a causal method and a second method mark as a deposit head"
    for setting in ("paper", "authors-mla"):
        for task in TASKS:
            sub = _runs(runs, setting, "mla", task)
            hs = _stored(store, sub["run_id"], "head_summary")
            agree, notes, unlearned = [], [], []
            for r in sub.itertuples():
                if r.test_acc < th.no_generalise:
                    unlearned.append(f"seed {r.seed} did not learn the task (test acc {r.test_acc:.3f})")
                    continue
                if r.run_id not in hs:
                    continue
                dep = hs[r.run_id][hs[r.run_id]["deposit_head"].astype(bool)]
                causal = dep[dep["methods"].map(_has_causal_vote)]
                agree.append(causal.empty)
                notes.append(f"seed {r.seed}: {len(dep)} heads with >= 2 votes, {len(causal)} with a causal one"
                             + (f" ({_vote_counts(dep)})" if len(dep) else ""))
            if sub.empty and setting != "paper":
                continue
            parts = notes + unlearned
            out.append(_row(f"{claim}, {task_label(task)}", "MLA shows no indispensable single head", setting,
                            "inconclusive" if unlearned and not agree else _verdict(agree),
                            "; ".join(parts) + _waiting(_learned(sub, th), hs, "head_summary") if parts
                            else "no finished run with a head_summary table yet", sub["run_id"]))
    return out


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
     "RoPE has a single-head deposit in a shallow layer on Task 1", "yes", "no", None),
    ("Does MLA's Task 2 advantage over RoPE survive when MLA runs in the same architecture as RoPE?",
     "MLA beats RoPE on Task 2", "yes", "no", ("paper", "encoder", "decoder")),
    ("Is there an indispensable head in MLA when heads are actually ablated?",
     "MLA has no indispensable single head", "no", "yes", None),
)
ANSWER_OF = {"mixed": "in some seeds only", "inconclusive": "cannot tell (the model did not learn the task)",
             "pending": "not known yet"}


def answers(cl: pd.DataFrame) -> pd.DataFrame:
    """QUESTIONS answered from the claims' verdicts: one row per (question, setting[, task]) with the answer
    (yes / no / in some seeds only / cannot tell / not known yet), the verdict and its evidence."""
    rows = []
    for question, prefix, yes, no, settings in QUESTIONS:
        sub = cl[cl.claim.str.startswith(prefix)]
        for r in (sub[sub.setting.isin(settings)] if settings else sub).itertuples():
            task = f", {r.claim.split(', ')[-1]}" if ", Task" in r.claim else ""
            rows.append({"question": question, "setting": SETTINGS.get(r.setting, r.setting) + task,
                         "answer": {"reproduced": yes, "not reproduced": no}.get(r.verdict) or ANSWER_OF[r.verdict],
                         "verdict": r.verdict, "evidence": r.evidence})
    return pd.DataFrame(rows, columns=["question", "setting", "answer", "verdict", "evidence"])


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


def thresholds_table(th: Thresholds = Thresholds()) -> pd.DataFrame:
    return pd.DataFrame([{"threshold": k, "value": str(v)} for k, v in asdict(th).items()])


# ---- one setting at a time ------------------------------------------------------------------------------
BASE_VARIANTS = ("rope", "nope", "mla")  # Table 1's variants; tier 4 names its runs `<base>-<what changed>`


def _leaves(d: dict[str, Any], prefix: str) -> dict[str, Any]:
    """A nested config section as {dotted key: leaf value} (lists kept whole; an empty dict has no leaves)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_leaves(v, f"{prefix}.{k}") if isinstance(v, dict) else {f"{prefix}.{k}": v})
    return out


def config_changes(base: dict[str, Any], other: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The fields of the model, task and train sections where `other` differs from `base`: {key: (base, other)}
    (None where a field is absent)."""
    a, b = ({k: v for s in ("model", "task", "train") for k, v in _leaves(c.get(s) or {}, s).items()}
            for c in (base, other))
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def one_setting(store, runs: pd.DataFrame) -> pd.DataFrame:
    """Each run of the authors' settings named `<base>-<what>` (base one of BASE_VARIANTS: the tier-4 variants
    of grids/repro.toml) next to the `<base>` run of the same setting, task and seed: the fields changed (from
    the two config.json), both test accuracies and the difference. Aggregated over seeds per (setting, variant,
    task): mean difference with a Student-t 95 % interval. This traces a gap between the paper's numbers and
    PE-Lab's `paper` arch to one setting."""
    cols = ["setting", "variant", "base", "change", "task", "n_seeds", "base_acc", "acc", "delta", "delta_lo",
            "delta_hi", "base_deposit", "deposit", "runs"]
    auth = runs[runs.setting.isin(("authors", "authors-mla"))]
    pairs = []
    for r in auth.itertuples():
        base = next((b for b in BASE_VARIANTS if r.variant.startswith(f"{b}-")), None)
        b = auth[(auth.variant == base) & (auth.setting == r.setting) & (auth.task == r.task) & (auth.seed == r.seed)]
        if base is None or b.empty:
            continue
        b = b.iloc[0]
        change = config_changes(store.get(b.run_id).config, store.get(r.run_id).config)
        pairs.append({"setting": r.setting, "variant": r.variant, "base": base, "task": r.task, "seed": r.seed,
                      "change": "; ".join(f"{k}: {json_value(v0)} -> {json_value(v1)}"
                                          for k, (v0, v1) in change.items()),
                      "base_acc": b.test_acc, "acc": r.test_acc, "runs": [b.run_id, r.run_id],
                      "base_deposit": _deposit_heads(store, b.run_id, r.seed),
                      "deposit": _deposit_heads(store, r.run_id, r.seed)})
    if not pairs:
        return pd.DataFrame(columns=cols)
    rows = []
    for (setting, variant, base, change, task), g in pd.DataFrame(pairs).groupby(
            ["setting", "variant", "base", "change", "task"], sort=False):
        mean, lo, hi, n = mean_ci(g["acc"] - g["base_acc"])
        rows.append({"setting": setting, "variant": variant, "base": base, "change": change, "task": task,
                     "n_seeds": n, "base_acc": float(g["base_acc"].mean()), "acc": float(g["acc"].mean()),
                     "delta": mean, "delta_lo": lo, "delta_hi": hi, "base_deposit": "; ".join(g["base_deposit"]),
                     "deposit": "; ".join(g["deposit"]), "runs": [x for rr in g["runs"] for x in rr]})
    return pd.DataFrame(rows, columns=cols).sort_values(["setting", "base", "task", "variant"], ignore_index=True)


def scheme_overview(store, runs: pd.DataFrame, setting: str = "paper") -> pd.DataFrame:
    """Every scheme run in one setting with no variant of its own (tier 1's nine and tier 3's other papers'
    schemes in the `paper` arch), one row per (scheme, task): seeds, mean test accuracy with its Student-t 95 %
    interval (clipped to [0, 1]), and the single-head deposits per seed (layer, head, zero-ablation drop)."""
    cols = ["scheme", "task", "n_seeds", "mean", "lo", "hi", "deposit", "runs"]
    sub = runs[(runs.setting == setting) & (runs.variant == runs.scheme) & ~runs.partial]
    rows = []
    for (scheme, task), g in sorted(sub.groupby(["scheme", "task"]), key=lambda kv: (kv[0][0], TASKS.index(kv[0][1]))):
        mean, lo, hi, n = accuracy_ci(g.test_acc)
        rows.append({"scheme": scheme, "task": task, "n_seeds": n, "mean": mean, "lo": lo, "hi": hi,
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
