"""The registered rules (workbench/analysis/claims/registry.toml, docs/preregistration.md) on made-up runs. Each test
fails under the rules before the registration (issue 40): learned as an absolute +0.10 on the point estimate, a
last-epoch "still learning" with a ceiling exemption, "shallow" = layer <= 1, "every seed agrees" as reproduced,
partial RoPE carried by one cell, no specificity check, one threshold, a rung explaining a gap before its status
checks, "ALiBi converges poorly" tested."""
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.analysis.claims import (Thresholds, claims, concentrated, holds_across_scale, ladder, ladder_gaps,
                                       one_setting_effect, seeds_text, share, table1)
from workbench.analysis.claims.registry import load_registry
from workbench.analysis.claims.status import StatusRules, run_status
from tests.test_repro import FakeRun, FakeStore, _deposit, _runs_frame

REG = load_registry()


def curve(test, loss=1.0):
    return pd.DataFrame({"epoch": range(1, len(test) + 1), "test_acc": test, "train_acc": test,
                         "train_loss": [loss] * len(test), "test_loss": [loss] * len(test)})


def row_of(cl, prefix, setting="paper"):
    return cl[cl.claim.str.startswith(prefix) & (cl.setting == setting)].iloc[0]


# ---- run status ------------------------------------------------------------------------------------------------
def test_the_run_rules_read_the_registry():
    r = StatusRules()
    assert (r.learned_share, r.settle_points, r.ceiling, r.diverged_factor) == tuple(
        REG.status[k] for k in ("learned_share", "settle_points", "ceiling", "diverged_factor"))
    th = Thresholds()
    assert (th.indispensable, th.also) == tuple(REG.deposit["thresholds"][:2])
    assert th.min_runs == REG.decision["share"]["min_runs"] and th.min_pairs == REG.decision["ordering"]["min_pairs"]
    assert th.shallow_layer == 0  # the paper's first layer decides


def test_learned_is_the_wilson_lower_bound_against_the_room_above_the_reference():
    # 475 of 4,200 on 101 labels (t2-mla-repro-paperdata-s42): 0.113 >= chance + 0.10 was "learned"
    st = run_status(curve([0.05, 0.1, 0.1131, 0.1131]), 101, n_test=4200)
    assert not st["learned"] and "0.208" in st["why"]  # 0.0099 + 0.20 x 0.9901
    # 0.29 over a 0.18 length-only level was learned by +0.10; the room rule needs 0.18 + 0.2 x 0.82 = 0.344
    assert not run_status(curve([0.2, 0.29, 0.29]), 26, 0.18, n_test=6000)["learned"]
    assert run_status(curve([0.2, 0.36, 0.36]), 26, 0.18, n_test=6000)["learned"]
    # on the lower bound: 0.36 on 50 examples is not clearly above 0.344
    assert not run_status(curve([0.2, 0.36, 0.36]), 26, 0.18, n_test=50)["learned"]


def test_settled_reads_the_last_half_of_training_and_the_ceiling_does_not_exempt():
    # the last epoch is flat (+0.002) but epoch 2 -> 4 moved 5.2 points: not settled (old: not still learning)
    late = run_status(curve([0.5, 0.8, 0.85, 0.852]), 26, 0.18, n_test=6000)
    assert not late["settled"] and late["still_learning"] and "epoch 2 -> 4: +0.052" in late["why"]
    # sinusoidal Task 1 seed 43: 65.6 -> 99.98 % in its last epoch is at the ceiling, and NOT settled
    top = run_status(curve([0.3, 0.656, 0.9998]), 26, 0.18, n_test=6000)
    assert top["ceiling"] and not top["settled"] and top["status"] == "ceiling, not settled"
    assert not top["still_learning"]  # an ordering may still read it as at the ceiling
    flat = run_status(curve([0.3, 0.99, 0.995, 0.996]), 26, 0.18, n_test=6000)
    assert flat["settled"] and flat["status"] == "ceiling"
    assert run_status(curve([0.9]), 26, 0.18, n_test=6000)["settled"]  # one epoch: e0 = E, as registered


def test_a_change_of_exactly_one_point_is_not_settled():
    """t1-nope-repro-s43: 848 -> 908 of 6,000 (exactly +1 point) computes as +0.00999999999999998 in floats, which
    read `settled`; the rule says "moved >= 1 point": not settled. 59 of 6,000 (0.98 points) is settled."""
    assert 908 / 6000 - 848 / 6000 < 0.01  # the float difference that misled the rule
    st = run_status(curve([848 / 6000, 892 / 6000, 908 / 6000]), 26, n_test=6000)
    assert not st["settled"] and st["status"] == "did not learn, still learning"
    assert run_status(curve([848 / 6000, 892 / 6000, 907 / 6000]), 26, n_test=6000)["settled"]
    assert run_status(curve([0.3, 0.8, 5880 / 6000]), 26, n_test=6000)["ceiling"]  # 98 % exactly: at the ceiling


