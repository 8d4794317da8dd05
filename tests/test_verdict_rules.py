"""The rules of issue 21 on made-up tables: what a run can show (learned, still learning, diverged, ceiling), the
outcomes of a claim that the runs cannot decide, the control for RoPE+absolute, intervals, seed spreads, the verdict
count, the scale ladder's column and the disclaimer. Each would fail if its rule were wrong."""
import math

import numpy as np
import pandas as pd
import pytest

from workbench.analysis.claims import (ROPE_SHALLOW, Thresholds, answers, claims, holds_across_scale, ladder, one_setting,
                                       rung_claims, table1, verdict_summary, wilson)
from workbench.analysis.claims.status import StatusRules, run_status
from tests.test_repro import FakeRun, FakeStore, _deposit, _runs_frame


ONE_SEED = Thresholds(min_seeds=1)  # for rules shown on one seed's made-up tables (the default needs 2 seeds)


def curve(test, loss=1.0):
    return pd.DataFrame({"epoch": range(1, len(test) + 1), "test_acc": test, "train_acc": test,
                         "train_loss": [loss] * len(test), "test_loss": [loss] * len(test)})


# ---- what a run can show ---------------------------------------------------------------------------------------
def test_a_run_learned_when_clearly_above_chance_and_the_length_only_predictor():
    """Registered: the Wilson lower bound of the final accuracy >= reference + 0.20 x (1 - reference)."""
    assert run_status(curve([0.2, 0.37, 0.37]), 26, 0.18, n_test=6000)["learned"]          # 0.357 >= 0.344
    no = run_status(curve([0.15, 0.29, 0.29]), 26, 0.18, n_test=6000)
    assert not no["learned"] and no["status"].startswith("did not learn") and "reference 0.180" in no["why"]
    assert run_status(curve([0.1, 0.25, 0.25]), 26, n_test=6000)["learned"]  # no length-only level: chance rules
    assert not run_status(curve([0.1, 0.2, 0.2]), 26, n_test=6000)["learned"]  # 0.2 < 0.038 + 0.2 x 0.962 = 0.231
    assert not run_status(curve([0.1, 0.25, 0.25]), 26, 0.06, n_test=6000)["learned"]  # 0.25 < 0.06 + 0.188


def test_settled_reads_the_test_accuracy_over_the_last_half_of_training():
    up = run_status(curve([0.5, 0.7, 0.8]), 26, 0.18, n_test=6000)
    assert up["still_learning"] and not up["settled"] and up["status"] == "still learning"
    assert "epoch 1 -> 3: +0.300" in up["why"]
    flat = run_status(curve([0.5, 0.795, 0.8, 0.8]), 26, 0.18, n_test=6000)  # epoch 2 -> 4: +0.005 < 1 point
    assert flat["settled"] and not flat["still_learning"] and flat["status"] == "learned"
    top = run_status(curve([0.5, 0.9, 0.99]), 26, 0.18, n_test=6000)  # rising at the ceiling: not settled
    assert top["ceiling"] and not top["still_learning"] and not top["settled"]
    assert top["status"] == "ceiling, not settled"
    m = curve([0.1, 0.15, 0.16])
    m["train_acc"] = [0.1, 0.5, 0.9]  # memorising: train rises, test barely
    assert run_status(m, 26, 0.18, n_test=6000)["status"] == "did not learn, still learning"
    m["test_acc"] = [0.155, 0.155, 0.16]
    assert run_status(m, 26, 0.18, n_test=6000)["status"] == "did not learn"
    assert run_status(curve([0.9]), 26, 0.18)["settled"]  # one epoch: e0 = E (the registered rule as written)
    fell = run_status(curve([0.5, 0.9, 0.9, 0.85]), 26, 0.18, n_test=6000)  # epoch 2 -> 4: -0.05, a fall moves too
    assert not fell["settled"] and fell["status"] == "still learning"
    assert run_status(curve([0.5, 0.9, 0.9, 0.895]), 26, 0.18, n_test=6000)["settled"]  # -0.005 < 1 point
    exact = run_status(curve([0.5, 0.23, 0.6, 0.24]), 26, 0.18, n_test=6000)  # 0.24 - 0.23: exactly 1 point
    assert not exact["settled"]  # computes as 0.009999999999999981: >= 1 point read as written


def test_diverged_is_a_non_finite_or_exploding_loss():
    bound = 3 * math.log(26)
    assert run_status(curve([0.05, 0.04, 0.07], loss=2e4), 26, 0.18)["status"] == "diverged"
    assert run_status(curve([0.05, 0.04, 0.07], loss=bound + 0.1), 26, 0.18)["diverged"]
    assert not run_status(curve([0.05, 0.04, 0.07], loss=bound - 0.1), 26, 0.18)["diverged"]
    m = curve([0.3, 0.5, 0.9])
    m.loc[0, "train_loss"] = np.nan
    d = run_status(m, 26, 0.18)
    assert d["diverged"] and not d["learned"]  # a run that diverged once is not evidence of learning
    with pytest.raises(ValueError, match="at least one epoch"):
        run_status(curve([])[:0], 26)
    assert StatusRules().ceiling == 0.98


# ---- outcomes a comparison cannot decide -----------------------------------------------------------------------
def _order(mla, rope, extra=None):
    extra = extra or {}
    rows = [{"run_id": f"mla-{s}", "variant": "mla", "scheme": "mla", "task": "trigger-count", "seed": s,
             "test_acc": a, "test_acc_auc": a, **extra.get("mla", {})} for s, a in zip((42, 43, 44), mla)]
    rows += [{"run_id": f"rope-{s}", "variant": "rope", "scheme": "rope", "task": "trigger-count", "seed": s,
              "test_acc": a, "test_acc_auc": a, **extra.get("rope", {})} for s, a in zip((42, 43, 44), rope)]
    cl = claims(FakeStore([FakeRun(r["run_id"], {}) for r in rows]), _runs_frame(rows))
    return cl[cl.claim.str.startswith("MLA beats RoPE on Task 2") & (cl.setting == "paper")].iloc[0]


