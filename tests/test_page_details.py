"""The details of issue 42 on the figure objects: layer numbers are never averaged, accuracy reads in percent."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.figures import FIGURES


def partial_table(layers, accs):
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(len(layers))], "variant": "partial", "k": 1, "layer": 0,
                         "scheme": "rope", "task": "trigger-distance", "test_acc": accs,
                         "deepest_deposit_layer": layers, "seed": range(len(layers))})


def test_partial_rope_shows_the_layer_most_seeds_have_and_accuracy_in_percent():
    fig = FIGURES["partial_rope"](partial_table([1.0, 5.0, 1.0], [0.9, 0.8, 1.0]))
    acc, layer = fig.data
    assert np.asarray(layer.z).ravel().tolist() == [1.0], "the layer of two seeds of three, not their mean 2.33"
    assert np.asarray(acc.z).ravel().tolist() == [90.0] and acc.zmax == 100
    assert "%" in acc.colorbar.title.text
    tie = FIGURES["partial_rope"](partial_table([2.0, 4.0, np.nan], [0.5, 0.5, 0.5]))
    assert np.asarray(tie.data[1].z).ravel().tolist() == [2.0], "a tie: the shallower layer, still a layer"


def test_mla_rope_nope_bars_are_in_percent():
    df = pd.DataFrame({"run_id": ["a", "b"], "scheme": ["mla", "rope"], "task": "trigger-count", "test_acc": [1.0, 0.5],
                       "paper_test_acc": [0.9741, 0.6943], "n_single_deposits": [0, 1]})
    fig = FIGURES["mla_rope_nope"](df)
    assert list(fig.data[0].y) == [100.0, 50.0] and fig.layout.yaxis.range[1] > 100
    assert abs(fig.data[1].y[0] - 97.41) < 1e-9 and "%" in fig.layout.yaxis.title.text


def test_rotary_frequencies_keep_three_significant_digits():
    from workbench.figures.style import round_table

    t = round_table(pd.DataFrame({"plane": [0, 1, 2, 3], "theta": [1.0, 0.031622776, 0.001, 0.0000316227766],
                                  "share_a": [0.12345, 0.5, 0.25, 0.0]}))
    assert t["theta"].tolist() == [1.0, 0.0316, 0.001, 3.16e-05], "no rotating plane shows as 0"
    assert t["share_a"].tolist() == [0.123, 0.5, 0.25, 0.0]


def test_extrapolation_legend_names_the_dotted_loss_lines():
    df = pd.DataFrame({"run_id": "r", "scheme": "rope", "task": "trigger-distance", "split": ["test", "len2x"],
                       "max_len": [48, 96], "accuracy": [0.9, 0.5], "loss": [0.3, 1.2]})
    fig = FIGURES["extrapolation"](df)
    loss = [t for t in fig.data if t.y is not None and list(t.y) == [0.3, 1.2]]
    assert loss and loss[0].line.dash == "dot" and loss[0].showlegend is False
    key = [t for t in fig.data if t.showlegend is not False and "loss" in (t.name or "")]
    assert len(key) == 1 and key[0].line.dash == "dot"


def test_distance_preference_per_head_reads_whatever_the_logit_scale():
    """One head with logit differences in the thousands stretches the histogram's shared bins; the share of pairs
    with the nearer key ahead is unit-free: each head's own cell, 0 = no preference."""
    rows = [{"run_id": "r", "scheme": "rope", "task": "trigger-distance", "layer": l, "head": h, "bin_lo": -7000.0,
             "bin_hi": 7000.0, "count": 10, "mean_diff": 5000.0 if (l, h) == (1, 0) else 0.1,
             "share_positive": sp} for (l, h), sp in {(0, 0): 0.9, (0, 1): 0.5, (1, 0): 0.2, (1, 1): 0.6}.items()]
    fig = FIGURES["distance_bias_share"](pd.DataFrame(rows))
    hm = fig.data[0]
    np.testing.assert_allclose(np.asarray(hm.z, float), [[0.4, 0.0], [-0.3, 0.1]], atol=1e-12)
    assert hm.zmid == 0 and hm.zmin == -0.5 and hm.zmax == 0.5