def test_a_ceiling_run_that_rose_late_does_not_count_for_a_mechanism_claim():
    rows = [{"run_id": f"rope-{s}", "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": s,
             "test_acc": 0.999, "test_acc_auc": 0.9, "settled": False, "still_learning": False,
             "status": "ceiling, not settled"} for s in (42, 43, 44)]
    store = FakeStore([FakeRun(f"rope-{s}", {"deposit": _deposit([0])}) for s in (42, 43, 44)])
    row = row_of(claims(store, _runs_frame(rows)), "RoPE's largest single-head deposit")
    assert row.verdict == "inconclusive (still learning)" and "not counted" in row.evidence


def test_a_runs_deposit_sentence_is_read_by_its_status():
    """`as_read`: a run that counts for a mechanism claim (learned, settled, not diverged: `COUNTS`) keeps its
    sentence; one that did not learn or diverged reads "cannot tell" with the rule's why first; one still learning
    or at the ceiling but unsettled is marked provisional. Every status a curve can give is covered."""
    from workbench.analysis.claims import COUNTS, NOT_LEARNED, STATUSES, as_read

    curves = {"learned": curve([0.4, 0.6, 0.6, 0.6]), "ceiling": curve([0.99] * 4),
              "still learning": curve([0.3, 0.4, 0.5, 0.6]), "ceiling, not settled": curve([0.5, 0.6, 0.8, 0.99]),
              "did not learn": curve([0.04] * 4), "did not learn, still learning": curve([0.04, 0.01, 0.02, 0.04]),
              "diverged": curve([0.4, 0.6, 0.6, 0.6], loss=float("nan"))}
    assert set(curves) == set(STATUSES)
    sentence = "RoPE, Task 1: no deposit"
    for want, c in curves.items():
        st = run_status(c, 26, n_test=6000)
        assert st["status"] == want
        counts = st["learned"] and st["settled"] and not st["diverged"]
        assert (want in COUNTS) == counts  # the registered rule for a mechanism claim
        got = as_read(sentence, st)
        if counts:
            assert got == sentence
        elif want in NOT_LEARNED:
            word = "diverged" if want == "diverged" else "did not learn"
            assert got == f"cannot tell, the run {word} ({st['why']}): {sentence}"
        else:
            assert got.startswith(sentence + " (provisional: the run is ") and st["why"] in got
        assert as_read(sentence, want).startswith(got.split(" (")[0])  # the status word alone reads the same
        brief = as_read(sentence, st, brief=True)  # beside a `shows` column: no why
        assert brief == sentence if counts else (st["why"] not in brief and ("cannot tell" in brief) == (
            want in NOT_LEARNED) and ("provisional" in brief) == (want not in NOT_LEARNED))
    assert as_read(sentence, None) == as_read(sentence, {"status": None, "why": None}) == sentence


# ---- shallow = layer 0 ------------------------------------------------------------------------------------------
def _rope_frame(layers, **kw):
    seeds = range(42, 42 + len(layers))
    rows = [{"run_id": f"rope-{s}", "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": s,
             "test_acc": 1.0, "test_acc_auc": 0.9, **kw} for s in seeds]
    return rows, [FakeRun(f"rope-{s}", {"deposit": _deposit(l)}) for s, l in zip(seeds, layers)]


def test_shallow_is_the_first_layer_and_layer_one_is_only_a_second_reading():
    rows, runs = _rope_frame([[1]] * 12)
    row = row_of(claims(FakeStore(runs), _runs_frame(rows)), "RoPE's largest single-head deposit")
    assert row.verdict == "not reproduced"  # 0 of 12 in layer 0; layer <= 1 would have said reproduced
    assert "second reading (largest deposit in layer <= 1, never deciding): 12 of 12" in row.evidence
    assert row.claim_id == "rope-deposit-first-layer" and row.rests_on == "12 training seeds x 1 data seed (42)"


# ---- the share decision -----------------------------------------------------------------------------------------
def test_the_share_decision_is_the_wilson_interval_against_one_half():
    three = share([True] * 3)  # [0.44, 1.00] contains 1/2 whatever 3 runs show: too few to decide (version 3)
    assert three["verdict"] == "inconclusive (too few seeds)" and three["few"] and "[0.44, 1.00]" in three["text"]
    assert share([True] * 4)["verdict"] == "reproduced" and share([False] * 4)["verdict"] == "not reproduced"
    assert share([True] * 10)["verdict"] == "reproduced" and not share([True] * 10)["few"]
    assert share([True] * 2 + [False] * 10)["verdict"] == "not reproduced"
    assert share([True] * 6 + [False] * 4)["verdict"] == "mixed"
    rows, runs = _rope_frame([[0]] * 3)
    row = row_of(claims(FakeStore(runs), _runs_frame(rows)), "RoPE's largest single-head deposit")
    assert row.verdict == "inconclusive (too few seeds)" and "3 of 3 counted runs agree" in row.evidence


def test_min_counted_is_the_fewest_runs_whose_interval_can_leave_one_half():
    """The registered `min_counted` (version 3) is not a free number: it is the fewest counted runs n for which some
    outcome (all agree, or none) puts the Wilson 95 % interval off 1/2. Below it every outcome reads the same."""
    from workbench.analysis.claims import Thresholds
    from workbench.analysis.claims.status import wilson

    def decidable(n):
        return any(lo > 0.5 or hi < 0.5 for lo, hi in (wilson(k / n, n) for k in range(n + 1)))

    n = Thresholds().min_seeds
    assert decidable(n) and not any(decidable(m) for m in range(1, n))
    assert {share([a] * m)["verdict"] for m in range(1, n) for a in (True, False)} == {"inconclusive (too few seeds)"}