def test_ceilings_and_seed_noise_are_not_differences():
    top = _order([1.0, 1.0, 0.996], [0.995, 0.998, 0.984])
    assert top.verdict == "inconclusive (ceiling)" and "every run at >= 0.98" in top.evidence  # both >= 98 %
    # 2 points apart, but the seeds of one side spread over 20 points: the evidence says so, with the numbers
    noisy = _order([0.95, 0.75, 0.95], [0.85, 0.86, 0.87])
    assert noisy.verdict == "inconclusive (within seed spread)"  # not a ceiling: neither side is near 98 %
    assert "paired difference +0.023, t 95 % [-0.265, +0.311] over 3 pairs" in noisy.evidence
    # the question it answers says which of the two it is
    said = answers(pd.DataFrame([noisy, top])).set_index("verdict").answer
    assert said["inconclusive (within seed spread)"] == "cannot tell (within the seeds' spread)"
    assert said["inconclusive (ceiling)"] == "cannot tell (both at the ceiling)"
    assert _order([0.95, 0.96, 0.95], [0.85, 0.86, 0.87]).verdict == "reproduced"  # a clear, consistent gap
    assert _order([0.80, 0.81, 0.80], [0.90, 0.91, 0.90]).verdict == "not reproduced"
    # one run of each side at the ceiling is not both sides at it: a clear paired gap still decides
    assert _order([0.99, 0.95, 0.96], [0.98, 0.94, 0.95]).verdict == "reproduced"


def test_an_ordering_is_judged_only_in_the_settings_it_was_registered_for():
    """`mla-beats-rope-t2` is registered for the `paper` arch and the authors' settings: MLA and RoPE runs of Task 2
    in the encoder arch gave a row of it there too ("reproduced" on a claim nobody registered for that setting)."""
    rows = [{"run_id": f"{v}-{s}", "variant": v, "scheme": v, "task": "trigger-count", "seed": s, "setting": "encoder",
             "test_acc": a} for v, acc in (("mla", 0.95), ("rope", 0.85)) for s, a in zip((42, 43, 44),
                                                                                        (acc, acc + 0.01, acc))]
    cl = claims(FakeStore([FakeRun(r["run_id"], {}) for r in rows]), _runs_frame(rows))
    assert cl[cl.claim.str.startswith("MLA beats RoPE on Task 2") & (cl.setting == "encoder")].empty
    assert set(cl.loc[cl.claim.str.startswith("MLA beats RoPE on Task 2"), "setting"]) <= {"paper", "authors"}


def test_a_side_that_did_not_learn_or_is_still_learning_cannot_decide_an_order():
    assert _order([0.15, 0.16, 0.17], [0.9, 0.91, 0.9]).verdict == "inconclusive (did not learn)"
    still = _order([0.95, 0.96, 0.95], [0.85, 0.86, 0.87], {"rope": {"still_learning": True}})
    assert still.verdict == "inconclusive (still learning)"


def test_does_not_generalise_leaves_out_seeds_still_improving():
    rows = [{"run_id": f"rel-{s}", "variant": "relative", "scheme": "relative", "task": "trigger-distance",
             "seed": s, "test_acc": 0.22, "test_acc_auc": 0.2, "still_learning": s == 46} for s in range(42, 47)]
    cl = claims(FakeStore([]), _runs_frame(rows))
    row = cl[cl.claim == "Relative does not generalise on Task 1"].iloc[0]
    assert row.verdict == "inconclusive (specificity not shown)"  # 4 of 4 would read reproduced, but no RoPE run
    assert "4 of 4 counted runs agree" in row.evidence and "contrast RoPE Task 1: no counted run" in row.evidence
    rows = [r | {"still_learning": r["seed"] > 44} for r in rows]
    cl = claims(FakeStore([]), _runs_frame(rows))  # three seeds settled: 3 of 3 (Wilson [0.44, 1.00]) is too few
    assert cl[cl.claim == "Relative does not generalise on Task 1"].verdict.iloc[0] == "inconclusive (too few seeds)"
    rows = [r | {"still_learning": True} for r in rows]
    cl = claims(FakeStore([]), _runs_frame(rows))
    assert cl[cl.claim == "Relative does not generalise on Task 1"].verdict.iloc[0] == "inconclusive (still learning)"


# ---- claims that read the paper more strictly ------------------------------------------------------------------
def _rope_abs(full_layers, abs_layers):
    rows = [{"run_id": "rope-42", "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": 42,
             "test_acc": 1.0, "test_acc_auc": 0.9},
            {"run_id": "ra-42", "variant": "rope+sinusoidal", "scheme": "rope+sinusoidal", "task": "trigger-distance",
             "seed": 42, "test_acc": 1.0, "test_acc_auc": 0.9}]
    store = FakeStore([FakeRun("rope-42", {"deposit": _deposit(full_layers)}),
                       FakeRun("ra-42", {"deposit": _deposit(abs_layers)})])
    cl = claims(store, _runs_frame(rows), ONE_SEED)
    return cl[cl.claim.str.startswith("RoPE+absolute moves")].iloc[0]


def test_rope_absolute_is_judged_against_full_rope_as_the_control():
    assert _rope_abs([0], [1]).verdict == "reproduced"            # full RoPE in layer 0; RoPE+absolute moved it
    assert _rope_abs([0], [0, 2]).verdict == "not reproduced"     # still in layer 0
    no_control = _rope_abs([1], [2])                              # nothing in layer 0 to move
    assert no_control.verdict == "not testable at this preset" and "control" in no_control.evidence


def test_rope_absolute_with_its_control_still_learning_is_inconclusive_not_pending():
    """RoPE+absolute counted, full RoPE (the control) finished but still learning: the row read "pending" (as if
    nothing had run); it is "inconclusive (still learning)" and says why."""
    rows = [{"run_id": "rope-42", "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": 42,
             "test_acc": 0.9, "test_acc_auc": 0.9, "still_learning": True},
            {"run_id": "ra-42", "variant": "rope+sinusoidal", "scheme": "rope+sinusoidal", "task": "trigger-distance",
             "seed": 42, "test_acc": 1.0, "test_acc_auc": 0.9}]
    store = FakeStore([FakeRun("rope-42", {"deposit": _deposit([0])}), FakeRun("ra-42", {"deposit": _deposit([1])})])
    row = claims(store, _runs_frame(rows), ONE_SEED)
    row = row[row.claim.str.startswith("RoPE+absolute moves")].iloc[0]
    assert row.verdict == "inconclusive (still learning)" and "the control" in row.evidence


def test_the_largest_deposit_must_be_shallow_not_any_deposit():
    dep = _deposit([0, 3])
    dep.loc[dep.layer == 0, "top_delta"] = 0.06  # a small shallow deposit beside a large deep one
    rows = [{"run_id": "rope-42", "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": 42,
             "test_acc": 1.0, "test_acc_auc": 0.9}]
    cl = claims(FakeStore([FakeRun("rope-42", {"deposit": dep})]), _runs_frame(rows), ONE_SEED)
    assert cl[cl.claim.str.startswith("RoPE's largest")].verdict.iloc[0] == "not reproduced"