def test_spectral_bars_end_inside_the_axis_and_the_tall_ones_carry_their_value():
    rows = [{"layer": l, "head": h, "eig_range": 5e4 if (l, h) == (1, 0) else 30.0 + h, "eig_min": 0.1, "eig_max": 1.0,
             "cond": 10.0, "mean_logit": 1.0} for l in range(2) for h in range(4)]
    fig = FIGURES["spectral_eigen"](pd.DataFrame(rows))
    lo, hi = fig.layout.yaxis.range
    assert 10 ** hi > 5e4 and 10 ** lo < 30, "every bar ends inside the log axis"
    labelled = [(t.name, x, s) for t in fig.data for x, s in zip(t.x, t.text) if s]
    assert labelled == [("layer 1", 0, "5e+04")], labelled


# ---- one unit for accuracy on the pages: percent ----------------------------------------------------------------
def _data_table(children):
    """The first DataTable in a page body (a list of Dash components)."""
    from dash import dash_table

    stack = list(children)
    while stack:
        c = stack.pop(0)
        if isinstance(c, dash_table.DataTable):
            return c
        kids = getattr(c, "children", None)
        stack[:0] = kids if isinstance(kids, list) else [kids] if kids is not None else []
    return None


def test_extrapolation_page_table_and_run_labels_show_accuracy_in_percent():
    from types import SimpleNamespace

    from apps import common as C
    from apps.pages import _diagnostic, extrapolation
    from apps.pages.runs import _describe

    table = pd.DataFrame({"run_id": "r", "scheme": "rope", "task": "trigger-distance", "split": ["test", "len2x"],
                          "max_len": [48, 96], "n": 100, "accuracy": [0.99812, 0.5], "acc_lo": [0.99, 0.4],
                          "acc_hi": [1.0, 0.6], "loss": [0.01, 1.2]})
    run = SimpleNamespace(id="r", status="finished", info={}, config={"model": {"scheme": "rope"}},
                          metrics=lambda: pd.DataFrame(),
                          has_checkpoint=lambda: True, has_table=lambda n: True, load_table=lambda n: table,
                          final={"test_acc": 0.98765, "train_acc": 1.0, "test_loss": 0.04321, "wall_time_s": 12.34},
                          tables=lambda: ["extrapolation"], provenance_of=lambda n: None)
    store = SimpleNamespace(query=lambda **k: pd.DataFrame({"id": ["r"]}), get=lambda rid: run)
    shown = _data_table(_diagnostic.render(extrapolation.SPEC, store, ["r"]))
    rows = shown.data
    assert rows[0]["accuracy"] == 99.81 and rows[1]["acc_lo"] == 40.0 and rows[0]["loss"] == 0.01, rows
    assert table["accuracy"].iloc[0] == 0.99812, "the stored table stays a fraction"
    row = {"id": "r", "variant": "rope", "task": "trigger-distance", "test_acc": 0.98765}
    assert C.run_label(row).endswith("acc 98.8 % — r"), "no status word where the rules have not read the run"
    assert "acc 98.8 % still learning" in C.run_label(row | {"run_status": "still learning"})
    assert "acc 98.8 % at the ceiling, not settled" in C.run_label(row | {"run_status": "ceiling, not settled"})
    d = _describe(run)
    assert d["final.test_acc (%)"] == 98.77 and d["final.train_acc (%)"] == 100.0 and d["final.test_loss"] == 0.043


def test_runs_index_shows_accuracy_in_percent_and_the_registered_run_status():
    from types import SimpleNamespace

    from apps.pages.runs import _with_tables

    df = pd.DataFrame({"id": ["a", "b"], "setting": "paper", "preset": "repro", "task": "trigger-distance",
                       "variant": "rope", "seed": [1, 2], "test_acc": [0.9876, 0.3], "train_acc": [1.0, 0.95],
                       "run_status": ["still learning", "did not learn"]})
    store = SimpleNamespace(get=lambda rid: SimpleNamespace(tables=lambda: ["ablation"]))
    shown = _with_tables(store, df).set_index("id")
    assert shown.loc["a", "test_acc"] == 98.76 and shown.loc["b", "train_acc"] == 95.0
    assert list(shown["shows"]) == ["still learning", "did not learn"]