def test_an_ordering_reads_the_paired_t_interval_over_training_and_data_seeds():
    def order(mla, rope, data=(42, 42, 42)):
        rows = [{"run_id": f"mla-{s}", "variant": "mla", "scheme": "mla", "task": "trigger-count", "seed": s,
                 "data_seed": d, "test_acc": a, "test_acc_auc": a} for s, d, a in zip((42, 43, 44), data, mla)]
        rows += [{"run_id": f"rope-{s}", "variant": "rope", "scheme": "rope", "task": "trigger-count", "seed": s,
                  "test_acc": a, "test_acc_auc": a} for s, a in zip((42, 43, 44), rope)]
        cl = claims(FakeStore([FakeRun(r["run_id"], {}) for r in rows]), _runs_frame(rows))
        return row_of(cl, "MLA beats RoPE on Task 2")

    assert order([0.95, 0.96, 0.95], [0.85, 0.86, 0.87]).verdict == "reproduced"
    # two seeds 10-12 points ahead, one 0.5 behind: the old rule said "mixed"; the interval contains 0
    r = order([0.95, 0.98 - 0.005, 0.85], [0.85, 0.86, 0.855])
    assert r.verdict == "inconclusive (within seed spread)" and "t 95 %" in r.evidence
    # runs on another data seed are no pair: two pairs are too few to decide
    few = order([0.95, 0.96, 0.95], [0.85, 0.86, 0.87], data=(42, 42, 43))
    assert few.verdict == "inconclusive (few pairs)" and few.claim_id == "mla-beats-rope-t2"


# ---- partial RoPE -------------------------------------------------------------------------------------------------
def test_partial_rope_is_the_share_of_counted_task1_runs_with_the_largest_deposit_in_layers_1_2():
    rows, runs = [], []
    for s in (42, 43):
        rows.append({"run_id": f"rope-{s}", "variant": "rope", "scheme": "rope", "task": "trigger-distance",
                     "seed": s, "test_acc": 1.0, "test_acc_auc": 0.9})
        runs.append(FakeRun(f"rope-{s}", {"deposit": _deposit([0])}))
        for v, layer, task in (("k1-all", 3, "trigger-distance"), ("k4-all", 0, "trigger-distance"),
                               ("k1-t2", 1, "trigger-count")):
            rows.append({"run_id": f"{v}-{s}", "variant": v, "scheme": "rope", "partial": True, "task": task,
                         "seed": s, "test_acc": 0.9, "test_acc_auc": 0.8})
            runs.append(FakeRun(f"{v}-{s}", {"deposit": _deposit([layer])}))
    row = row_of(claims(FakeStore(runs), _runs_frame(rows)), "partial RoPE")
    # one variant moved it deeper in two seeds (layer 3): "reproduced" before; layer 3 is not the second or third
    assert row.verdict == "not reproduced" and "0 of 4 counted runs agree" in row.evidence
    assert "k1-t2" not in row.evidence  # Task 2 runs are not read (the paper ran these on Task 1)


# ---- specificity --------------------------------------------------------------------------------------------------
def _atlas(deltas, n_layers=2, n_heads=16):
    return pd.DataFrame([{"layer": l, "head": h, "metric": "accuracy", "delta": deltas(l, h), "ci_lo": 0.0,
                          "ci_hi": 0.1} for l in range(n_layers) for h in range(n_heads)])


def test_the_absolute_heads_rule_fails_on_a_scattered_pattern_and_passes_a_concentrated_one():
    scattered = _atlas(lambda l, h: 0.06 if h % 2 else 0.03)  # ALiBi-like: many heads matter a little
    assert not concentrated(scattered, 0.05)[0]
    some = _atlas(lambda l, h: {(0, 1): 0.3, (0, 5): 0.2, (1, 2): 0.1}.get((l, h), 0.002))
    assert concentrated(some, 0.05)[0]

    def verdict(alibi):
        seeds = range(42, 52)
        rows = [{"run_id": f"{v}-{s}", "variant": v, "scheme": v, "task": "trigger-distance", "seed": s,
                 "test_acc": 0.99, "test_acc_auc": 0.9} for v in ("sinusoidal", "alibi") for s in seeds]
        store = FakeStore([FakeRun(f"sinusoidal-{s}", {"ablation": some}) for s in seeds]
                          + [FakeRun(f"alibi-{s}", {"ablation": alibi}) for s in seeds])
        return row_of(claims(store, _runs_frame(rows)), "absolute (sinusoidal) has")

    ok = verdict(scattered)
    assert ok.verdict == "reproduced" and ok.specificity == "specific" and "contrast ALiBi" in ok.evidence
    assert verdict(some).specificity == "not specific"  # the contrast passes: the rule cannot tell them apart


