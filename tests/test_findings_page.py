"""The Findings page at a glance (issue 42): the verdict matrix (claims x settings, and x the ladder's rungs) with the
seeds behind each cell, the deposit map, evidence behind a click; tables and figures from `analysis.findings` /
`figures.findings`, on hand-made runs (no training)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.test_repro import FakeRun, FakeStore, _deposit, _runs_frame
from workbench.analysis.claims import base_claims
from workbench.analysis.findings import MemoStore, deposit_map, verdict_matrix
from workbench.figures import FIGURES
from workbench.analysis.settings import SHORT
from workbench.figures.style import verdict_color

RUNGS = ("repro", "repro-long", "repro-wide")


def ladder_runs():
    """NoPE Task 1: did not learn at repro (3 seeds), learned at repro-long (seeds 42, 43) and repro-wide (42)."""
    rows = [{"run_id": f"{p}-n{s}", "variant": "nope", "scheme": "nope", "task": "trigger-distance", "seed": s,
             "test_acc": a, "test_acc_auc": a, "preset": p}
            for p, s, a in (("repro", 42, 0.15), ("repro", 43, 0.15), ("repro", 44, 0.16), ("repro-long", 42, 0.95),
                            ("repro-long", 43, 0.90), ("repro-wide", 42, 0.95))]
    frame = _runs_frame(rows)
    return frame, FakeStore([FakeRun(r, {}) for r in frame.run_id])


@pytest.fixture(scope="module")
def matrix():
    frame, store = ladder_runs()
    bc = base_claims(store, frame, RUNGS)
    return bc, verdict_matrix(bc)


def test_the_verdict_matrix_has_every_base_claim_and_counts_its_seeds(matrix):
    """Every base claim of a setting the store has runs of, each with its verdict and seeds; a setting with no run
    at all (here the authors' settings: only `paper`-arch NoPE runs) is left out, not drawn as a column of
    "pending" cells; with no run of any setting, every claim stays."""
    bc, m = matrix
    base = m[m.rung == "repro"]
    ran = bc.claims[bc.claims.setting == "paper"]
    assert set(bc.claims.setting) > {"paper"} and set(base.setting) == {"paper"}
    assert list(base.claim_no) == list(ran.index)
    row = base[base.claim == "NoPE does not generalise on Task 1"].iloc[0]
    assert row.verdict == bc.claims.loc[row.claim_no, "verdict"] and row.n_seeds == 3
    frame = _runs_frame([{"run_id": "p", "variant": "fope", "scheme": "fope", "task": "trigger-distance",
                          "seed": 42, "test_acc": 0.9, "test_acc_auc": 0.9}])  # a scheme no claim reads
    none_read = base_claims(FakeStore([FakeRun("p", {})]), frame, RUNGS)
    assert (none_read.claims.runs.str.len() == 0).all()
    assert list(verdict_matrix(none_read).claim_no) == list(none_read.claims.index)


def test_other_rungs_read_seed_42_alone_unless_run_with_more_seeds(matrix):
    bc, m = matrix
    claim = "NoPE does not generalise on Task 1"
    nope = m[m.claim == claim].set_index("rung")
    # repro-long has seeds 42 and 43: the verdict the claims' rules give on both (`rung_claims`), with its runs
    on_both = bc.seeded[(bc.seeded.rung == "repro-long") & (bc.seeded.claim == claim)].verdict.iloc[0]
    assert nope.loc["repro-long", "n_seeds"] == 2 and nope.loc["repro-long", "verdict"] == on_both
    assert sorted(nope.loc["repro-long", "runs"]) == ["repro-long-n42", "repro-long-n43"]
    # repro-wide has seed 42 alone: no test (it read "not reproduced"), what seed 42 shows in the evidence
    alone = bc.ladder[(bc.ladder.rung == "repro-wide") & (bc.ladder.claim == claim)].verdict.iloc[0]
    assert alone == "not reproduced" and nope.loc["repro-wide", "n_seeds"] == 1
    assert nope.loc["repro-wide", "verdict"] == "inconclusive (one seed)"
    assert nope.loc["repro-wide", "evidence"].startswith("seed 42 alone (seed 42 does not agree with the paper): ")
    assert not m.loc[m.n_seeds == 1, "verdict"].isin(["reproduced", "not reproduced", "mixed"]).any()
    assert (m.loc[m.rung != "repro", "claim_no"] == -1).all() and "pending" not in set(m.loc[m.rung != "repro",
                                                                                              "verdict"])


def test_the_matrix_leaves_the_seed_study_out_of_the_ladders_cells():
    """The registered seed study's runs (training seeds 45-54 at data seeds 43/44) are judged by the study alone:
    the matrix's cells at a rung run with more seeds pooled them with the runs before it (`every_seed_claims` over
    every run: 'not reproduced, 0 of 22, 13 seeds' where base_claims said 'mixed, 0 of 3')."""
    from workbench.analysis.claims import is_study

    frame, _ = ladder_runs()
    study = _runs_frame([{"run_id": f"study-n{s}", "variant": "nope", "scheme": "nope", "task": "trigger-distance",
                          "seed": s, "data_seed": 43, "test_acc": 0.15, "test_acc_auc": 0.15, "preset": "repro-long"}
                         for s in (45, 46, 47)])
    frame = pd.concat([frame, study], ignore_index=True)
    assert is_study(frame).sum() == 3
    store = FakeStore([FakeRun(r, {}) for r in frame.run_id])
    bc = base_claims(store, frame, RUNGS)
    m = verdict_matrix(bc)
    cell = m[(m.rung == "repro-long") & (m.claim == "NoPE does not generalise on Task 1")].iloc[0]
    assert sorted(cell.runs) == ["repro-long-n42", "repro-long-n43"] and cell.n_seeds == 2
    assert not any(r.startswith("study") for runs in m.runs for r in runs)


def test_the_matrix_figure_colours_each_cell_by_its_verdict_and_writes_its_seeds(matrix):
    _, m = matrix
    for by in ("setting", "rung"):
        fig = FIGURES["verdict_matrix"](m, by=by)
        hm = fig.data[0]
        z, text, idx = np.array(hm.z, float), np.array(hm.text), np.array(hm.customdata)
        scale = hm.colorscale
        n = int(round(hm.zmax + 0.5))
        seen = 0
        for a in range(z.shape[0]):
            for b in range(z.shape[1]):
                if idx[a, b] < 0:
                    assert np.isnan(z[a, b]) and text[a, b] == ""
                    continue
                row = m.loc[idx[a, b]]
                colour = next(c for pos, c in scale if pos >= (z[a, b] + 0.5) / n - 1e-9)  # the cell's band
                assert colour == verdict_color(row.verdict), (row.claim, row.rung)
                assert text[a, b] == str(row.n_seeds)
                assert hm.x[b].replace("<br>", "" if by == "rung" else " ") == (row.rung if by == "rung" else
                                                                                SHORT[row.setting])
                seen += 1
        laddered = set(zip(m.loc[m.rung != "repro", "claim"], m.loc[m.rung != "repro", "setting"]))
        assert seen == ((m.rung == "repro").sum() if by == "setting" else  # by rung: the (claim, setting) rows
                        sum(k in laddered for k in zip(m.claim, m.setting)))  # run at another rung too
        names = [t.name for t in fig.data[1:]]
        assert set(names) == set(m.loc[m.rung == "repro", "verdict"]) if by == "setting" else set(names) <= set(
            m.verdict)


def test_the_deposit_map_takes_each_runs_largest_single_head_deposit():
    dep = _deposit([0, 2])  # both layers hold a single-head deposit of 0.4 ...
    dep.loc[dep.layer == 2, "top_delta"] = 0.6  # ... layer 2's is the largest
    rows = [{"run_id": rid, "variant": v, "scheme": "rope+sinusoidal" if v == "rope" and s == "authors" else v,
             "task": "trigger-distance", "seed": 42, "test_acc": a, "test_acc_auc": a, "setting": s}
            for rid, v, s, a in (("a", "rope", "paper", 0.99), ("b", "mla", "paper", 0.99), ("c", "rope", "authors",
                                                                                             0.99),
                                 ("d", "nope", "paper", 0.1), ("e", "rope-k1-all", "paper", 0.99))]
    runs = _runs_frame(rows)
    cfg = {"model": {"n_layers": 4}}
    fakes = [FakeRun("a", {"deposit": dep}), FakeRun("b", {"deposit": _deposit([])}),
             FakeRun("c", {"deposit": _deposit([1])}), FakeRun("d", {"deposit": _deposit([])}), FakeRun("e", {})]
    for f in fakes:
        f.config = cfg
    d = deposit_map(FakeStore(fakes), runs).set_index("run_id")
    assert list(d.index) == ["a", "c", "b", "d"]  # RoPE (paper, then the authors' tagged one), MLA, NoPE; no partial
    assert (d.loc["a", "layer"], d.loc["a", "head"], d.loc["a", "drop"]) == (2, 3, 0.6)
    assert d.loc["c", "scheme"] == "rope" and d.loc["c", "layer"] == 1  # the authors' RoPE is Table 1's rope
    assert np.isnan(d.loc["b", "layer"]) and d.loc["b", "learned"] and not d.loc["d", "learned"]
    fig = FIGURES["deposit_map"](d.reset_index())
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["deposit"].x) == [2, 1] and list(by_name["deposit"].text) == ["0.60", "0.40"]
    assert list(by_name["no single-head deposit"].x) == [-1] and list(by_name["did not learn"].x) == [-1]
    assert fig.layout.xaxis.ticktext[0] == "none"
    moving = d.reset_index().assign(status=["ceiling, not settled", "learned", "learned", "did not learn"])
    by_name = {t.name: t for t in FIGURES["deposit_map"](moving).data}  # a run still moving: faded, apart
    assert list(by_name["deposit"].x) == [1] and list(by_name["deposit, run still moving (not counted)"].x) == [2]
    assert by_name["deposit, run still moving (not counted)"].marker.opacity < 1


def test_memo_store_reads_each_table_once_and_hands_out_copies():
    reads = []
    run = FakeRun("a", {"deposit": _deposit([1])})
    real = run.load_table
    run.load_table = lambda n: reads.append(n) or real(n)
    memo = MemoStore(FakeStore([run]))
    t = memo.get("a").load_table("deposit")
    t["scratch"] = 1
    assert "scratch" not in memo.get("a").load_table("deposit").columns and reads == ["deposit"]
    assert memo.get("a").id == "a"


def test_a_click_on_a_rung_cell_shows_its_evidence_and_runs(matrix):
    from apps.pages import findings as F

    bc, m = matrix
    i = m[(m.rung == "repro-long") & (m.claim == "NoPE does not generalise on Task 1")].index[0]
    store = ladder_runs()[1]
    for r in store._runs.values():
        r.config = {"model": {"scheme": "nope"}, "task": {"task": "trigger-distance"}, "train": {"seed": 42}}
        r.final = {}
    out = str(F.evidence(store, bc.claims, f"m{i}", m))
    assert "repro-long" in out and "2 seed(s)" in out and "/ablation?run=repro-long-n43" in out
    assert "Pick a claim" in str(F.evidence(store, bc.claims, "m99999", m))
    assert F._key(i, m.loc[i]) == f"m{i}"
    base = m[m.rung == "repro"].index[0]
    assert F._key(base, m.loc[base]) == str(m.loc[base, "claim_no"])


def test_the_seed_study_card_says_first_how_its_setup_differs_from_the_papers():
    """The house rule: what differs from the paper's setup is said first. The study card opens with it (the preset's
    difference, then PE-Lab's models against the paper's: dropout, RoPE without the input sinusoid, MLA, the head
    ablation) before its readouts; an empty study too."""
    import json

    from plotly.utils import PlotlyJSONEncoder

    from apps.pages.findings import _study_view

    from workbench.analysis.claims import TIER_COLUMNS, share_tiers

    card = _study_view(pd.DataFrame(columns=["group"]), pd.DataFrame(),
                       {t: pd.DataFrame(columns=TIER_COLUMNS) for t in share_tiers()})
    text = json.dumps(card, cls=PlotlyJSONEncoder)
    assert "Not the paper's setup" in json.dumps(card.children[1], cls=PlotlyJSONEncoder)  # after the title
    assert "dropout 0 (the paper's 0.1" in text and "RoPE is RoPE alone" in text and "Figure 7" in text
    assert text.index("Not the paper's setup") < text.index("runs shipped")
    # tier 3 says, in its own line, why its NoPE half cannot come out otherwise
    assert "tier 3: NoPE and Relative on Task 1" in text and "permutation-invariant" in text
    assert "tier 4: Relative on Task 1 at `repro-xlong`" in text  # each registered share tier, its own line
    assert "tier 4's runs" not in text  # no run of it: no runs table
    from workbench.analysis.claims import TIER_RUN_COLUMNS

    row = dict.fromkeys(TIER_RUN_COLUMNS) | {"group": "study", "scheme": "relative", "run_id": "t1-relative-x",
                                             "train_seed": 45, "data_seed": 43, "test_acc_epoch1": 0.1,
                                             "test_acc": 0.99, "status": "ceiling", "earlier_tier": 3,
                                             "earlier_test_acc": 0.678, "earlier_status": "still learning",
                                             "earlier_run": "t1-relative-y"}
    card = _study_view(pd.DataFrame(columns=["group"]), pd.DataFrame(),
                       {t: pd.DataFrame(columns=TIER_COLUMNS) for t in share_tiers()},
                       {4: pd.DataFrame([row], columns=TIER_RUN_COLUMNS)})
    text = json.dumps(card, cls=PlotlyJSONEncoder)
    assert "tier 4's runs, each beside the same seeds' run of an earlier tier, never pooled" in text
    assert "tier 3: 67.8 (still learning)" in text and "s45 d43" in text and "tier 3's runs" not in text