def test_run_labels_read_the_registered_run_rules_not_an_accuracy_threshold(tmp_path, monkeypatch):
    """The pickers' status word is the run's status by the registered rules (claims.status_of_run), as COMPARISON.md
    gives it: the authors' RoPE at 91.6 % rose over its last half ("still learning", which a >= 0.5 threshold called
    "learned"); it is computed once per run and state."""
    from pathlib import Path

    import apps.common as C
    from workbench.analysis import claims
    from workbench.store import RunStore, StoreSet

    shipped = RunStore(Path(__file__).resolve().parents[1] / "results" / "repro", readonly=True)
    stores = StoreSet(RunStore(tmp_path / "own", create=False), shipped)
    ids = ["t1-rope-repro-s42-40a0c6", "t1-nope-repro-s44-107c44", "t1-rope-repro-s42-e451f6"]
    table = claims.run_table(runs=[shipped.get(i) for i in ids]).set_index("run_id")
    from workbench.analysis.claims import runs as claim_runs

    calls = []
    real = claims.status_of_run
    monkeypatch.setattr(claim_runs, "status_of_run", lambda run, *a: calls.append(run.id) or real(run, *a))
    monkeypatch.setattr(C, "_STATUS", {})
    filters = dict(scheme=["rope", "rope+sinusoidal", "nope"], task="trigger-distance", preset="repro")  # not all 245
    df = C.index(stores, **filters)
    got = df.set_index("id").loc[ids, "run_status"]
    assert list(got) == [table.loc[i, "status"] for i in ids] == ["still learning", "did not learn", "ceiling"]
    labels = {o["value"]: o["label"] for o in C.run_options(df)}
    assert "acc 91.6 % still learning" in labels[ids[0]] and "acc 15.2 % did not learn" in labels[ids[1]]
    assert "acc 100.0 % at the ceiling —" in labels[ids[2]]
    assert C.learned(df.set_index("id").loc[ids[0]]) and not C.learned(df.set_index("id").loc[ids[1]])
    n = len(calls)
    assert n == len(df[df.epoch > 0])
    C.index(stores, **filters)
    assert len(calls) == n, "a second page load reads no run again"
    from apps.pages.runs import _describe

    d = _describe(shipped.get(ids[0]))  # the Runs page's comparison: the status and why, as COMPARISON.md says it
    why = d["shows.why"]
    assert d["shows"] == "still learning" and why == table.loc[ids[0], "why"] and "epoch 1 -> 3" in why


def test_index_statuses_reads_each_run_once_per_state_and_never_lends_one_runs_status_to_another():
    """`claims.index_statuses`: rows without a path are kept apart by id; a row without an epoch, or whose run cannot
    be read, has no status; the memo serves a row while its index state is the same and re-reads it once it moves."""
    from types import SimpleNamespace

    from workbench.analysis.claims import index_statuses
    from workbench.store import StoreError

    def run(accs):
        m = pd.DataFrame({"epoch": range(1, len(accs) + 1), "test_acc": accs, "train_loss": 0.1, "test_loss": 0.1})
        return SimpleNamespace(metrics=lambda: m, config={"model": {"n_classes": 26}}, info={})

    runs = {"flat": run([0.95, 0.95, 0.951]), "rising": run([0.3, 0.6, 0.9])}
    reads = []

    def get(rid):
        reads.append(rid)
        if rid == "gone":
            raise StoreError("unknown run 'gone'")
        return runs[rid]

    store = SimpleNamespace(get=get)
    index = pd.DataFrame({"id": ["flat", "rising", "new", "gone"], "path": None, "epoch": [3, 3, 0, 3],
                          "status": "finished", "updated": "t0", "test_acc": [0.951, 0.9, None, 0.5]})
    memo: dict = {}
    assert index_statuses(store, index, memo) == ["learned", "still learning", None, None]
    assert index_statuses(store, index, memo) == ["learned", "still learning", None, None] and len(reads) == 3
    runs["rising"] = run([0.3, 0.9, 0.9, 0.905])  # epoch 2 -> 4: +0.005, settled
    index.loc[1, ["epoch", "updated", "test_acc"]] = [4, "t1", 0.905]
    assert index_statuses(store, index, memo)[:2] == ["learned", "learned"] and reads[3:] == ["rising"]