def test_the_rope_layer0_rule_fails_on_alibis_pattern():
    rows, runs = _rope_frame([[0]] * 10)
    rows += [{"run_id": f"alibi-{s}", "variant": "alibi", "scheme": "alibi", "task": "trigger-distance", "seed": s,
              "test_acc": 0.99, "test_acc_auc": 0.9} for s in range(42, 52)]
    scattered = FakeStore(runs + [FakeRun(f"alibi-{s}", {"deposit": _deposit([])}) for s in range(42, 52)])
    row = row_of(claims(scattered, _runs_frame(rows)), "RoPE's largest single-head deposit")
    assert row.verdict == "reproduced" and row.specificity == "specific"
    layer0 = FakeStore(runs + [FakeRun(f"alibi-{s}", {"deposit": _deposit([0])}) for s in range(42, 52)])
    assert row_of(claims(layer0, _runs_frame(rows)), "RoPE's largest single-head").specificity == "not specific"


# ---- both thresholds ----------------------------------------------------------------------------------------------
def test_every_threshold_verdict_is_shown_at_005_and_010_and_marked_when_they_differ():
    near = _atlas(lambda l, h: 0.052 if (l, h) == (1, 3) else 0.01)  # MLA seed 42 at repro: 0.052
    seeds = range(42, 52)
    rows = [{"run_id": f"mla-{s}", "variant": "mla", "scheme": "mla", "task": "trigger-distance", "seed": s,
             "test_acc": 0.95, "test_acc_auc": 0.9} for s in seeds]
    row = row_of(claims(FakeStore([FakeRun(f"mla-{s}", {"ablation": near}) for s in seeds]), _runs_frame(rows)),
                 "MLA has no indispensable single head (heads ablated), Task 1")
    assert row.verdict == "not reproduced" and row.verdict_also == "reproduced" and row.threshold_sensitive
    assert "threshold-sensitive" in row.evidence and row.claim_id == "mla-no-indispensable-head"
    # a largest drop of exactly 0.05 (50 of 1,000, as float subtraction and a float32 table give it) is not below
    # 0.05: the same seeds disagree at 0.05 and agree at 0.10
    for drop in (0.95 - 0.90, float(np.float32(0.05))):
        at = _atlas(lambda l, h, d=drop: d if (l, h) == (1, 3) else 0.01)
        row = row_of(claims(FakeStore([FakeRun(f"mla-{s}", {"ablation": at}) for s in seeds]), _runs_frame(rows)),
                     "MLA has no indispensable single head (heads ablated), Task 1")
        assert (row.verdict, row.verdict_also) == ("not reproduced", "reproduced"), drop


# ---- the ladder, convergence, one setting -------------------------------------------------------------------------
def test_a_rung_explains_a_gap_only_after_its_runs_pass_the_status_checks():
    rungs = ("repro", "repro-long")
    t = pd.DataFrame([{"setting": "authors-mla", "scheme": "mla", "task": "trigger-distance", "paper": 0.8834,
                       "repro": 0.14, "repro status": "did not learn", "repro-long": 0.80,
                       "repro-long status": st} for st in ("still learning", "ceiling, not settled", "learned")])
    assert list(ladder_gaps(t, rungs).gap) == ["cannot tell yet", "cannot tell yet", "explains"]


def test_a_beyond_the_paper_row_shows_its_change_across_rungs():
    rows = [{"run_id": f"{p}-mla", "variant": "mla", "scheme": "mla", "task": "trigger-count", "seed": 42,
             "test_acc": 0.95, "test_acc_auc": 0.9, "preset": p} for p in ("repro", "repro-long")]
    frame = _runs_frame(rows)
    flat = _atlas(lambda l, h: 0.01)
    deep = _atlas(lambda l, h: 0.63 if (l, h) == (1, 1) else 0.01)
    store = FakeStore([FakeRun("repro-mla", {"ablation": flat}), FakeRun("repro-long-mla", {"ablation": deep})])
    base = claims(store, frame[frame.preset == "repro"])
    lad = ladder(store, frame, ("repro", "repro-long"))
    col = holds_across_scale(base, lad, "repro")
    i = base.index[base.claim.str.endswith("Task 2") & base.claim.str.startswith("MLA has no indispensable")
                   & (base.setting == "paper")][0]
    assert base.verdict[i] == "beyond the paper"
    assert col[i] == "changes at repro-long: seed 42 agrees with the paper -> seed 42 does not agree with the paper"


def test_alibi_converges_poorly_is_not_testable_for_the_registered_reason():
    rows = [{"run_id": f"{v}-{s}", "variant": v, "scheme": v, "task": "trigger-distance", "seed": s,
             "test_acc": a, "test_acc_auc": a} for v, a in (("alibi", 0.5), ("rope", 0.95)) for s in (42, 43, 44)]
    row = row_of(claims(FakeStore([FakeRun(r["run_id"], {}) for r in rows]), _runs_frame(rows)),
                 "ALiBi converges poorly")
    assert row.verdict == "not testable at this preset"
    assert REG.claim("alibi-converges-poorly")["why"] in row.evidence