def test_overfitting_and_task2_mla_heads_are_not_counted_as_tests():
    rows = [{"run_id": "l-42", "variant": "learned", "scheme": "learned", "task": "trigger-distance", "seed": 42,
             "test_acc": 0.8, "test_acc_auc": 0.7, "train_acc": 0.99},
            {"run_id": "m-42", "variant": "mla", "scheme": "mla", "task": "trigger-count", "seed": 42,
             "test_acc": 0.99, "test_acc_auc": 0.9}]
    flat = pd.DataFrame([{"layer": 0, "head": h, "metric": "accuracy", "delta": 0.001, "ci_lo": 0, "ci_hi": 0.01}
                         for h in range(2)])
    cl = claims(FakeStore([FakeRun("l-42", {}), FakeRun("m-42", {"ablation": flat})]), _runs_frame(rows), ONE_SEED)
    over = cl[cl.claim.str.startswith("learned / random")].iloc[0]
    assert over.verdict == "not testable at this preset" and "running mean" in over.evidence
    assert "ceiling" not in over.evidence  # 0.8 on test leaves room for a gap
    top = _runs_frame([r | {"test_acc": 0.99} for r in rows[:1]])
    over = claims(FakeStore([FakeRun("l-42", {})]), top, ONE_SEED)
    over = over[over.claim.str.startswith("learned / random")].iloc[0]
    assert over.evidence.startswith("test accuracy at the ceiling in every run")
    t2 = cl[cl.claim.str.startswith("MLA has no indispensable") & cl.claim.str.endswith("Task 2")
            & (cl.setting == "paper")].iloc[0]
    assert t2.verdict == "beyond the paper" and t2.result == "reproduced"
    summary = verdict_summary(cl)
    tested = sum(cl.verdict.isin(["reproduced", "mixed", "not reproduced"]))
    own = sum(cl.claim_id.fillna("") == "")
    assert own >= 1 and summary.startswith(f"of {len(cl)} claim rows ({own} of them PE-Lab's own questions), "
                                           f"{tested} test the paper at this preset")
    assert f"{sum(cl.verdict == 'beyond the paper')} beyond the paper" in summary


def _deposit_rows(seeds, store_deps):
    rows = [{"run_id": f"rope-{s}", "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": s,
             "test_acc": 1.0, "test_acc_auc": 0.9} for s in seeds]
    return FakeStore([FakeRun(f"rope-{s}", {"deposit": _deposit(store_deps[s])}) for s in seeds]), _runs_frame(rows)


def test_one_seed_cannot_tell_and_says_what_it_shows():
    """Registered share rule (version 3): fewer than 4 counted runs, whose Wilson interval contains 1/2 whatever
    they show (1 of 1: [0.21, 1.00]), read inconclusive (too few seeds), below `min_counted` (version 1 read them
    "mixed", version 2 read one run "one seed"); the ladder's one-seed reading (ONE_SEED) says what that seed
    shows; four runs are a share."""
    from workbench.analysis.claims import answers

    store, frame = _deposit_rows([42], {42: [0]})
    cl = claims(store, frame)
    row = cl[cl.claim.str.startswith("RoPE's largest")].iloc[0]
    assert row.verdict == "inconclusive (too few seeds)" and "seed 42" in row.evidence and "(agrees)" in row.evidence
    assert "1 of 1 counted runs agree, Wilson 95 % [0.21, 1.00] (few runs)" in row.evidence
    assert claims(store, frame, ONE_SEED).set_index("claim").loc[row.claim, "verdict"] == "reproduced"
    store, frame = _deposit_rows([42, 43, 44], {42: [0], 43: [0], 44: [0]})
    assert claims(store, frame).set_index("claim").loc[row.claim, "verdict"] == "inconclusive (too few seeds)"
    store, frame = _deposit_rows(range(42, 46), {42: [0], 43: [1], 44: [0], 45: [4]})
    assert claims(store, frame).set_index("claim").loc[row.claim, "verdict"] == "mixed"  # layer 1 is not the first
    one = pd.DataFrame([{"claim": row.claim, "setting": "paper", "verdict": "inconclusive (one seed)",
                         "result": "inconclusive (one seed)", "evidence": "", "claim_id": "rope-deposit-first-layer"}])
    assert verdict_summary(one) == ("of 1 claim rows, 0 test the paper at this preset: 0 reproduced, 0 mixed, "
                                    "0 not reproduced; the other 1: 1 inconclusive (one seed)")  # not a test
    assert answers(one).answer.tolist() == ["cannot tell (one seed)"]
    few = one.assign(verdict="inconclusive (too few seeds)", result="inconclusive (too few seeds)")
    assert verdict_summary(few).endswith("the other 1: 1 inconclusive (too few seeds)")
    assert answers(few).answer.tolist() == ["cannot tell (fewer than 4 counted runs)"]


def test_a_mechanism_claim_counts_only_settled_seeds_and_shows_the_others():
    """Deposits and heads of a model still improving at its last epoch may still move (the authors' MLA grew an
    indispensable head with 4x the epochs): such a seed is shown, marked not counted; none settled: inconclusive
    (still learning); fewer than 4 settled: too few seeds."""
    def rope(still):  # seeds 42, 44 have a shallow deposit, seeds 43, 45 a deep one
        store, frame = _deposit_rows(range(42, 46), {42: [0], 43: [3], 44: [0], 45: [3]})
        frame["still_learning"] = frame.seed.isin(still)
        frame["settled"] = ~frame.still_learning
        frame.loc[frame.still_learning, ["ceiling", "status", "test_acc", "why"]] = [
            False, "still learning", 0.9, "test acc 0.900; epoch 1 -> 3: +0.050"]
        row = claims(store, frame).set_index("claim").loc[ROPE_SHALLOW]
        return row.iloc[0] if isinstance(row, pd.DataFrame) else row

    assert rope(set()).verdict == "mixed"  # all settled: two agree, two do not
    both = rope({42, 43, 44, 45})
    assert both.verdict == "inconclusive (still learning)"
    assert ("seed 43: not settled (test acc 0.900; epoch 1 -> 3: +0.050), not counted: single-head deposit L3.H3 0.40"
            in both.evidence)
    one = rope({43, 44, 45})  # only seed 42 counts: 1 of 1, too few seeds
    assert one.verdict == "inconclusive (too few seeds)" and "seed 42: single-head deposit L0.H3" in one.evidence
    assert "1 of 1 counted runs agree" in one.evidence
    # a model that did not learn is still "did not learn", not "still learning"
    store, frame = _deposit_rows([42, 43], {42: [0], 43: [0]})
    frame[["learned", "still_learning", "settled", "status"]] = [False, True, False, "did not learn, still learning"]
    row = claims(store, frame).set_index("claim").loc[ROPE_SHALLOW]
    assert (row.iloc[0] if isinstance(row, pd.DataFrame) else row).verdict == "inconclusive (did not learn)"


