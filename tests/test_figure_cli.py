"""`workbench figure`: what it offers it can draw, its hints name real `analyze` options, and bad input is refused
before anything is drawn (no browser needed: the export is replaced)."""
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.cli.figure import figure_table
from workbench.figures import ELSEWHERE, FIGURES, MULTI_RUN, TABLE_OF

SHIPPED = Path(__file__).resolve().parents[1] / "results" / "repro"
ROPE, NOPE = "t1-rope-repro-s42-e451f6", "t1-nope-repro-s43-8d1651"


def _per_run(name: str) -> bool:
    from workbench.analysis import EXPERIMENTS, STANDALONE

    return name not in ELSEWHERE and TABLE_OF[name] not in EXPERIMENTS and TABLE_OF[name] not in STANDALONE


@pytest.fixture(scope="module")
def empty_run(tmp_path_factory):
    """A run created but never trained or analysed (no tables), in its own store."""
    from workbench.store import RunStore
    from workbench.train import resolve_config

    base = tmp_path_factory.mktemp("fig")
    store = RunStore(base / "runs", data_dir=base / "data")
    return store, store.create(resolve_config(preset="smoke", store=store)).id


@pytest.mark.parametrize("name", sorted(n for n in FIGURES if _per_run(n)))
def test_a_missing_tables_hint_is_the_analyze_command_that_stores_it(empty_run, name):
    """`--what qks`, `--what ablation-resample`, `--what ablation` for ablation_mean were hinted: each hint's --what
    and --mode exist and store the very table the figure reads."""
    from workbench.analysis.ablation import MODES, table_name
    from workbench.cli.analyze import NAMES

    store, rid = empty_run
    with pytest.raises(ValueError) as e:
        figure_table(store, rid, name)
    m = re.search(rf"`workbench analyze {rid} --what (\S+)(?: --mode (\S+))?`", str(e.value))
    assert m, str(e.value)
    what, mode = m.group(1), m.group(2) or "zero"
    assert what in NAMES and mode in MODES, str(e.value)
    assert (table_name(mode) if NAMES[what] == "ablation" else NAMES[what]) == TABLE_OF[name]


def invoke(args, tmp_path):
    return CliRunner().invoke(app, ["figure", *args, "--out", str(tmp_path / "f.svg"), "--root", str(tmp_path),
                                    "--shipped", str(SHIPPED)], env={"COLUMNS": "250"})


@pytest.fixture
def written(monkeypatch):
    from workbench.figures import export

    out = []
    monkeypatch.setattr(export, "write_figure", lambda fig, path, **kw: out.append(path))
    return out


@pytest.mark.parametrize("name", sorted(ELSEWHERE))
def test_figures_drawn_from_no_stored_table_are_refused_with_where_they_are_drawn(name, tmp_path, written):
    for run in ("-", "all", ROPE):
        r = invoke([run, name.replace("_", "-")], tmp_path)
        assert r.exit_code == 2 and f"cannot draw {name}" in r.output and ELSEWHERE[name] in r.output, r.output
    r = invoke([ROPE, "nothing"], tmp_path)
    assert r.exit_code == 2 and "unknown figure" in r.output and name not in r.output
    assert written == []


@pytest.mark.parametrize("args, says", [
    ([f"{ROPE},{NOPE}", "ablation"], "figure ablation draws one run: give one run id"),
    ([ROPE, "ablation", "--kw", "metric=bogus"], "the ablation table has no rows for metric='bogus'; it has metrics"),
    ([ROPE, "convergence"], f"RUN '{ROPE}': figure convergence draws the runs a query selects"),
    ([ROPE, "hadamard-check"], "figure hadamard_check reads no run; give '-'"),
    (["-", "ablation"], "figure ablation draws a run's table: give a run id"),
])
def test_figure_refuses_bad_input_before_it_draws(args, says, tmp_path, written):
    r = invoke(args, tmp_path)
    assert r.exit_code == 2 and says in r.output and "--runs" not in r.output, r.output
    assert written == []


@pytest.mark.parametrize("name", MULTI_RUN)
def test_the_figures_of_several_runs_draw_each_run(name, tmp_path, written):
    from workbench.store import RunStore

    store = RunStore(SHIPPED, readonly=True)
    one, two = (pd.concat([store.get(r).load_table(TABLE_OF[name]) for r in rids], ignore_index=True)
                for rids in ([ROPE], [ROPE, NOPE]))
    assert len(FIGURES[name](two).data) > len(FIGURES[name](one).data)
    r = invoke([f"{ROPE},{NOPE}", name], tmp_path)
    assert r.exit_code == 0 and len(written) == 1, r.output