def test_nope_does_not_generalise_is_judged_in_every_setting_it_was_registered_for():
    """`nope-no-generalise-t1` was registered for the `paper` arch and the authors' transformer script; until
    2026-11-28 only the first got a row. Each setting reads its own runs and its own RoPE contrast: here the
    authors' NoPE did not learn (agrees) while the `paper` arch's NoPE learned (does not)."""
    assert REG.claim("nope-no-generalise-t1")["settings"] == ["paper", "authors"]
    rows = [{"run_id": f"{v}-{st}-{s}", "variant": v, "scheme": v, "task": "trigger-distance", "seed": s,
             "setting": st, "test_acc": a, "test_acc_auc": a}
            for st, nope_acc in (("paper", 0.9), ("authors", 0.04)) for v, a in (("nope", nope_acc), ("rope", 0.95))
            for s in range(42, 50)]  # 8 seeds: a Wilson interval clear of one half
    cl = claims(FakeStore([FakeRun(r["run_id"], {}) for r in rows]), _runs_frame(rows))
    authors, paper = row_of(cl, "NoPE does not generalise", "authors"), row_of(cl, "NoPE does not generalise")
    assert authors.claim_id == paper.claim_id == "nope-no-generalise-t1"
    assert authors.verdict == "reproduced" and "8 of 8 counted runs agree" in authors.evidence
    assert paper.verdict == "not reproduced"
    assert set(authors.runs) == {f"nope-authors-{s}" for s in range(42, 50)}
    assert "contrast RoPE Task 1: 0 of 8" in authors.evidence
    # the training fit beside each test accuracy: memorised (the paper's pattern) or fitted neither
    assert "test acc 0.040" in authors.evidence and "train acc 1.000 (running mean)" in authors.evidence


def test_every_registered_claim_has_a_row_in_every_registered_setting():
    """The shipped repro runs: each rule of the registry gives a row for each setting it names, and no other."""
    from workbench.analysis.claims.runs import run_table
    from workbench.store import RunStore

    store = RunStore(Path(__file__).resolve().parents[1] / "results" / "repro")
    runs = run_table(store)
    cl = claims(store, runs[runs.preset == "repro"])
    got = cl[cl.claim_id.str.len() > 0].groupby("claim_id").setting.apply(set).to_dict()
    for rule in REG.claims:
        assert got.get(rule["id"]) == set(rule["settings"]), (rule["id"], rule["settings"], got.get(rule["id"]))


def test_the_judge_takes_each_rules_settings_from_the_registry(monkeypatch):
    """`registry.registered_settings`: a claim's own scheme gets the settings registry.toml names (so a setting added
    there is judged without a code change: the deposit rules read it themselves); a scheme its sentence names beside
    it (Relative in "Neither NoPE nor standard Relative generalizes") the `paper` arch alone."""
    import dataclasses

    from workbench.analysis.claims import registry
    from workbench.analysis.claims.deposits import _rope_shallow_claim

    assert registry.registered_settings("no-deposit-nope-t1", "nope") == ("paper", "authors")
    assert registry.registered_settings("no-deposit-alibi-t1", "alibi") == ("paper",)
    assert registry.registered_settings("nope-no-generalise-t1", "nope") == ("paper", "authors")
    assert registry.registered_settings("nope-no-generalise-t1", "relative") == ("paper",)
    wider = [dict(c, settings=c["settings"] + ["encoder"]) if c["id"] in ("no-deposit-alibi-t1",
                                                                          "rope-deposit-first-layer") else c
             for c in REG.claims]
    monkeypatch.setattr(registry, "load_registry", lambda: dataclasses.replace(REG, claims=tuple(wider)))
    assert registry.registered_settings("no-deposit-alibi-t1", "alibi") == ("paper", "encoder")
    frame = _runs_frame([{"run_id": "rope-enc", "setting": "encoder", "variant": "rope", "scheme": "rope",
                          "task": "trigger-distance", "seed": 42, "test_acc": 0.99, "test_acc_auc": 0.9}])
    store = FakeStore([FakeRun("rope-enc", {"deposit": _deposit([0])})])
    assert [r["setting"] for r in _rope_shallow_claim(store, frame, Thresholds())] == ["paper", "encoder"]
    monkeypatch.undo()  # as registered (paper, authors): the encoder's run is not judged, authors has no run
    assert [r["setting"] for r in _rope_shallow_claim(store, frame, Thresholds())] == ["paper"]


def test_a_difference_between_runs_still_learning_is_not_an_effect():
    r = pd.Series({"identical": False, "base_learned": True, "learned": True, "settled": False,
                   "beyond_spread": True, "seed_spread": 0.02})
    assert "no effect to read" in one_setting_effect(r)
    r["settled"] = True
    assert one_setting_effect(r).startswith("beyond")


# ---- data seeds -------------------------------------------------------------------------------------------------
def test_table1_and_claims_say_how_many_training_and_data_seeds_they_rest_on():
    rows = [{"run_id": f"r{s}-{d}", "variant": "rope", "scheme": "rope", "task": "trigger-count", "seed": s,
             "data_seed": d, "test_acc": 0.9, "test_acc_auc": 0.9} for s in (45, 46, 47) for d in (43, 44)]
    frame = _runs_frame(rows)
    assert table1(frame).rests_on.iloc[0] == "3 training seeds x 2 data seeds (43, 44)"
    assert seeds_text(frame.iloc[:1]) == "1 training seed x 1 data seed (43)"