def test_the_ablation_and_heads_pages_read_a_runs_heads_by_its_status(tmp_path):
    """A run that did not learn gets a warning above its heads (Ablation, Heads and the diagnostic pages) and a
    "cannot tell" deposit sentence; one still learning a note and a provisional sentence; a run at the ceiling
    (learned, settled) neither: the same reading as the pickers' status word and COMPARISON.md's
    (`claims.status_of_run`)."""
    import json
    from pathlib import Path

    from apps.pages import _diagnostic, ablation, distance_bias, heads
    from workbench.analysis import deposit
    from workbench.analysis.claims import status_of_run
    from workbench.store import RunStore, StoreSet

    shipped = RunStore(Path(__file__).resolve().parents[1] / "results" / "repro", readonly=True)
    stores = StoreSet(RunStore(tmp_path / "own", create=False), shipped)
    still, no, ceiling = "t1-rope-repro-s42-40a0c6", "t1-nope-repro-s44-107c44", "t1-rope-repro-s42-e451f6"

    def text(parts) -> str:
        return json.dumps([p.to_plotly_json() if hasattr(p, "to_plotly_json") else p for p in parts], default=str)

    for rid, status in ((still, "still learning"), (no, "did not learn"), (ceiling, "ceiling")):
        reading = status_of_run(shipped.get(rid))
        assert reading["status"] == status
        page = text(ablation.render(stores, rid, "accuracy", "zero"))
        raw = deposit.deposit_sentence(deposit.compute(shipped.get(rid).load_table("ablation"), metric="accuracy"))
        hints, _, sentence = heads.render_map(stores, rid, "n_agree")
        hints = text(hints)
        diag = text(_diagnostic.render(distance_bias.SPEC, stores, [rid]))  # a diagnostic page, one note a run
        if status == "did not learn":
            warn = f"{rid} did not learn the task by the registered run rules ({reading['why']})"
            assert warn in page and warn in hints and warn in diag and "hint-warn" in page
            assert f"cannot tell, the run did not learn ({reading['why']}): {raw}" in page
            assert sentence.startswith(f"cannot tell, the run did not learn ({reading['why']}): ")
        elif status == "still learning":
            note = f"{rid} is still learning by the registered run rules ({reading['why']})"
            assert note in page and note in hints and note in diag
            assert f"{raw} (provisional: the run is still learning, {reading['why']};" in page
            assert "(provisional: the run is still learning" in sentence
        else:
            assert "by the registered run rules" not in page + hints + diag and "provisional" not in page + sentence
            assert "cannot tell" not in page + sentence and f'"{raw}"' in page


def test_the_partial_rope_pages_tables_read_each_runs_deposit_by_its_status(tmp_path):
    """The Partial RoPE page's tables (partial RoPE; MLA vs RoPE vs NoPE) give each run's status by the registered
    run rules (`shows`) and read its deposit sentence by it: at `repro` the `paper` arch's NoPE runs did not learn,
    so their deposit sentence reads "cannot tell"; a run that learned and settled keeps its sentence."""
    from pathlib import Path

    from apps.pages import partial_rope
    from workbench.analysis.claims import NOT_LEARNED, run_table
    from workbench.store import RunStore, StoreSet

    def tables(component) -> list:  # the DataTables' rows, anywhere in a page's components
        found = [component.data] if hasattr(component, "data") and isinstance(component.data, list) else []
        kids = getattr(component, "children", None)
        for kid in kids if isinstance(kids, list) else [kids] if kids is not None else []:
            found += tables(kid)
        return found

    shipped = RunStore(Path(__file__).resolve().parents[1] / "results" / "repro", readonly=True)
    stores = StoreSet(RunStore(tmp_path / "own", create=False), shipped)
    cards = partial_rope.render_related(stores, "trigger-distance", "repro/paper")
    related = sum((tables(c) for c in cards), [])
    main = sum((tables(c) for c in partial_rope.render(stores, "trigger-distance", "repro/paper")), [])
    # the card beside the paper's Table 1 numbers says first how the `repro` preset differs from the paper's setup
    mla_card = next(c for c in cards if "Table 1" in c.children[0].children)
    box = mla_card.children[1]
    assert box.className == "disclaimer" and "Read this first: results at the " in str(box.children[0])
    assert len(related) == 2 and len(main) == 1
    rows = [r for t in related + main for r in t]
    table = run_table(runs=[shipped.get(i) for i in {r["run_id"] for r in rows}]).set_index("run_id")
    for r in rows:
        st = table.loc[r["run_id"], "status"]
        assert r["shows"] == st
        if "deposit" in r:
            assert r["deposit"].startswith("cannot tell, the run did not learn: ") == (st in NOT_LEARNED)
            assert r["deposit"].endswith(")") or "provisional" not in r["deposit"]
    shows = {r["shows"] for r in rows}
    assert "did not learn" in shows and "ceiling" in shows, shows  # NoPE did not learn; some RoPE runs settled
    settled = [r for r in rows if r["shows"] == "ceiling" and "deposit" in r]
    assert settled and all("provisional" not in r["deposit"] and "cannot tell" not in r["deposit"] for r in settled)
    still = [r for r in rows if r["shows"] == "still learning" and "deposit" in r]
    assert still and all(r["deposit"].endswith(" (provisional: the run is still learning)") for r in still)