def test_partial_rope_is_decided_by_the_share_of_counted_runs_not_by_one_cell():
    def partial(agreeing_seeds, seeds=(42, 43), still=False):
        rows, runs = [], []
        for s in seeds:
            rows += [{"run_id": f"rope-{s}", "variant": "rope", "scheme": "rope", "task": "trigger-distance",
                      "seed": s, "test_acc": 1.0, "test_acc_auc": 0.9},
                     {"run_id": f"k1-{s}", "variant": "rope-k1-all", "scheme": "rope", "task": "trigger-distance",
                      "partial": True, "seed": s, "test_acc": 0.9, "test_acc_auc": 0.8, "still_learning": still}]
            runs += [FakeRun(f"rope-{s}", {"deposit": _deposit([0])}),
                     FakeRun(f"k1-{s}", {"deposit": _deposit([2] if s in agreeing_seeds else [0])})]
        cl = claims(FakeStore(runs), _runs_frame(rows))
        return cl[cl.claim.str.startswith("partial RoPE")].verdict.iloc[0]

    seeds = tuple(range(42, 52))
    assert partial(set(seeds), seeds) == "reproduced"        # 10 of 10 in layer 2: [0.72, 1.00]
    assert partial({42, 43}) == "inconclusive (too few seeds)"  # 2 of 2: [0.34, 1.00] whatever they show
    assert partial({42, 43}, seeds[:4]) == "mixed"           # 2 of 4 (few runs): [0.15, 0.85]
    assert partial(set(), seeds) == "not reproduced"         # 0 of 10
    assert partial({42, 43}, still=True) == "inconclusive (still learning)"  # moved, but not settled: not counted


# ---- intervals and spreads -------------------------------------------------------------------------------------
def test_one_seed_gets_a_wilson_interval_and_several_the_seeds_range():
    lo, hi = wilson(0.9, 100)
    assert lo == pytest.approx(0.8256, abs=1e-3) and hi == pytest.approx(0.9448, abs=1e-3)  # Wilson 1927, z = 1.96
    assert wilson(1.0, 6000)[1] == 1.0 and wilson(1.0, 6000)[0] < 1.0  # never [100, 100]
    one = table1(_runs_frame([{"run_id": "r", "variant": "rope", "scheme": "rope", "task": "trigger-distance",
                               "seed": 42, "test_acc": 1.0, "test_acc_auc": 1}])).iloc[0]
    assert one.n_seeds == 1 and one.hi == 1.0 and 0.999 < one.lo < 1.0
    three = table1(_runs_frame([{"run_id": f"r{s}", "variant": "rope", "scheme": "rope", "task": "trigger-count",
                                 "seed": s, "test_acc": a, "test_acc_auc": a}
                                for s, a in ((42, 0.799), (43, 0.942), (44, 0.97))])).iloc[0]
    assert (three.lo, three.hi) == (0.799, 0.97)  # no t interval reaching 113 %


def test_single_seed_changes_are_marked_within_or_beyond_the_baseline_spread():
    class Cfg(FakeRun):
        def __init__(self, rid, cfg):
            super().__init__(rid, {})
            self.config = cfg
    base_cfg = {"model": {"final_ln": "none"}, "task": {"task": "trigger-distance"}, "train": {}}
    rows = [{"run_id": f"b{s}", "variant": "rope", "scheme": "rope+sinusoidal", "setting": "authors",
             "task": "trigger-distance", "seed": s, "test_acc": a, "test_acc_auc": a}
            for s, a in ((42, 0.9165), (43, 0.8973), (44, 0.9102))]
    rows += [{"run_id": "small", "variant": "rope-no-sinusoid", "scheme": "rope", "setting": "authors",
              "task": "trigger-distance", "seed": 42, "test_acc": 0.8988, "test_acc_auc": 0.8},
             {"run_id": "big", "variant": "rope-final-ln", "scheme": "rope", "setting": "authors",
              "task": "trigger-distance", "seed": 42, "test_acc": 0.6108, "test_acc_auc": 0.5}]
    store = FakeStore([Cfg(r["run_id"], base_cfg if r["run_id"].startswith("b") else
                           {"model": {"final_ln": "after_pool"}, "task": {"task": "trigger-distance"}, "train": {}}) for r in rows])
    d = one_setting(store, _runs_frame(rows)).set_index("variant")
    assert not d.loc["rope-no-sinusoid", "beyond_spread"]  # -1.77 points inside a 1.92-point seed range
    assert d.loc["rope-final-ln", "beyond_spread"]
    assert d.loc["rope-final-ln", "seed_spread"] == pytest.approx(0.9165 - 0.8973)
    from workbench.analysis.claims import one_setting_effect

    rows = d.reset_index()
    assert one_setting_effect(next(rows.itertuples())).startswith(("within", "beyond"))
    # two runs that did not learn (the authors' MLA at 14.27 -> 15.48 %): a difference, but no effect of the setting
    low = [dict(r, test_acc=a, test_acc_auc=a) for r, a in zip(
        [{"run_id": f"b{s}", "variant": "mla", "scheme": "mla", "setting": "authors-mla", "task": "trigger-distance",
          "seed": s} for s in (42, 43, 44)] + [{"run_id": "rot", "variant": "mla-true-rotation", "scheme": "mla",
                                                 "setting": "authors-mla", "task": "trigger-distance", "seed": 42}],
        (0.1427, 0.1565, 0.1907, 0.1548))]
    store = FakeStore([Cfg(r["run_id"], base_cfg if r["run_id"].startswith("b") else
                           {"model": {"final_ln": "after_pool"}, "task": {"task": "trigger-distance"}, "train": {}}) for r in low])
    row = next(one_setting(store, _runs_frame(low)).itertuples())
    assert not row.base_learned and not row.learned
    assert one_setting_effect(row) == "neither run learned the task: no effect to read"
    from workbench.report.comparison import one_setting_lines

    assert "neither run learned the task" in "\n".join(one_setting_lines(one_setting(store, _runs_frame(low))))


