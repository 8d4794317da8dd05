"""The paper-scale column (workbench/report/paper_scale.py): "not run yet" without runs, the runs' numbers with."""
import pytest

from workbench.analysis.claims import claims, run_table, table1
from workbench.report.paper_scale import (NOT_RUN, paper_scale_note, with_paper_scale_claims,
                                          with_paper_scale_table1)
from workbench.store import RunStore
from workbench.train import resolve_config, train


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("paper")
    store = RunStore(root / "runs", data_dir=root / "data")
    cfg = resolve_config("smoke", "rope", "t1", sets=["train.epochs=1", "task.n_examples=400"], store=store)
    run = train(cfg, store, progress=False, device="cpu", threads=1)
    return store, run


def test_without_paper_runs_every_cell_says_not_run_yet(tmp_path, trained):
    store, _ = trained
    runs = run_table(store)
    t1 = with_paper_scale_table1(table1(runs), tmp_path / "absent")
    assert len(t1) and (t1["paper_scale"] == NOT_RUN).all()
    assert t1["paper_scale_mean"].isna().all() and (t1["paper_scale_status"] == "").all()  # no mark on any bar
    cl = with_paper_scale_claims(claims(store, runs), tmp_path / "absent")
    assert (cl["paper_scale"] == NOT_RUN).all()
    (tmp_path / "empty").mkdir()
    note = paper_scale_note(tmp_path / "empty")
    assert NOT_RUN in note and "make repro-gpu TIER=1" in note


def test_with_paper_runs_the_column_holds_their_accuracy(trained):
    store, run = trained
    t1 = with_paper_scale_table1(table1(run_table(store)), store.root)
    row = t1[(t1.scheme == "rope") & (t1.task == "trigger-distance")].iloc[0]
    assert row["paper_scale"].startswith(f"{100 * run.final['test_acc']:.2f} [") and row["paper_scale"].endswith("(1 seed)")
    assert row["paper_scale_mean"] == pytest.approx(run.final["test_acc"]) and row["paper_scale_n_seeds"] == 1
    assert row["paper_scale_seeds"] == f"{100 * run.final['test_acc']:.2f}"
    assert row["paper_scale_status"].startswith("1 ")
    others = t1.drop(index=row.name)  # the Table 1 figure's marks: only the cell trained at paper scale has one
    assert others["paper_scale_mean"].isna().all() and (others["paper_scale"] == "no run").all()
    cl = with_paper_scale_claims(claims(store), store.root)
    for r in cl.itertuples():  # the same store on both sides: each row's own verdict and evidence
        few = " (few runs)" if r.few_runs and r.verdict in ("reproduced", "mixed", "not reproduced") else ""
        assert r.paper_scale == f"{r.verdict}{few}: {r.evidence}"
    assert "1 finished `paper`-preset run in" in paper_scale_note(store.root)


def test_the_readme_line_and_the_page_phrase_read_the_paper_scale_cells(tmp_path, trained):
    """`paper_scale_table1` (the Findings page, the notebook) and `paper_scale_lines` (the README block): the cell
    of the paper store's run beside the CPU mean of the same (setting, scheme, task), in one phrase; nothing
    without paper-scale runs."""
    from workbench.report.paper_scale import cell_phrase, paper_scale_lines, paper_scale_table1

    store, run = trained
    t1 = table1(run_table(store))
    assert paper_scale_table1(t1, tmp_path / "absent").empty and paper_scale_lines(t1, tmp_path / "absent") == []
    rows = paper_scale_table1(t1, store.root)
    row = rows[(rows.scheme == "rope") & (rows.task == "trigger-distance")].iloc[0]
    assert row["mean"] == pytest.approx(run.final["test_acc"]) and row["cpu_mean"] == row["mean"]
    assert list(row["runs"]) == [run.id]
    phrase = cell_phrase(row)
    assert phrase.startswith("RoPE Task 1 (") and f"{100 * run.final['test_acc']:.2f} % (" in phrase
    assert f"CPU repro {100 * run.final['test_acc']:.2f} %" in phrase
    lines = paper_scale_lines(t1, store.root)
    assert lines[0].startswith("At the paper's own scale (1 GPU run in results/paper") and phrase in lines[0]


def test_the_paper_scale_deposit_map_reads_each_shipped_runs_deposit_table(tmp_path):
    """`paper_scale_deposits`: the deposit map of the runs in results/paper (the figure the CPU runs have), one row
    per run with a deposit table, its largest single-head deposit as that table gives it; empty without runs."""
    from pathlib import Path

    from workbench.analysis.claims import largest_deposit
    from workbench.analysis.findings import DEPOSIT_COLUMNS
    from workbench.report.paper_scale import paper_scale_deposits

    empty = paper_scale_deposits(tmp_path / "absent")
    assert empty.empty and list(empty.columns) == DEPOSIT_COLUMNS
    root = Path(__file__).resolve().parents[1] / "results" / "paper"
    dep = paper_scale_deposits(root).set_index("run_id")
    store = RunStore(root, readonly=True)
    with_table = {r for r in store.run_ids() if "deposit" in store.get(r).tables()}
    assert set(dep.index) == with_table and len(with_table) >= 6
    for rid in with_table:
        table = store.get(rid).load_table("deposit")
        top = largest_deposit(table[table.metric == "accuracy"])
        if top is None:
            assert dep.loc[rid].isna()[["layer", "head", "drop"]].all()
        else:
            assert (dep.loc[rid, "layer"], dep.loc[rid, "drop"]) == (top["layer"], pytest.approx(top["top_delta"]))