def test_the_runs_comparison_says_what_made_each_runs_tables():
    """The Runs page's comparison groups a run's tables by what made them (code version, day, threads: each table's
    provenance) in the order of its tables, the ones without a record last; a run none of whose tables records it shows no such field."""
    from types import SimpleNamespace

    from apps.pages.runs import _made_by

    made = {"ablation": {"code_version": "2d0d6e3", "analysed": "2026-12-02T07:00:00+00:00",
                         "numerics": {"threads": 1}},
            "deposit": {"code_version": "2d0d6e3", "analysed": "2026-12-02T07:01:00+00:00", "numerics": {"threads": 1}},
            "probes": None,
            "dla": {"code_version": "0f079c6", "analysed": "2026-12-01T23:00:00+00:00", "numerics": {"threads": 2}}}
    run = SimpleNamespace(tables=lambda: list(made), provenance_of=made.get)
    assert _made_by(run) == ("2d0d6e3 on 2026-12-02 at 1 thread(s): ablation, deposit; 0f079c6 on 2026-12-01 at 2 "
                             "thread(s): dla; not recorded: probes")
    assert _made_by(SimpleNamespace(tables=lambda: ["probes"], provenance_of=lambda n: None)) == ""


def test_the_runs_comparison_says_which_tables_were_refreshed_and_why():
    """run.json `refreshed` (`workbench verify --refresh`) read as one field: each refresh's tables, day, code and the
    changes they predated; nothing for a run never refreshed."""
    from apps.pages.runs import _refreshed

    info = {"refreshed": [{"refreshed": "2026-12-02T09:41:09+00:00", "code_version": "1f5c075",
                           "tables": ["probes", "head_summary"], "changes": ["6a3fc22"]}]}
    assert _refreshed(info) == "probes, head_summary on 2026-12-02 by 1f5c075 (made before 6a3fc22)"
    assert _refreshed({}) == ""


def test_a_figure_shown_again_is_not_drawn_again_and_a_changed_table_is(monkeypatch):
    """`figure_or_hint` keeps each figure's JSON by builder, table content, arguments and height: the same table
    shown again calls no builder and gives the same figure; another table, argument or height draws; a builder
    that fails is a hint, and nothing is kept for it."""
    from dash import dcc

    from apps import common as C
    from workbench.figures.kept import Kept

    kept, calls = Kept(8), []
    monkeypatch.setattr(C, "_drawn", lambda: kept)
    real = FIGURES["partial_rope"]
    monkeypatch.setitem(FIGURES, "partial_rope", lambda df, **kw: (calls.append(len(df)), real(df, **kw))[1])
    table = partial_table([1.0, 5.0, 1.0], [0.9, 0.8, 1.0])

    first = C.figure_or_hint("partial_rope", table, height=300)
    again = C.figure_or_hint("partial_rope", table.copy(), height=300)
    assert isinstance(first, dcc.Graph) and calls == [3] and again.figure is first.figure
    assert first.figure["layout"]["height"] == 300 and len(first.figure["data"]) == 2
    C.figure_or_hint("partial_rope", table, height=400)
    C.figure_or_hint("partial_rope", partial_table([1.0, 5.0], [0.9, 0.8]), height=300)
    assert calls == [3, 3, 2] and len(kept) == 3
    monkeypatch.setitem(FIGURES, "partial_rope", lambda df, **kw: 1 / 0)
    hint = C.figure_or_hint("partial_rope", table.assign(k=2))
    assert not isinstance(hint, dcc.Graph) and "ZeroDivisionError" in str(hint) and len(kept) == 3