# ---- the scale ladder ------------------------------------------------------------------------------------------
def test_holds_across_scale_compares_each_rung_with_the_base_at_seed_42():
    def rows(preset, nope_acc):
        return [{"run_id": f"{preset}-n", "variant": "nope", "scheme": "nope", "task": "trigger-distance",
                 "seed": 42, "test_acc": nope_acc, "test_acc_auc": nope_acc, "preset": preset},
                {"run_id": f"{preset}-n43", "variant": "nope", "scheme": "nope", "task": "trigger-distance",
                 "seed": 43, "test_acc": 0.95, "test_acc_auc": 0.9, "preset": preset}]
    frame = _runs_frame(rows("repro", 0.15) + rows("repro-long", 0.95))
    store = FakeStore([FakeRun(r, {}) for r in frame.run_id])
    lad = ladder(store, frame, ("repro", "repro-long", "repro-wide"))
    assert set(lad.rung) == {"repro", "repro-long"}  # a rung with no run is left out
    base = claims(store, frame[frame.preset == "repro"])
    col = holds_across_scale(base, lad, "repro")
    row = base.index[base.claim == "NoPE does not generalise on Task 1"][0]
    # seed 42 learns with 4x the epochs; each side is one seed's, so it never reads "reproduced"
    assert col[row] == ("changes at repro-long: seed 42 agrees with the paper -> seed 42 does not agree with the "
                        "paper")
    assert set(col) >= {"not run at other rungs yet"}
    assert not any("reproduced" in c for c in col)
    # a verdict that stays is named: "unchanged" must not read as "the claim holds" when it stays a disagreement
    wide = _runs_frame(rows("repro", 0.15) + rows("repro-wide", 0.16))
    wide_store = FakeStore([FakeRun(r, {}) for r in wide.run_id])
    same = holds_across_scale(base, ladder(wide_store, wide, ("repro", "repro-wide")), "repro")
    assert same[row] == "unchanged at every rung run (repro-wide): seed 42 agrees with the paper"
    # the rung run with seeds 42 and 43: their verdict on both follows the seed-42 change
    seeded = rung_claims(store, frame, ("repro", "repro-long"))
    col = holds_across_scale(base, lad, "repro", seeded)
    assert col[row].endswith("; on every seed run there: inconclusive (too few seeds)")  # 0 of 2: [0, 0.66]
    with pytest.raises(ValueError, match="span presets"):
        claims(store, frame)  # claims compare settings of one preset, never scales


def test_the_disclaimer_states_the_presets_scale_from_its_config():
    from workbench.train.presets import PRESETS, scale_disclaimer

    text = scale_disclaimer("repro")
    assert text.startswith("> **Read this first: results at the `repro` preset")
    assert "d_model 128 / d_ff 256 (paper 256 / 512)" in text and "3 epochs (paper 100)" in text
    assert "0.6 % of the paper's 7,000,000" in text  # 14,000 train x 3 epochs against 70,000 x 100
    assert "48 tokens in 48 positions (0 pads an example; paper 120 in 128: 8)" in text  # Task 2 has no pads here
    assert "not a refutation" in text and "tuned on RoPE, Task 1" in text
    long = scale_disclaimer("repro-long")
    assert "12 epochs (paper 100)" in long and "2.4 %" in long
    assert "72 labels" in scale_disclaimer("repro-paperdata")
    assert set(PRESETS) >= {"repro-long", "repro-wide", "repro-paperdata"}
    with pytest.raises(ValueError, match="unknown preset"):
        scale_disclaimer("huge")
    gpu = scale_disclaimer("paper")  # the paper's own setup: no "but" of sizes, no optimiser tuned on RoPE
    assert gpu.startswith("> **Read this first: results at the `paper` preset: the paper's model, data")
    assert "100.0 % of the paper's 7,000,000" in gpu and "150 epochs like the paper" in gpu
    assert "tuned on RoPE" not in gpu and "bf16 autocast" in gpu and "(few runs)" in gpu
    assert "(paper " not in gpu  # nothing of the paper's setup is set against itself


def test_the_disclaimer_calls_like_the_paper_only_what_is_and_says_how_each_optimiser_was_chosen():
    """The model line names "like the paper" only what matches it (the `cpu` and `smoke` presets have fewer layers
    and heads than the paper; `repro-wide` has its width), what matches is not set against itself ("256 / 512 (paper
    256 / 512)"), a smoke run's tiny share of the paper's data does not round to 0.0 %, and each preset says how its
    optimiser was chosen."""
    from workbench.train.presets import disclaimer, scale_disclaimer

    cpu = disclaimer("cpu")
    assert cpu.lead.startswith("4 layers x 8 heads (paper 6 x 16), d_model 64 / d_ff 128 (paper 256 / 512)")
    assert "like the paper" not in cpu.lead and "NoPE stays near chance" in scale_disclaimer("cpu")
    assert "seed 42 only" not in scale_disclaimer("cpu")  # the repro preset's tuning, not the cpu preset's
    smoke = scale_disclaimer("smoke")
    assert "2 layers x 4 heads (paper 6 x 16)" in smoke and "0.04 % of the paper's 7,000,000" in smoke
    assert "not tuned" in smoke and "tuned on RoPE" not in smoke
    wide = disclaimer("repro-wide")
    assert wide.lead.startswith("6 layers x 16 heads, d_model 256 / d_ff 512 like the paper, but dropout 0.0")
    assert "(paper 256 / 512)" not in wide.lead and "tuned on RoPE, Task 1, seed 42" in scale_disclaimer("repro-wide")
    data = scale_disclaimer("repro-paperdata")
    assert ("Task 1: 72 labels, up to 120 tokens in 128 positions, vocab 574 like the paper; 3 epochs (paper 100)"
            in data)
    assert "120 tokens in 128 positions (8 pads an example), vocab 574 like the paper" in data
    assert "(paper 72)" not in data and "(paper 574)" not in data
    assert scale_disclaimer("repro") == disclaimer("repro").markdown()
    assert disclaimer("repro").lead.startswith("6 layers x 16 heads like the paper, but d_model 128 / d_ff 256")