# ---- COMPARISON.md: the registration and provenance --------------------------------------------------------------
def test_comparison_names_each_rules_commit_and_flags_a_rule_changed_after_its_runs(monkeypatch):
    from workbench.report.comparison import _provenance_section
    from workbench.report.study import registration_section, rule_commit

    commits = [("aaaaaaa", "2026-11-26"), ("bbbbbbb", "2026-11-28"), ("ccccccc", "2026-12-01")]
    assert rule_commit({"version": 1}, commits, "2026-11-26") == "`aaaaaaa` (2026-11-26)"
    assert rule_commit({"version": 2, "changed": "2026-11-27"}, commits, "2026-11-26") == "`bbbbbbb` (2026-11-28)"
    assert rule_commit({"version": 1}, [], "2026-11-26") == "registered 2026-11-26 (no git history here)"
    rows = [{"run_id": f"rope-{s}", "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": s,
             "test_acc": 1.0, "test_acc_auc": 0.9, "started": "2026-11-25T10:00:00+00:00",
             "code_version": "abc1234-dirty" if s == 43 else "abc1234"} for s in (42, 43, 44)]
    frame = _runs_frame(rows)
    cl = claims(FakeStore([FakeRun(r["run_id"], {"deposit": _deposit([0])}) for r in rows]), frame)
    text = registration_section(cl, frame, commits)
    # the share decision's version 3 (2026-12-06) came after these runs: every share rule is flagged, and says why
    assert ("| `rope-deposit-first-layer` | 5.1 | share | 1 | `aaaaaaa` (2026-11-26) | **changed 2026-12-06 (its "
            "decision), after its runs were trained (latest 2026-11-25)** | 3 |") in text
    assert "- the share decision (`[decision.share]`, every share rule) version 3 (2026-12-06): fewer than" in text
    assert "(version 2: min_counted 2" in text  # the earlier version's change is kept
    assert "- `random-overfits` version 2 (2026-12-05): a run at the ceiling is not counted" in text
    reg = load_registry()
    changed = [dict(c, version=2, changed="2026-11-27") if c["id"] == "rope-deposit-first-layer" else c
               for c in reg.claims]
    import workbench.report.study as study

    class Changed:  # the claim's own change alone (its decision as registered on 2026-11-26)
        registered, claims = reg.registered, tuple(changed)
        decision = {k: {f: v for f, v in d.items() if f not in ("changed", "change")} for k, d in reg.decision.items()}

        @staticmethod
        def claim(cid):
            return next(c for c in changed if c["id"] == cid)

    import workbench.analysis.claims.registration as registration

    monkeypatch.setattr(study, "load_registry", lambda: Changed)
    monkeypatch.setattr(registration, "load_registry", lambda: Changed)
    flagged = registration_section(cl, frame, commits)
    assert "**changed 2026-11-27, after its runs were trained (latest 2026-11-25)**" in flagged
    prov = _provenance_section(frame.assign(wall_time_s=1.0, cpu_time_s=1.0))
    assert "trained from a dirty tree" in prov and ("1 of 3; 1 shipped without it (before `ship` required it), so "
                                                    "`workbench recreate` may not re-create them bit for bit: "
                                                    "`rope-43` (`abc1234-dirty`)") in prov
    two = frame.assign(wall_time_s=1.0, cpu_time_s=1.0, code_version="abc1234-dirty",
                       code_diff=[True, False, True])  # two of them ship their code.diff (run_table's column)
    prov = _provenance_section(two)
    assert ("3 of 3; 2 ship the diff they were trained with (code.diff: their commit with it applied re-creates "
            "them): `rope-42` (`abc1234-dirty`), `rope-44` (`abc1234-dirty`); 1 shipped without it") in prov


def test_random_overfits_is_decided_by_the_share_rule_once_the_train_accuracy_is_measured():
    def row(gap, contrast_gap=0.0, eval_=True):
        rows = [{"run_id": f"{v}-{s}", "variant": v, "scheme": v, "task": "trigger-distance", "seed": s,
                 "test_acc": 0.90, "test_acc_auc": 0.8,
                 "train_acc_eval": (0.90 + (gap if v == "learned" else contrast_gap)) if eval_ else np.nan}
                for v in ("learned", "sinusoidal") for s in range(42, 52)]
        return row_of(claims(FakeStore([FakeRun(r["run_id"], {}) for r in rows]), _runs_frame(rows)),
                      "learned / random")

    yes = row(0.08)
    assert yes.verdict == "reproduced" and yes.specificity == "specific" and "10 of 10" in yes.evidence
    not_specific = row(0.08, contrast_gap=0.08)  # the contrast passes the same rule: it cannot show the claim
    assert not_specific.specificity == "not specific" and not_specific.verdict == "inconclusive (not specific)"
    assert row(0.01).verdict == "not reproduced"
    assert row(0.08, eval_=False).verdict == "not testable at this preset"  # a running mean is not the statistic