def test_compare_two_runs_marks_only_fields_that_differ():
    """Two seeds of NoPE in the encoder arch, stored before and after `train.fused_attention` existed: the Compare
    table reads the older config with the value it implicitly had (`store.with_later_defaults`), as the one-setting
    table does, so only the seeds differ (it marked `'' != False` for 10 of the 43 multi-seed groups)."""
    from pathlib import Path

    from apps.pages.runs import _describe
    from workbench.store import RunStore

    shipped = Path(__file__).resolve().parent.parent / "results" / "repro"
    ids = ["t1-nope-encoder-repro-s42-a0225f", "t1-nope-encoder-repro-s44-a440ed"]
    if not all((shipped / i).is_dir() for i in ids):
        pytest.skip("no shipped results in this checkout")
    a, b = (_describe(RunStore(shipped, readonly=True).get(i)) for i in ids)
    config = {k for k in set(a) | set(b) if k.split(".")[0] in ("model", "task", "train")}
    differ = sorted(k for k in config if str(a.get(k)) != str(b.get(k)))
    assert differ == ["model.seed", "train.seed"], differ


def test_the_runs_comparison_shows_every_accuracy_in_percent_and_a_tiny_loss_as_it_is():
    """The Compare table showed `final.train_acc (%) 99.29` beside `final.train_acc_eval 1.0` (a fraction), and a
    test loss of 4.5e-7 as 0.0, so two runs whose losses differ tenfold read equal."""
    from pathlib import Path

    from apps.pages.runs import _describe
    from workbench.store import RunStore

    shipped = Path(__file__).resolve().parent.parent / "results" / "repro"
    ids = ["t1-rope-decoder-repro-s43-ad01ce", "t1-rope-repro-long-s52-d43-1aaba5", "t1-rope-repro-long-s54-d43-5595f0"]
    if not all((shipped / i).is_dir() for i in ids):
        pytest.skip("no shipped results in this checkout")
    store = RunStore(shipped, readonly=True)
    a, b, c = (_describe(store.get(i)) for i in ids)
    assert "final.train_acc_eval" not in a and a["final.train_acc_eval (%)"] == round(
        100 * store.get(ids[0]).final["train_acc_eval"], 2)
    losses = [store.get(i).final["test_loss"] for i in ids[1:]]
    assert max(losses) < 1e-5 and b["final.test_loss"] != c["final.test_loss"]
    assert b["final.test_loss"] == pytest.approx(losses[0], rel=1e-2) and b["final.test_loss"] > 0


def test_the_run_set_beside_another_is_nope_of_its_task_setting_and_preset(tmp_path):
    """`common.partner_run`, the Ablation page's run B and the Runs page's comparison alike: beside RoPE at
    `repro-long` (PE-Lab's `paper` arch), NoPE of that preset, setting and task (the Runs page matched task and
    setting only, so a `repro` NoPE could stand beside a `repro-long` RoPE)."""
    from pathlib import Path

    from apps import common as C
    from workbench.store import StoreSet

    shipped = Path(__file__).resolve().parent.parent / "results" / "repro"
    a = "t1-rope-repro-long-s42-df23f5"
    if not (shipped / a).is_dir():
        pytest.skip("no shipped results in this checkout")
    (tmp_path / "own").mkdir()
    df = C.index(StoreSet.open(tmp_path / "own", shipped=shipped))
    b = df.set_index("id").loc[C.partner_run(df, a)]
    ra = df.set_index("id").loc[a]
    assert b["scheme"] == "nope" and (b["preset"], b["setting"], b["task"]) == (ra["preset"], ra["setting"], ra["task"])
    assert C.partner_run(df, None) is None
