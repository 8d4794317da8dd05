"""Issue 26, by fault injection: damaged copies of shipped runs (truncated / garbage files), killed parents, hostile
inputs. Every test here failed before its fix."""
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from workbench.store import RunStore, StoreError, finished_runs

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "results" / "repro"
# RoPE on Task 1 in PE-Lab's settings, three seeds: Table 1's cell that one damaged run would shrink
ROPE_T1 = [r for r in ("t1-rope-repro-s42-e451f6", "t1-rope-repro-s43-096a4b", "t1-rope-repro-s44-7eff0c")
           if (SHIPPED / r).is_dir()]


def _copy(tmp_path: Path, ids) -> Path:
    if not ids:
        pytest.skip("no shipped results in this checkout")
    dst = tmp_path / "shipped"
    for rid in ids:
        shutil.copytree(SHIPPED / rid, dst / rid)
    return dst


def _damage(folder: Path, what: str) -> None:
    """Inject one fault into a run folder."""
    if what == "truncated run.json":
        p = folder / "run.json"
        p.write_bytes(p.read_bytes()[:40])
    elif what == "run.json null":
        (folder / "run.json").write_text("null")
    elif what == "config.json []":
        (folder / "config.json").write_text("[]")
    elif what == "garbage metrics":
        (folder / "metrics.jsonl").write_bytes(b"\x00garbage{{{\n")
    elif what == "truncated parquet":
        p = next((folder / "tables").glob("deposit*.parquet"))
        p.write_bytes(p.read_bytes()[:100])
    else:
        raise AssertionError(what)


FAULTS = ["truncated run.json", "run.json null", "config.json []", "garbage metrics", "truncated parquet"]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_damaged_run_is_listed_as_corrupt_not_dropped(fault, tmp_path):
    """finished_runs (what compare, the dashboard's Findings and notebooks read through claims.run_table) keeps
    the readable runs and names the damaged one with a reason that holds no absolute path."""
    from workbench.analysis.claims import run_table

    root = _copy(tmp_path, ROPE_T1[:2])
    _damage(root / ROPE_T1[0], fault)
    store = RunStore(root, readonly=True)
    runs, corrupt = finished_runs(store)
    assert [r.id for r in runs] == [ROPE_T1[1]]
    assert list(corrupt) == [ROPE_T1[0]] and str(tmp_path) not in corrupt[ROPE_T1[0]]
    table = run_table(store)
    assert list(table.run_id) == [ROPE_T1[1]] and list(table.attrs["corrupt"]) == [ROPE_T1[0]]


def test_run_json_null_is_corrupt_not_created(tmp_path):
    root = _copy(tmp_path, ROPE_T1[:1])
    _damage(root / ROPE_T1[0], "run.json null")
    run = RunStore(root, readonly=True).get(ROPE_T1[0])
    with pytest.raises(StoreError, match="run.json"):
        run.status  # noqa: B018
    assert RunStore(root, readonly=True).query().status.tolist() == ["corrupt"]


def test_store_errors_name_the_file_without_absolute_paths(tmp_path):
    """The index's error column (the dashboard's Runs page shows it) never reveals where the store lives."""
    root = _copy(tmp_path, ROPE_T1[:1])
    _damage(root / ROPE_T1[0], "truncated run.json")
    err = RunStore(root, readonly=True).query().error.iloc[0]
    assert f"{ROPE_T1[0]}/run.json" in err and str(tmp_path) not in err and str(root.resolve()) not in err


@pytest.mark.parametrize("fault", ["config.json []", "garbage metrics", "truncated parquet"])
def test_compare_lists_a_damaged_run_and_computes_from_the_rest(fault, tmp_path):
    """compare exits 0, lists the damaged run with its reason under "Runs that could not be read" and computes from
    the other runs (Table 1's RoPE cell says 2 seeds, not silently 3 -> 2)."""
    from workbench.cli import app

    root = _copy(tmp_path, ROPE_T1)
    _damage(root / ROPE_T1[0], fault)
    res = CliRunner().invoke(app, ["compare", str(root), "--grid", str(tmp_path / "none.toml")])
    assert res.exit_code == 0, res.output
    text = (root / "COMPARISON.md").read_text()
    section = text[text.index("## Runs that could not be read"):text.index("## Table 1")]
    assert f"`{ROPE_T1[0]}`" in section and "computed from the other" in section
    assert str(tmp_path) not in text
    assert "100.00 [100.00, 100.00] (2 seeds)" in text  # Table 1: RoPE, Task 1, PE-Lab settings