def test_reproduced_stands_only_where_the_contrast_is_shown_to_fail_the_rule():
    """Registered `[decision.share]` version 3: a reproduced whose contrast is mixed, rests on too few runs or has no
    counted run reads inconclusive (specificity not shown); version 2 let it stand (it blocked only a contrast that
    passes). 10 of 10 learned runs overfit; the sinusoidal contrast varies."""
    def row(contrast_gaps):
        rows = [{"run_id": f"learned-{s}", "variant": "learned", "scheme": "learned", "task": "trigger-distance",
                 "seed": s, "test_acc": 0.90, "test_acc_auc": 0.8, "train_acc_eval": 0.98} for s in range(42, 52)]
        rows += [{"run_id": f"sin-{s}", "variant": "sinusoidal", "scheme": "sinusoidal", "task": "trigger-distance",
                  "seed": s, "test_acc": 0.90, "test_acc_auc": 0.8, "train_acc_eval": 0.90 + g}
                 for s, g in zip(range(42, 52), contrast_gaps)]
        return row_of(claims(FakeStore([FakeRun(r["run_id"], {}) for r in rows]), _runs_frame(rows)),
                      "learned / random")

    assert row([0.0] * 10).verdict == "reproduced"  # the contrast fails: 0 of 10, specific
    mixed = row([0.0, 0.08] * 5)  # 5 of 10: the contrast may pass
    assert mixed.specificity == "specificity not shown" and mixed.verdict == "inconclusive (specificity not shown)"
    assert row([0.0] * 3).verdict == "inconclusive (specificity not shown)"  # 3 contrast runs cannot fail it
    none = row([])
    assert none.specificity == "no counted contrast run" and none.verdict == "inconclusive (specificity not shown)"


def test_registration_commits_are_seven_characters_whatever_the_clone_abbreviates_to(tmp_path):
    """git's `%h` grows with the clone's object count (a CI clone wrote 8 characters where this one wrote 7), which
    changed COMPARISON.md; the commit is the full hash's first 7 characters in every clone."""
    import subprocess

    from workbench.report.study import registration_commits

    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git[:3] + ["config", "core.abbrev", "12"], check=True)
    (tmp_path / "registry.toml").write_text("a = 1\n")
    subprocess.run(git + ["add", "registry.toml"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "register"], check=True)
    full = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    [(short, day)] = registration_commits(tmp_path / "registry.toml")
    assert short == full[:7] and len(day) == 10


def test_a_shallow_clone_names_no_registration_commit(tmp_path):
    """In a shallow clone the registry's oldest commit is where the clone was cut: no commit is named (the registry's
    dates are said instead), never the wrong one."""
    import subprocess

    from workbench.report.study import registration_commits

    src = tmp_path / "src"
    git = ["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t"]
    src.mkdir()
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    for i in range(2):
        (src / "registry.toml").write_text(f"a = {i}\n")
        subprocess.run(git + ["add", "registry.toml"], check=True)
        subprocess.run(git + ["commit", "-q", "-m", f"v{i}"], check=True)
    assert len(registration_commits(src / "registry.toml")) == 2
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{src}", str(tmp_path / "cut")], check=True)
    assert registration_commits(tmp_path / "cut" / "registry.toml") == []


def test_random_overfits_leaves_out_runs_at_the_ceiling():
    """`random-overfits` version 2: no gap >= 0.05 can open at >= 98 % test accuracy, so a run at the ceiling is not
    counted (version 1 counted it as disagreeing); every settled run at the ceiling: inconclusive (ceiling)."""
    def row(test, measured=True):
        rows = [{"run_id": f"{v}-{s}", "variant": v, "scheme": v, "task": "trigger-distance", "seed": s,
                 "test_acc": t, "test_acc_auc": 0.8,
                 "train_acc_eval": min(1.0, t + 0.08 * (v == "learned")) if measured else np.nan}
                for v in ("learned", "sinusoidal") for s, t in zip(range(42, 52), test)]
        return row_of(claims(FakeStore([FakeRun(r["run_id"], {}) for r in rows]), _runs_frame(rows)),
                      "learned / random")

    assert row([0.99] * 10).verdict == "inconclusive (ceiling)"
    # every run at the ceiling reads so whether or not the train accuracy was measured (as at `repro`, where it
    # read "not testable at this preset")
    unmeasured = row([0.99] * 10, measured=False)
    assert unmeasured.verdict == "inconclusive (ceiling)" and unmeasured.evidence.startswith("test accuracy at the")
    assert row([0.99] * 5 + [0.90] * 5, measured=False).verdict == "not testable at this preset"
    some = row([0.99] * 5 + [0.90] * 5)  # five at the ceiling left out: 5 of 5 below it overfit
    assert some.verdict == "reproduced" and "5 of 5 counted runs agree" in some.evidence


def test_a_diverged_run_does_not_agree_that_nope_does_not_generalise():
    """`nope-no-generalise-t1` version 2: a diverged run has nothing to show (OUTCOME_RULES), so it is not counted as
    "did not learn" (version 1 counted it as agreeing); every run diverged: inconclusive (did not learn)."""
    def row(diverged):
        rows = [{"run_id": f"nope-{s}", "variant": "nope", "scheme": "nope", "task": "trigger-distance", "seed": s,
                 "test_acc": 0.15, "test_acc_auc": 0.1} for s in (42, 43, 44)]
        frame = _runs_frame(rows)
        frame["diverged"] = frame.seed.isin(diverged)
        frame.loc[frame.diverged, "status"] = "diverged"
        cl = claims(FakeStore([]), frame)
        return cl[(cl.claim == "NoPE does not generalise on Task 1") & (cl.setting == "paper")].iloc[0]

    assert "3 of 3 counted runs agree" in row(set()).evidence
    assert "2 of 2 counted runs agree" in row({44}).evidence
    assert row({42, 43, 44}).verdict == "inconclusive (did not learn)"
    # the contrast by the same rule: RoPE runs that diverged do not count as "did not generalise" either
    rows = [{"run_id": f"{v}-{s}", "variant": v, "scheme": v, "task": "trigger-distance", "seed": s,
             "test_acc": 0.15, "test_acc_auc": 0.1} for v in ("nope", "rope") for s in (42, 43, 44)]
    frame = _runs_frame(rows)
    frame["diverged"] = frame.variant == "rope"
    cl = claims(FakeStore([]), frame)
    nope = cl[(cl.claim == "NoPE does not generalise on Task 1") & (cl.setting == "paper")].iloc[0]
    assert "contrast RoPE Task 1: no counted run" in nope.evidence


