"""Accuracy orderings and the other accuracy claims: Table 1's "A beats B" by the paired t interval over (training
seed, data seed) pairs, "does not generalise", and the claims registered as not testable at these presets
(convergence order, ALiBi converges poorly, overfitting)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..common import exact, scheme_label, tuples
from ..settings import SETTINGS
from .registry import load_registry
from .status import StatusRules
from .rules import (FEW_SEEDS, UNRANKED, share, specificity, _is_settled, _row, _runs, _seed_label, _settled,
                    _unshown, _verdict)
from .runs import DEFAULT_DATA_SEED, mean_ci, seeds_text, _rests


PAPER_SIX = ("rope", "sinusoidal", "learned", "alibi", "nope", "relative")  # the paper's Figure 2 schemes (its
# "random" is a trained N(0, 1) table: PE-Lab's `learned`, docs/fidelity.md)


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
    ev = (f"{load_registry().claim('rope-converges-fastest')['why']}. Among the paper's six schemes, mean test "
          "accuracy over epochs (area under the "
          f"curve), seed mean: {order}; {scheme_label(scheme)} ranks {mean_rank}; " + "; ".join(notes))
    return _row(claim, paper, "paper", "not testable at this preset", ev, sub[sub.scheme == scheme]["run_id"],
                claim_id=claim_id, rests_on=seeds_text(sub[sub.scheme == scheme]))


def _overfit_claim(runs, th) -> dict:
    """The registered `random-overfits`: a counted run agrees when its final train - test gap, the train accuracy
    measured after the epoch (`train_acc_eval`), is >= `th.overfit_gap` while its test accuracy is below the
    ceiling; the share rule decides; sinusoidal is the contrast. Not testable where the runs did not record
    `train_acc_eval` (the recorded train accuracy is a running mean over the epoch, biased low against the test
    accuracy measured after it) -- every run at `repro` -- and the evidence says so, with the epochs against the
    paper's 100. Version 2 (2026-12-05): a run at the ceiling is not counted, here and in the contrast (no gap >=
    0.05 can open at >= 98 %: it cannot show the claim either way); where every settled run is at the ceiling:
    inconclusive (ceiling). Where every run learned and is at the ceiling, settled or not, the row reads so first,
    whether or not its train accuracy was measured (no gap can open on this data either way)."""
    claim, paper = "learned / random position embeddings overfit on Task 1", "learned/\"random\" overfits"
    sub = runs[(runs.setting == "paper") & (runs.task == "trigger-distance") & runs.variant.isin(["learned", "random"])]
    if sub.empty:
        return _row(claim, paper, "paper", "pending", "runs not finished yet", [])
    measured = sub.train_acc_eval.notna().all()
    train = sub.train_acc_eval if measured else sub.train_acc
    at_ceiling = sub.ceiling.astype(bool).all()
    ev = (("test accuracy at the ceiling in every run: no train - test gap can open on this data; " if at_ceiling
           else "") + f"{int(sub.epochs.max())} epochs against the paper's 100, too few to overfit; overfitting is a "
          f"train - test gap >= {th.overfit_gap}; train accuracy "
          + ("measured after the last epoch" if measured else "recorded as a running mean over the last epoch "
             "(biased low)") + ": "
          + "; ".join(f"{scheme_label(r.scheme)} seed {r.seed}: train {t:.3f} vs test {r.test_acc:.3f}"
                      for r, t in zip(tuples(sub), train)))
    if at_ceiling and sub.learned.astype(bool).all():  # version 2: no run can show the claim, measured or not
        return _row(claim, paper, "paper", "inconclusive (ceiling)", ev, sub.run_id, claim_id="random-overfits",
                    rests_on=seeds_text(sub))
    if not measured:
        return _row(claim, paper, "paper", "not testable at this preset", ev, sub.run_id,
                    claim_id="random-overfits", rests_on=seeds_text(sub))
    def agrees(d):
        return list(exact(d.train_acc_eval - d.test_acc) >= th.overfit_gap)

    settled = _settled(sub)
    good = settled[~_at_ceiling(settled)]
    agree = agrees(good)
    contrast = _settled(runs[(runs.setting == "paper") & (runs.task == "trigger-distance")
                             & (runs.variant == "sinusoidal") & runs.train_acc_eval.notna()])
    contrast = contrast[~_at_ceiling(contrast)]
    extra = {"claim_id": "random-overfits", "rests_on": _rests(good, sub)}
    if agree:
        label, text = specificity(agrees(contrast), th, "sinusoidal Task 1")
        ev += f". Decision: {share(agree, th)['text']}; {text}"
        extra.update(specificity=label, few_runs=share(agree, th)["few"])
    verdict = (_unshown(sub) if settled.empty else "inconclusive (ceiling)" if good.empty
               else _verdict(agree, th))
    return _row(claim, paper, "paper", verdict, ev, sub.run_id, **extra)


def _at_ceiling(d: pd.DataFrame) -> pd.Series:
    """run_status's `ceiling` (final test accuracy >= 0.98, compared as counts: `common.exact`) of each
    run of `d`; a hand-made table without it: from its test accuracy by the same rule."""
    if "ceiling" in d:
        return d["ceiling"].astype(bool)
    return d.test_acc.map(lambda a: exact(float(a)) >= StatusRules().ceiling).astype(bool)


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
    if _at_ceiling(win).all() and _at_ceiling(lose).all():
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
                                for r, q in zip(tuples(pa), tuples(pr)))
    return _row(claim, paper, "paper", "not testable at this preset", ev, sub.run_id,
                claim_id="alibi-converges-poorly", rests_on=seeds_text(pa))


def _train_fit(r) -> str:
    """The run's training accuracy beside its test accuracy (measured after the last epoch where recorded, else the
    running mean): the paper's pattern for "does not generalise" fits the training set (NoPE at the paper's scale:
    train 42 %, test 3.9 %), a run that fitted neither agrees with the rule too, which reads test accuracy only."""
    measured = np.isfinite(r.train_acc_eval)
    acc = r.train_acc_eval if measured else r.train_acc
    return f"train acc {acc:.3f}" + ("" if measured else " (running mean)")


def clearly_not_learned(sub: pd.DataFrame) -> pd.Series:
    """Whether each run's Wilson 95 % upper bound of its test accuracy lies below the status rule's bar for learning
    (reference + learned_share x (1 - reference)): it clearly did not learn (`nope-no-generalise-t1` version 3). The
    status rule calls a run learned on the lower bound; a run between the two is neither."""
    from .status import wilson

    rules = StatusRules()
    bar = sub["reference"] + rules.learned_share * (1 - sub["reference"])
    upper = [wilson(float(a), int(n))[1] if np.isfinite(n) and n > 0 else float(a)
             for a, n in zip(sub["test_acc"], sub.get("n_test", pd.Series(np.nan, index=sub.index)).fillna(0))]
    return pd.Series(np.asarray(upper) < bar.to_numpy(), index=sub.index)


def _settled_alive(sub: pd.DataFrame) -> pd.DataFrame:
    """The runs of `sub` that settled (learned or not) and did not diverge (`nope-no-generalise-t1` version 2)."""
    return sub[_is_settled(sub) & ~sub.diverged.astype(bool)]


def no_generalise_counted(sub: pd.DataFrame) -> pd.DataFrame:
    """The runs `nope-no-generalise-t1` counts: settled and not diverged (`_settled_alive`), and either learned or
    clearly not (version 3: a run whose interval contains the bar cannot tell)."""
    settled = _settled_alive(sub)
    return settled[settled.learned.astype(bool) | clearly_not_learned(settled)]


def _no_generalise_claim(runs, th, scheme, settings=("paper",)) -> list[dict]:
    """"does not generalise" (`nope-no-generalise-t1`, whose sentence names relative too), a row per setting
    (registered: the `paper` arch and the authors' transformer script): a settled run agrees when it clearly did not
    learn the task (version 3: the Wilson upper bound of its test accuracy below the bar; between the bounds it is
    not counted) and disagrees when it learned; a run not settled is left out (more epochs might change it); the
    share rule decides; full RoPE of the same setting is the contrast (it must not "not generalise"). Version 2
    (2026-12-05): a diverged run has nothing to show (OUTCOME_RULES) and is not counted; every run diverged:
    inconclusive (did not learn)."""
    claim, paper = f"{scheme_label(scheme)} does not generalise on Task 1", "NoPE and relative do not generalise"
    out = []
    for setting in settings:
        sub = _runs(runs, setting, scheme, "trigger-distance")
        if sub.empty:
            out.append(_row(claim, paper, setting, "pending", "runs not finished yet", [],
                            claim_id="nope-no-generalise-t1"))
            continue
        settled, counted = _settled_alive(sub), no_generalise_counted(sub)
        agree = list(~counted.learned.astype(bool))
        between = set(settled.run_id) - set(counted.run_id)
        ev = "; ".join(f"seed {_seed_label(r)}: {r.status} ({r.why}; {_train_fit(r)})"
                       + (": its interval contains the bar, not counted" if r.run_id in between else "")
                       for r in tuples(sub))
        extra = {"claim_id": "nope-no-generalise-t1", "rests_on": _rests(counted, sub)}
        if agree:
            rope = no_generalise_counted(_runs(runs, setting, "rope", "trigger-distance"))  # the same rule
            label, text = specificity(list(~rope.learned.astype(bool)), th, "RoPE Task 1")
            ev += f". Decision: {share(agree, th)['text']}; {text}"
            extra.update(specificity=label, few_runs=share(agree, th)["few"])
        verdict = (("inconclusive (did not learn)" if sub.diverged.astype(bool).all() else
                    "inconclusive (still learning)") if settled.empty else
                   FEW_SEEDS if counted.empty else _verdict(agree, th))
        out.append(_row(claim, paper, setting, verdict, ev, sub.run_id, **extra))
    return out


ORDER_IDS = {("mla", "rope", "trigger-count"): "mla-beats-rope-t2", ("rope", "mla", "trigger-distance"):
             "rope-beats-mla-t1", ("nope", "rope", "trigger-count"): "nope-beats-rope-t2"}


def _table1_order_claims(runs, th) -> list[dict]:
    """The orderings Table 1 shows (registered `[decision.ordering]`): MLA beats RoPE on Task 2, RoPE beats MLA on
    Task 1, NoPE beats RoPE on Task 2, each in the settings registry.toml registers it for. Paired runs (same
    training and data seed); the status checks first
    (`_comparison_outcome`), then the Student-t 95 % interval of the mean paired difference (`_order_verdict`)."""
    out = []
    for a, b, task, text in (("mla", "rope", "trigger-count", "MLA beats RoPE on Task 2 (97.41 vs 69.43)"),
                             ("rope", "mla", "trigger-distance", "RoPE beats MLA on Task 1 (92.64 vs 88.34)"),
                             ("nope", "rope", "trigger-count", "NoPE beats RoPE on Task 2 (77.69 vs 69.43)")):
        cid = ORDER_IDS[(a, b, task)]
        registered = load_registry().claim(cid)["settings"]
        for setting in SETTINGS:
            if setting not in registered:  # judged where it was registered only (never `authors-mla`: see below)
                continue
            # the authors ran MLA in their MLA script: compare it with their transformer script's RoPE/NoPE
            sa = "authors-mla" if (setting == "authors" and a == "mla") else setting
            sb = "authors-mla" if (setting == "authors" and b == "mla") else setting
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
                                  for x, y in zip(tuples(pa), tuples(pb)))
                      + f"; {how}")
            else:
                verdict, ev = "pending", "no seed with both runs finished yet"
            if verdict in UNRANKED:
                ev += f"; {_unranked_why(verdict, pa, pb, th)}"
            out.append(_row(text, "Table 1", setting, verdict, ev, list(ra.run_id) + list(rb.run_id),
                            claim_id=cid, rests_on=seeds_text(pa)))
    return out