def test_the_paper_scale_stores_own_comparison_says_what_its_gpu_runs_are():
    """`workbench compare results/paper`: titled GPU, no "at paper scale" column of itself, no CPU-only seed study or
    ladder (named as being in results/repro), the GPUs in its provenance and no CPU bit-for-bit promise, the CPU
    presets' "trained on 2 CPU cores" nowhere, and the registration said to come before the runs by their dates;
    results/repro's keeps its CPU text."""
    from pathlib import Path

    import pandas as pd

    from workbench.report.comparison import _registered_before, comparison_markdown

    results = Path(__file__).resolve().parents[1] / "results"
    text = comparison_markdown(RunStore(results / "paper", readonly=True))
    assert text.startswith("# The core paper at the `paper` preset (GPU): comparison")
    assert "PE-Lab at paper scale" not in text and "| at paper scale |" not in text  # no column of itself
    assert "## The seed study and the scale ladder" in text and "## The scale ladder" not in text
    assert "../repro/COMPARISON.md" in text and "Holds across scale" not in text
    import collections
    import json

    gpus = collections.Counter(json.loads(f.read_text()).get("gpu") or "a GPU, not named"
                               for f in (results / "paper").glob("*/run.json"))  # each run's, as run.json says
    said = text.split("- trained on a GPU: ", 1)[1].split(" (run.json", 1)[0]
    want = [f"{g} ({n})" for g, n in gpus.items()]
    assert want and all(w in said for w in want) and len(said) == len(", ".join(want))
    assert "equal a CPU run bit for bit" not in text and "trained on 2 CPU cores" not in text
    assert "2026-11-26, before the first run here started (2026-11-27 16:02 UTC)" in text  # the H100 run, first
    assert "tier 2 of grids/paper.toml" in text and "tier 4 of grids/paper.toml" in text  # its own grid's tiers
    runs = pd.DataFrame({"started": ["2026-11-26T09:00:00+00:00", "2026-11-28T10:00:00+00:00"]})
    assert _registered_before(runs, "2026-11-26").startswith("not before the first run here started")
    assert _registered_before(runs.iloc[1:], "2026-11-26").startswith("before the first run here started")
    assert "cannot be told" in _registered_before(pd.DataFrame({"started": [None]}), "2026-11-26")


def test_the_paper_store_is_read_once_per_state(trained, monkeypatch):
    """The four paper-scale cell families (Table 1 text and marks, the page's rows, the claims, the deposits) read
    the paper store's run table once while it stays the same, and again once it changes."""
    import workbench.analysis.claims as claims_pkg
    from workbench.report import paper_scale as ps

    store, run = trained
    calls = []
    real = claims_pkg.run_table
    monkeypatch.setattr(claims_pkg, "run_table", lambda s=None, runs=None: calls.append(1) or real(s, runs))
    monkeypatch.setattr(ps, "_RUNS", {})
    t1 = table1(real(store))
    ps.with_paper_scale_table1(t1, store.root), ps.paper_scale_table1(t1, store.root)
    ps.with_paper_scale_claims(claims(store, real(store)), store.root), ps.paper_scale_deposits(store.root)
    assert len(calls) == 1
    runs = ps.paper_runs(store.root)[1]
    runs["extra"] = 1  # a caller's column does not reach the cache
    assert "extra" not in ps.paper_runs(store.root)[1] and len(calls) == 1
    run.update_info(note="touched")  # run.json rewritten: a new state of the store
    ps.paper_runs(store.root)
    assert len(calls) == 2


def test_the_paper_scale_cells_pool_the_paper_preset_only():
    """`paper_scale.at_scale`: a `smoke` run or a seed-study run shipped beside the `paper` runs of results/paper is
    never averaged into a paper-scale cell (the CPU column pools its base preset only); a store without a `paper`
    run keeps its most common preset."""
    import pandas as pd

    from workbench.report.paper_scale import at_scale

    runs = pd.DataFrame({"run_id": ["a", "b", "c", "d"], "preset": ["paper", "smoke", "paper", "paper"],
                         "seed": [42, 42, 43, 45], "data_seed": [42, 42, 42, 42]})
    assert list(at_scale(runs)["run_id"]) == ["a", "c"]  # seed 45: the registered study's
    assert list(at_scale(runs.assign(preset=["smoke", "smoke", "cpu", "cpu"]).iloc[:3])["run_id"]) == ["a", "b"]
    assert at_scale(runs.iloc[:0]).empty


def test_a_paper_scale_cell_marks_few_runs_on_a_test_verdict_only():
    """"(few runs)" qualifies a share decision (reproduced / mixed / not reproduced); on "inconclusive (one seed)"
    it would say the same thing twice."""
    from types import SimpleNamespace

    from workbench.report.paper_scale import paper_scale_cell

    assert paper_scale_cell(SimpleNamespace(verdict="mixed", few_runs=True, evidence="e")) == "mixed (few runs): e"
    assert paper_scale_cell(SimpleNamespace(verdict="inconclusive (one seed)", few_runs=True, evidence="e")) == \
        "inconclusive (one seed): e"


def test_the_paper_grid_is_the_repro_grid_at_the_paper_preset():
    """grids/paper.toml says it is grids/repro.toml tier for tier (same schemes, variants, settings and seeds) at the
    `paper` preset: a variant, seed list or setting changed in one and not the other fails here."""
    from workbench.train.sweep import load_grid

    repro, paper = load_grid("grids/repro.toml"), load_grid("grids/paper.toml")
    assert (repro.pop("name"), repro.pop("preset"), paper.pop("name"), paper.pop("preset")) == (
        "repro", "repro", "paper", "paper")
    assert paper == repro