def test_an_ordering_reads_the_ceiling_as_the_status_rule_does():
    """0.98 computed as 0.9799999999999999 (a count over n, as floats add it up) is at the ceiling by run_status,
    which compares counts (rounded to 9 decimals): the ordering reads the same, not the raw float."""
    from workbench.analysis.claims.orderings import _at_ceiling

    d = pd.DataFrame({"test_acc": [0.35 * 2.8, 0.97, 0.99]})
    assert 0.35 * 2.8 < 0.98 and _at_ceiling(d).tolist() == [True, False, True]
    assert _at_ceiling(d.assign(ceiling=[False, False, True])).tolist() == [False, False, True]


def test_a_not_specific_share_gates_the_verdict_and_what_a_beyond_the_paper_row_shows():
    """`[decision.share]` version 2 through `_row`: MLA with no indispensable head in 5 of 5 seeds while RoPE of the
    same task has none either: Task 1 reads inconclusive (not specific) in verdict and result; the Task 2 row
    (beyond the paper) keeps its verdict and shows the gate in `result`; the verdict at 0.10 is its share's (the
    contrast was judged at 0.05). Where RoPE has its deposit head, MLA's reproduced stands."""
    def rows(rope_top):
        rs, runs = [], []
        for task in ("trigger-distance", "trigger-count"):
            for v in ("mla", "rope"):
                for s in range(42, 47):
                    rid = f"{v}-{task}-{s}"
                    rs.append({"run_id": rid, "variant": v, "scheme": v, "task": task, "seed": s, "test_acc": 0.95,
                               "test_acc_auc": 0.9})
                    top = 0.01 if v == "mla" else rope_top
                    runs.append(FakeRun(rid, {"ablation": _atlas(lambda l, h: top if (l, h) == (0, 1) else 0.001)}))
        cl = claims(FakeStore(runs), _runs_frame(rs))
        return (row_of(cl, "MLA has no indispensable single head (heads ablated), Task 1"),
                row_of(cl, "MLA has no indispensable single head (heads ablated), Task 2"))

    t1, t2 = rows(0.01)
    assert t1.specificity == "not specific" and t1.verdict == t1.result == "inconclusive (not specific)"
    assert t1.verdict_also == "reproduced" and not t1.threshold_sensitive
    assert t2.verdict == "beyond the paper" and t2.result == "inconclusive (not specific)"
    t1, t2 = rows(0.40)
    assert t1.specificity == "specific" and t1.verdict == t1.result == "reproduced"
    assert t2.verdict == "beyond the paper" and t2.result == "reproduced"


def test_an_ordering_with_every_run_at_the_ceiling_by_run_status_cannot_rank_them():
    """The ordering's ceiling check reads run_status's `ceiling` (counts, rounded): a run whose accuracy adds up to
    0.9799999999999999 is at the ceiling there, and two sides at it cannot be ranked."""
    low = 0.35 * 2.8  # 0.98 as floats add it up
    rows = [{"run_id": f"{v}-{s}", "variant": v, "scheme": v, "task": "trigger-distance", "seed": s,
             "test_acc": low if v == "mla" else 0.99, "test_acc_auc": 0.9, "ceiling": True} for v in ("rope", "mla")
            for s in (42, 43, 44)]
    cl = claims(FakeStore([FakeRun(r["run_id"], {}) for r in rows]), _runs_frame(rows))
    assert row_of(cl, "RoPE beats MLA on Task 1").verdict == "inconclusive (ceiling)"


def test_random_overfits_reads_its_contrast_without_ceiling_runs_too():
    """Version 2 leaves the ceiling runs out of the contrast as well: sinusoidal with 5 runs that overfit beside 5 at
    the ceiling passes the rule 5 of 5 (version 1: 5 of 10, mixed, "specificity not shown"), so the rule cannot tell
    learned from sinusoidal: not specific."""
    rows = [{"run_id": f"{v}-{s}", "variant": v, "scheme": v, "task": "trigger-distance", "seed": s,
             "test_acc": 0.99 if (v == "sinusoidal" and s >= 47) else 0.90, "test_acc_auc": 0.8,
             "train_acc_eval": 1.0} for v in ("learned", "sinusoidal") for s in range(42, 52)]
    row = row_of(claims(FakeStore([FakeRun(r["run_id"], {}) for r in rows]), _runs_frame(rows)), "learned / random")
    assert "contrast sinusoidal Task 1: 5 of 5 counted runs agree" in row.evidence
    assert row.specificity == "not specific" and row.verdict == "inconclusive (not specific)"