def test_the_ladder_grid_runs_every_deciding_setting_at_each_rung():
    from workbench.train.presets import LADDER
    from workbench.train.sweep import grid_points, load_grid

    points = grid_points(load_grid("grids/ladder.toml"))
    assert {p["preset"] for p in points} == set(LADDER[1:])
    for rung in ("repro-long", "repro-wide", "repro-paperdata"):
        at = [(p["fidelity"], p["tag"], p["task"]) for p in points if p["preset"] == rung and p["seed"] == 42]
        assert len(at) == 13 and ("authors-mla", "mla", "trigger-distance") in at
        assert ("pelab", "alibi", "trigger-distance") in at and ("pelab", "alibi", "trigger-count") not in at
    # seeds 43 and 44 only where seed 42's verdict changed: the authors' MLA, ALiBi, the authors' RoPE and PE-Lab's
    # RoPE on Task 1 at repro-long, PE-Lab's RoPE on Task 1 at repro-wide, RoPE and NoPE on Task 2 and RoPE on Task 1
    # at repro-paperdata-long
    extra = {(p["preset"], p["fidelity"], p["tag"] or p["scheme"], p["task"], p["seed"]) for p in points
             if p["seed"] != 42}
    assert extra == {("repro-long", f, v, "trigger-distance", s) for f, v in
                     (("authors-mla", "mla"), ("pelab", "alibi"), ("authors", "rope"), ("pelab", "rope"))
                     for s in (43, 44)} | {("repro-wide", "pelab", "rope", "trigger-distance", s) for s in (43, 44)} | {
        ("repro-paperdata-long", "pelab", v, t, s) for v, t in (("rope", "trigger-count"), ("nope", "trigger-count"),
                                                                ("rope", "trigger-distance")) for s in (43, 44)}
    # the questions repro-paperdata left open (still learning): RoPE and NoPE on both tasks with 4x the epochs
    longer = {(p["tag"] or p["scheme"], p["task"]) for p in points if p["preset"] == "repro-paperdata-long"}
    assert longer == {(v, t) for v in ("rope", "nope") for t in ("trigger-count", "trigger-distance")}
    with pytest.raises(ValueError, match="unknown keys"):
        grid_points({"presetz": ["repro"]})


def test_the_ladder_section_reads_table1_cells_per_rung_and_says_what_a_rung_explains():
    from workbench.report.comparison import _ladder_section

    rows = [{"run_id": f"{p}-mla", "variant": "mla", "scheme": "mla", "setting": "authors-mla",
             "task": "trigger-distance", "seed": 42, "test_acc": a, "test_acc_auc": a, "preset": p}
            for p, a in (("repro", 0.1427), ("repro-long", 0.8028))]
    frame = _runs_frame(rows)
    store = FakeStore([FakeRun(r, {}) for r in frame.run_id])
    rungs = ("repro", "repro-long", "repro-wide")
    text = _ladder_section(frame, ladder(store, frame, rungs), rungs)
    assert "| authors' MLA script | MLA | Task 1 | 88.34 | 14.27 (did not learn) | 80.28 (learned) | – |" in text
    assert "- authors' MLA script MLA Task 1 at repro-long: 14.27 -> 80.28 (paper 88.34)" in text  # 74 points closer
    assert "No run of the ladder" in _ladder_section(frame[frame.preset == "repro"], ladder(store, frame, rungs[:1]),
                                                     rungs)
    # a rung whose run is still learning and not closer to the paper cannot tell yet; settled, it does not explain
    rows = [{"run_id": f"{p}-rope", "variant": "rope", "scheme": "rope", "setting": "paper", "task": "trigger-count",
             "seed": 42, "test_acc": a, "test_acc_auc": a, "preset": p, "still_learning": still, "learned": True,
             "reference": 0.05}
            for p, a, still in (("repro", 0.9948, False), ("repro-paperdata", 0.2374, True))]
    frame = _runs_frame(rows)
    store = FakeStore([FakeRun(r, {}) for r in frame.run_id])
    rungs = ("repro", "repro-paperdata")
    text = _ladder_section(frame, ladder(store, frame, rungs), rungs)
    undecided = text.split("Cannot tell yet")[1]
    assert "PE-Lab `paper` arch RoPE Task 2 at repro-paperdata: 99.48 -> 23.74 (paper 69.43)" in undecided
    assert "- none" in text.split("Differences it does not explain")[1].split("Cannot tell yet")[0]
    frame.loc[frame.preset == "repro-paperdata", ["still_learning", "status"]] = [False, "learned"]
    text = _ladder_section(frame, ladder(store, frame, rungs), rungs)
    assert "Cannot tell yet" not in text and "at repro-paperdata: 99.48 -> 23.74" in text


def test_a_rung_run_with_more_seeds_is_judged_on_all_of_them():
    from workbench.report.comparison import _ladder_section

    rows = [{"run_id": f"{p}-n{s}", "variant": "nope", "scheme": "nope", "task": "trigger-distance", "seed": s,
             "test_acc": a, "test_acc_auc": a, "preset": p}
            for p, s, a in (("repro", 42, 0.15), ("repro", 43, 0.15), ("repro-long", 42, 0.95),
                            ("repro-long", 43, 0.90), ("repro-wide", 42, 0.95))]
    frame = _runs_frame(rows)
    store = FakeStore([FakeRun(r, {}) for r in frame.run_id])
    rungs = ("repro", "repro-long", "repro-wide")
    seeded = rung_claims(store, frame, rungs)
    assert set(seeded.rung) == {"repro-long"}  # repro-wide has seed 42 alone: the ladder's seed-42 rows say it
    row = seeded[seeded.claim == "NoPE does not generalise on Task 1"].iloc[0]
    assert row.verdict == "inconclusive (too few seeds)" and "seed 43" in row.evidence  # both learned it: 0 of 2
    text = _ladder_section(frame, ladder(store, frame, rungs), rungs, seeded)
    assert "NoPE Task 1 at `repro-long`: seed 42 95.00 (learned), seed 43 90.00 (learned)" in text
    assert ("| `repro-long` | NoPE does not generalise on Task 1 | PE-Lab `paper` arch | *inconclusive (too few "
            "seeds)* |") in text


def test_each_rungs_claims_are_judged_once_on_every_seed(monkeypatch):
    """base_claims judges the claims of each rung on every seed once (`every_seed_claims`) and lets `rung_claims` and
    the ladder's questions read them: the base once by the claims' rules, each rung (the base too) once for seed 42
    alone (`ladder`, one seed's rules) and each other rung once on all its seeds; the answers equal those judged
    on their own."""
    from workbench.analysis.claims import base_claims, ladder_answers
    from workbench.analysis.claims import scale_ladder as claims_mod  # where base_claims looks `claims` up

    rows = [{"run_id": f"{p}-{v}{s}", "variant": v, "scheme": v, "task": "trigger-count", "seed": s,
             "test_acc": a, "test_acc_auc": a, "preset": p}
            for p, v, s, a in (("repro", "rope", 42, 0.99), ("repro", "nope", 42, 0.99),
                               ("repro-long", "rope", 42, 0.60), ("repro-long", "rope", 43, 0.62),
                               ("repro-long", "nope", 42, 0.75), ("repro-long", "nope", 43, 0.77),
                               ("repro-wide", "rope", 42, 0.60), ("repro-wide", "nope", 42, 0.75))]
    frame = _runs_frame(rows)
    store = FakeStore([FakeRun(r, {}) for r in frame.run_id])
    judged_on = []
    real = claims_mod.claims
    monkeypatch.setattr(claims_mod, "claims",
                        lambda st, runs=None, th=Thresholds(): judged_on.append(tuple(sorted(runs.run_id)))
                        or real(st, runs, th))
    b = base_claims(store, frame, ("repro", "repro-long", "repro-wide"))
    assert b.rungs == ("repro", "repro-long", "repro-wide") and len(b.runs) == 2
    assert len(judged_on) == 6 and len(set(judged_on)) == 4  # base and repro-wide: seed 42 alone, judged twice
    assert sorted(judged_on).count(tuple(sorted(frame[frame.preset == "repro-long"].run_id))) == 1
    behind = b.answers[b.answers.question.str.startswith("Does RoPE fall behind NoPE")].set_index("rung")
    assert behind.loc["repro-long", "answer"] == "cannot tell (fewer than 3 paired runs)"  # two pairs: no interval
    assert behind.loc["repro-wide", "answer"] == "cannot tell (fewer than 3 paired runs)"
    monkeypatch.setattr(claims_mod, "claims", real)
    assert b.answers.equals(ladder_answers(store, frame, b.rungs))
    assert set(b.seeded.rung) == {"repro-long"}


def test_a_rung_explains_a_gap_when_it_brings_the_cell_five_points_closer_to_the_paper():
    from workbench.analysis.claims import ladder_gaps, rung_seed_cells

    rungs = ("repro", "repro-long", "repro-wide")
    t = pd.DataFrame([  # paper 0.80; base 0.50 (0.30 off): 0.55 is 0.05 closer, 0.549 is not; 0.20 moves away
        {"setting": "paper", "scheme": s, "task": "trigger-distance", "paper": 0.80, "repro": 0.50,
         "repro status": "learned", "repro-long": long, "repro-long status": st, "repro-wide": np.nan,
         "repro-wide status": ""}
        for s, long, st in (("rope", 0.55, "learned"), ("nope", 0.549, "learned"), ("alibi", 0.20, "still learning"))])
    # the base already within 5 points of the paper (0.77 vs 0.80): no difference for a rung to explain
    t = pd.concat([t, t.iloc[:1].assign(scheme="mla", repro=0.77, **{"repro-long": 0.80})], ignore_index=True)
    g = ladder_gaps(t, rungs).set_index("scheme")
    assert list(g.index) == ["rope", "nope", "alibi", "mla"] and set(g.rung) == {"repro-long"}  # none at repro-wide
    assert g.loc["mla", "gap"] == "no gap"
    assert g.loc["rope", "gap"] == "explains" and g.loc["rope", "closer"] == pytest.approx(0.05)
    assert g.loc["nope", "gap"] == "does not explain"
    assert g.loc["alibi", "gap"] == "cannot tell yet"  # further away, but its run was still learning
    assert ladder_gaps(t.iloc[:0], rungs).empty
    # the cells a rung ran with more than one seed, and only those
    rows = [{"run_id": f"{p}-{s}", "variant": "nope", "scheme": "nope", "task": "trigger-distance", "seed": s,
             "test_acc": 0.9, "test_acc_auc": 0.9, "preset": p}
            for p, s in (("repro", 42), ("repro", 43), ("repro-long", 43), ("repro-long", 42), ("repro-wide", 42))]
    cells = rung_seed_cells(_runs_frame(rows), rungs)
    assert list(zip(cells.rung, cells.seed)) == [("repro-long", 42), ("repro-long", 43)]
    assert rung_seed_cells(_runs_frame(rows[:2]), rungs).empty
    study = [r | {"run_id": f"study-{s}", "seed": s} for r, s in zip(rows[2:4], (45, 46))]  # the seed study's seeds
    assert list(rung_seed_cells(_runs_frame(rows + study), rungs).seed) == [42, 43]  # judged by the study alone


def test_the_findings_page_shows_the_ladder_its_gaps_and_the_claims_at_rungs_with_more_seeds():
    from apps.pages import findings
    from workbench.analysis.claims import ladder_answers, ladder_gaps, ladder_table1, rung_seed_cells

    rows = [{"run_id": f"{p}-n{s}", "variant": "nope", "scheme": "nope", "task": "trigger-distance", "seed": s,
             "test_acc": a, "test_acc_auc": a, "preset": p}
            for p, s, a in (("repro", 42, 0.15), ("repro-long", 42, 0.95), ("repro-long", 43, 0.90))]
    frame = _runs_frame(rows)
    store = FakeStore([FakeRun(r, {}) for r in frame.run_id])
    rungs = ("repro", "repro-long")
    lad = ladder_table1(frame, rungs)
    t = {"rungs": rungs, "ladder": lad, "gaps": ladder_gaps(lad, rungs), "seeds": rung_seed_cells(frame, rungs),
         "seeded": rung_claims(store, frame, rungs), "answers": ladder_answers(store, frame, rungs)}
    page = str(findings._scale_view(t))
    assert "find-ladder" in page and "find-gaps" in page and "find-rung-claims" in page and "find-rung-seeds" in page
    # in %: NoPE Task 1 15 -> 95 moves away from the paper's 3.51, so the rung does not explain that gap
    assert "'repro-long': 95.0" in page and "'paper': 3.51" in page and "'gap': 'does not explain'" in page
    assert "NoPE does not generalise on Task 1" in page
    assert "within 5 points of the paper at repro has no gap" in page and "GAP_CLOSER" not in page
    empty = {**t, "ladder": lad.iloc[:0]}
    assert "No run of the ladder's other rungs shipped yet" in str(findings._scale_view(empty))


def test_the_ladders_questions_are_answered_per_rung_on_every_seed_and_one_seed_cannot_tell():
    from workbench.analysis.claims import ladder_answers

    rungs = ("repro", "repro-long", "repro-paperdata")

    def mla(p, s, a, **kw):
        return {"run_id": f"{p}-mla-{s}", "variant": "mla", "scheme": "mla", "setting": "authors-mla",
                "task": "trigger-distance", "seed": s, "test_acc": a, "test_acc_auc": a, "preset": p, **kw}

    def t2(p, v, s, a, **kw):
        return {"run_id": f"{p}-{v}-{s}", "variant": v, "scheme": v, "task": "trigger-count", "seed": s,
                "test_acc": a, "test_acc_auc": a, "preset": p, **kw}

    def answer(rows, q):
        a = ladder_answers(FakeStore([FakeRun(r["run_id"], {}) for r in rows]), _runs_frame(rows), rungs)
        return a[a.question.str.startswith(q)].set_index("rung")

    learns = "Does the authors' MLA learn"
    base = [mla("repro", 42, 0.14)]  # the base rung is never answered: it is what the ladder is compared with
    three = answer(base + [mla("repro-long", s, a) for s, a in ((42, 0.80), (43, 0.90), (44, 0.89))], learns)
    assert list(three.index) == ["repro-long"] and three.loc["repro-long", "answer"] == "yes, in all 3 seeds"
    assert "seed 43 90.00 % (learned)" in three.loc["repro-long", "evidence"]
    one = answer(base + [mla("repro-long", 42, 0.80)], learns).loc["repro-long", "answer"]
    assert one == "cannot tell (one seed): seed 42 did learn"
    some = answer(base + [mla("repro-long", 42, 0.80), mla("repro-long", 43, 0.15)], learns)
    assert some.loc["repro-long", "answer"] == "in some seeds only (1 of 2)"
    up = answer(base + [mla("repro-long", s, 0.8, still_learning=s > 42) for s in (42, 43, 44)], learns)
    assert up.loc["repro-long", "answer"] == "yes, in all 3 seeds (2 still learning at the last epoch)"
    rising = answer(base + [mla("repro-long", s, 0.15, still_learning=True) for s in (42, 43)], learns)
    assert rising.loc["repro-long", "answer"].startswith("cannot tell (not settled")
    assert answer(base + [mla("repro-long", s, 0.15) for s in (42, 43)], learns).loc["repro-long", "answer"] == "no"

    behind = "Does RoPE fall behind NoPE"
    both = [t2("repro-paperdata", "rope", 42, 0.24, still_learning=True, learned=True),  # above the 0.08 reference
            t2("repro-paperdata", "nope", 42, 0.19, still_learning=True, learned=True)]
    assert answer(both, behind).loc["repro-paperdata", "answer"].startswith("cannot tell (not settled")
    settled = [t2("repro-paperdata", v, s, a + 0.001 * (s - 42) * (v == "nope"))
               for v, a in (("rope", 0.60), ("nope", 0.75)) for s in (42, 43, 44)]
    assert answer(settled, behind).loc["repro-paperdata", "answer"] == "yes"  # the t interval of 3 pairs above 0
    assert answer(settled[::3], behind).loc["repro-paperdata", "answer"] == "cannot tell (fewer than 3 paired runs)"
    assert answer(settled[:2] + settled[3:5], behind).loc["repro-paperdata", "answer"] == \
        "cannot tell (fewer than 3 paired runs)"
    ahead = [t2("repro-paperdata", v, s, a + 0.001 * (s - 42) * (v == "rope"))
             for v, a in (("rope", 0.75), ("nope", 0.60)) for s in (42, 43, 44)]
    assert answer(ahead, behind).loc["repro-paperdata", "answer"] == "no"
    assert answer(settled[:2], behind).empty  # NoPE not run at the rung: no answer


def test_the_ladder_asks_where_ropes_largest_deposit_is_at_each_rung():
    """The shallow-deposit claim re-judged at each rung from the rung's own deposit tables: three seeds whose largest
    deposit is deep -> 0 of 3, too few for the share rule to decide (version 3; version 2 read it mixed); one seed
    -> cannot tell."""
    from workbench.analysis.claims import ladder_answers

    rungs = ("repro", "repro-long", "repro-wide")
    layers = {("repro", 42): [1], ("repro-long", 42): [1], ("repro-long", 43): [3], ("repro-long", 44): [2],
              ("repro-wide", 42): [3], ("repro-wide", 43): [2], ("repro-wide", 44): [3]}
    rows = [{"run_id": f"{p}-{s}", "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": s,
             "test_acc": 1.0, "test_acc_auc": 0.9, "preset": p} for p, s in layers]
    store = FakeStore([FakeRun(f"{p}-{s}", {"deposit": _deposit(v)}) for (p, s), v in layers.items()])
    a = ladder_answers(store, _runs_frame(rows), rungs)
    a = a[a.question.str.contains("PE-Lab `paper` arch")].set_index("rung")
    assert list(a.index) == ["repro-long", "repro-wide"]  # the base rung is what the ladder is compared with
    assert a.loc["repro-wide", "answer"] == "cannot tell (fewer than 4 counted runs)"
    assert "L3.H3" in a.loc["repro-wide", "evidence"]
    assert "0 of 3 counted runs agree" in a.loc["repro-wide", "evidence"]
    assert "0 of 3 counted runs agree" in a.loc["repro-long", "evidence"]  # layer 1 is not the first layer
    one = {k: v for k, v in layers.items() if k[1] == 42}
    a1 = ladder_answers(FakeStore([FakeRun(f"{p}-{s}", {"deposit": _deposit(v)}) for (p, s), v in one.items()]),
                        _runs_frame([r for r in rows if r["seed"] == 42]), rungs)
    one_run = a1[a1.question.str.contains("PE-Lab")]
    one = "cannot tell (fewer than 4 counted runs)"
    assert dict(zip(one_run.rung, one_run.answer)) == {  # the study's rung points to the study's own readout
        "repro-long": one + " on the ladder's runs (the seed study below reads this rung on its registered runs)",
        "repro-wide": one}
    assert all("(few runs)" in e for e in one_run.evidence)
    assert not a1.question.str.contains("authors'").any()  # no authors' RoPE run at a rung: no answer


def test_every_deposit_table_names_each_rows_preset():
    """COMPARISON.md's "Every single-head deposit" lists the runs of every rung: each row says its preset, so two
    rungs' runs of one setting, variant, task and seed are two rows that cannot be confused."""
    from workbench.analysis.claims import all_deposits
    from workbench.report.comparison import _deposits_section

    rows = [{"run_id": f"{p}-rope", "variant": "rope", "scheme": "rope", "task": "trigger-count", "seed": 42,
             "test_acc": 0.99, "test_acc_auc": 0.9, "preset": p} for p in ("repro", "repro-paperdata-long")]
    store = FakeStore([FakeRun("repro-rope", {"deposit": _deposit([1])}),
                       FakeRun("repro-paperdata-long-rope", {"deposit": _deposit([])})])
    d = all_deposits(store, _runs_frame(rows)).set_index("preset")
    assert d.loc["repro", "deposits"] == "L1.H3 0.40" and d.loc["repro-paperdata-long", "deposits"] == "none"
    runs = _runs_frame(rows)
    text = _deposits_section(d.reset_index(), runs)
    assert "| `repro` | PE-Lab `paper` arch | rope | Task 2 | 42 |" in text
    assert "| `repro-paperdata-long` | PE-Lab `paper` arch | rope | Task 2 | 42 |" in text
    assert "Shipped without a deposit table" not in text  # every run here has one
