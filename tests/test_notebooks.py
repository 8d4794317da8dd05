"""The notebooks run top to bottom (nbclient), so they never rot. A failing cell fails the test with the cell's
traceback. Notebooks 01-03 run in both modes:

* shipped (the default): on a small shipped store built from the smoke store (tables, no weights); nothing is
  trained, the cells that need a model print the `workbench recreate` command; with the runs re-created into
  the own store (a copy of the smoke store: same ids, with weights) those cells run; on an empty shipped store
  the notebooks say so instead of failing;
* train (PELAB_TRAIN=1): at the smoke preset, on a copy of the smoke store.
"""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

import browser as B
from workbench.train.presets import scale_disclaimer

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
TUTORIALS = ["01_head_ablation.ipynb", "02_partial_rope_mla.ipynb", "03_patching_and_probes.ipynb"]
LIVE = ["01_head_ablation.ipynb", "03_patching_and_probes.ipynb"]  # the ones with cells that need a model
PLOTLY = "application/vnd.plotly.v1+json"


def execute(names: list[str], cwd: Path, environ: dict[str, dict[str, str]] | None = None
            ) -> dict[str, tuple[list[dict], str]]:
    """Run the notebooks one after the other in one kernel, each from an empty namespace (`%reset -f` before its
    first cell; one kernel start instead of one per notebook), with `environ[name]` set in the kernel's environment
    before it (its parameters cell reads them). name -> (its outputs, its printed text and text/plain displays
    joined)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb, spans = None, {}
    for name in names:
        src = nbformat.read(NOTEBOOKS / name, as_version=4)
        nb = nb or nbformat.v4.new_notebook(metadata=src.metadata)
        start = len(nb.cells)
        nb.cells.append(nbformat.v4.new_code_cell("%reset -f"))
        if environ and name in environ:
            nb.cells.append(nbformat.v4.new_code_cell(f"import os\nos.environ.update({environ[name]!r})"))
        nb.cells += src.cells
        spans[name] = (start, len(nb.cells))
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:03d}"
    nbclient.NotebookClient(nb, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}}).execute()
    out = {}
    for name, (a, b) in spans.items():
        outputs = [o for c in nb.cells[a:b] if c.cell_type == "code" for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"]
        out[name] = outputs, "\n".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in outputs)
    return out


def n_figures(outputs: list[dict]) -> int:
    return sum(PLOTLY in o.get("data", {}) for o in outputs)


def markdown(outputs: list[dict]) -> str:
    """The notebook's displayed markdown (`display(Markdown(...))`: the scale disclaimer), joined."""
    return "\n".join(o.get("data", {}).get("text/markdown", "") for o in outputs)


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """A shipped results store: the smoke store's analysed runs (RoPE with every per-head table, NoPE, partial
    RoPE, RoPE on Task 2) plus a smoke MLA run with a stored deposit table only (lean, as the seed study's runs are
    shipped), all shipped without weights. The RoPE run's ablation table is recomputed on a seeded sample of its
    test split, as `workbench ship --max-examples` does. Beside them a RoPE Task 1 run of a second preset, as the
    scale ladder's rungs share the `repro` runs' seeds: recorded as `repro-wide` (smoke-sized), with a lower seed
    than the smoke runs and every per-head table, so a notebook that does not keep to one preset picks it.
    Returns (store, the smoke store, the MLA run's id, the other preset's run id)."""
    from workbench.analysis import ANALYSES, ablation, deposit
    from workbench.analysis.common import tag
    from workbench.store import RunStore
    from workbench.store.ship import ship_run
    from workbench.train import resolve_config, train

    smoke = B.smoke_store()
    base = tmp_path_factory.mktemp("nb-shipped")
    dest = base / "repro"
    shutil.copytree(smoke.shipped, dest)
    with B.torch_threads(1):
        scratch = RunStore(base / "runs", data_dir=Path(smoke.root).parent / "data_cache")
        mla = train(resolve_config(preset="smoke", scheme="mla", task="trigger-distance", store=scratch), scratch,
                    progress=False, threads=1)
        deposit.run(mla)  # the ablation sweep first, then its deposit table
        ship_run(mla, dest)
        small = [("model.d_model", 32), ("model.n_heads", 4), ("model.d_ff", 64), ("model.n_layers", 2),
                 ("task.preset", "smoke"), ("train.epochs", 1), ("train.batch_size", 64)]
        other = train(resolve_config(preset="repro-wide", scheme="rope", task="trigger-distance", seed=41,
                                     sets=small, store=scratch), scratch, progress=False, threads=1)
        for name in ("ablation", "deposit", "ablation_resample", "patching", "probes", "trigger_attention", "dla",
                     "head_summary"):
            df = ANALYSES[name](other)
            if not other.has_table(name):
                other.save_table(name, df)
        ship_run(other, dest)
        rope = RunStore(Path(smoke.root), data_dir=Path(smoke.root).parent / "data_cache").get(smoke.rope)
        ds = rope.load_dataset()
        sample = tag(ablation.compute(rope.load_model(), ds, n_boot=50, max_examples=len(ds.test_x) * 2 // 3), rope)
    from workbench.store.ship import refresh_tables

    # the shipped bundle's ablation replaced by the sample, its manifest re-written (a loose tables/ file in a shipped
    # run is damage: it would be read before the checked bundle)
    refresh_tables(dest, rope.id, {"ablation": sample}, {}, {"why": "the test's sample of the test split"})
    return dest, smoke, mla.id, other.id


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Shipped mode by default: no PELAB_TRAIN, an own store that does not exist yet."""
    monkeypatch.delenv("PELAB_TRAIN", raising=False)
    monkeypatch.delenv("PELAB_RUN_ID", raising=False)
    monkeypatch.setenv("PELAB_PRESET", "smoke")
    monkeypatch.setenv("PELAB_THREADS", "1")
    monkeypatch.setenv("PELAB_RUNS", str(tmp_path / "own" / "runs"))
    monkeypatch.setenv("PELAB_DATA", str(tmp_path / "own" / "data_cache"))
    return monkeypatch


@pytest.mark.slow
def test_notebooks_train_at_smoke_preset(tmp_path, env):
    """Train mode, the three in one kernel, each on its own copy of the smoke store (runs/ + data_cache/: a
    notebook may add runs, and none sees another's)."""
    smoke = B.smoke_store()
    env.setenv("PELAB_TRAIN", "1")
    stores = {}
    for name in TUTORIALS:
        work = tmp_path / name.split("_")[0]
        shutil.copytree(Path(smoke.root).parent, work)
        stores[name] = {"PELAB_RUNS": str(work / "runs"), "PELAB_DATA": str(work / "data_cache")}
    for name, (outputs, text) in execute(TUTORIALS, tmp_path, stores).items():
        root = Path(stores[name]["PELAB_RUNS"])
        assert {f"train mode: preset smoke, store {p}" in text for p in (root, root.resolve())} != {False}, name
        # the notebook's figures were produced (plotly mime bundles), not just text
        assert n_figures(outputs), f"{name}: no plotly figure output"
        assert scale_disclaimer("smoke") in markdown(outputs), name  # how the runs' preset differs from the paper's
        if name in LIVE:
            assert "workbench recreate" not in text, name  # trained runs have their weights: every cell ran


@pytest.mark.slow
def test_notebooks_read_shipped_runs_without_training(shipped, tmp_path, env):
    """Each notebook reads the runs of one preset, the base one (`smoke` here, as `repro` in results/repro): never
    the other preset's run with the lower seed; each shows that preset's scale disclaimer; NB3 names a head the
    paper would (a single-head deposit) or says there is none."""
    dest, smoke, mla, other = shipped
    env.setenv("PELAB_SHIPPED", str(dest))
    before = snapshot(dest)
    results = execute(TUTORIALS, tmp_path)
    assert not (tmp_path / "own").exists()  # nothing trained, nothing written to the own store
    assert snapshot(dest) == before          # the shipped store was only read
    for name, (outputs, text) in results.items():
        assert f"shipped runs in {dest}, 5 at the `smoke` preset" in text
        assert other not in text, name  # the other preset's run: not shown, not picked
        assert scale_disclaimer("smoke") in markdown(outputs), name
        assert scale_disclaimer("repro-wide") not in markdown(outputs), name
        if name == "02_partial_rope_mla.ipynb":
            for rid in (smoke.rope, smoke.nope, smoke.partial, mla):  # every shipped Task 1 run at the preset
                assert rid in text
            assert "4 runs at the `smoke` preset with an ablation table; not shown: 1 at `repro-wide`" in text
            assert smoke.count not in text and "not shipped yet (grids/repro.toml" in text
            assert n_figures(outputs) >= 4  # partial RoPE, MLA vs RoPE vs NoPE, two atlases
        else:
            assert smoke.rope in text
            assert f"`workbench recreate {smoke.rope} --root {tmp_path / 'own' / 'runs'}`" in text
            assert "agree" not in text and "by hand" not in text  # the cells that need the model did not run
            assert n_figures(outputs) >= 3
    # NB3's head: the largest single-head deposit of the run, or none named (the smoke run has none, so far)
    from workbench.analysis.experiments import run_deposit
    from workbench.store import RunStore

    stats = run_deposit(RunStore(dest, readonly=True).get(smoke.rope), compute_missing=False)
    single = stats[(stats.metric == "accuracy") & (stats.pattern == "single-head")]
    text = results["03_patching_and_probes.ipynb"][1]
    if len(single):
        best = single.sort_values("top_delta", ascending=False).iloc[0]
        assert f"the head the paper would name: layer {best.layer}, head {best.top_head}, the largest" in text
    else:
        assert "no single-head deposit, so no head the paper would name" in text
        assert "the head the paper would name: layer" not in text


@pytest.mark.slow
def test_notebook_03_on_a_run_shipped_without_its_tables_says_what_is_missing(shipped, tmp_path, env):
    """NB3 named (PELAB_RUN_ID) a shipped run that lacks the per-head tables (as the seed study's runs are shipped:
    ablation and deposit only): it says which are missing, which shipped runs have them and how to make them,
    instead of failing on the first one; once they are made as it says, it reads the run's analysed copy."""
    dest, smoke, mla, _ = shipped
    env.setenv("PELAB_SHIPPED", str(dest))
    env.setenv("PELAB_RUN_ID", mla)
    (outputs, text), = execute(["03_patching_and_probes.ipynb"], tmp_path).values()
    assert (f"{mla} is shipped without the tables ['ablation_resample', 'patching', 'probes', 'trigger_attention', "
            "'dla', 'head_summary'] that this notebook reads (it has ['ablation', 'deposit'])") in text
    assert "at the `smoke` preset with all of them: none" in text  # the only MLA run
    own = tmp_path / "own" / "runs"
    assert (f"`workbench recreate {mla} --root {own}`, then `workbench analyze {mla} --root {own} --what "
            "resample,patching,probes,trigger-attention,dla,head-summary`") in text
    assert n_figures(outputs) == 0 and "test accuracy" not in text  # no cell went on with the run
    # as it says: the run re-created into the own store (here: copied from where it trained, with its weights and
    # tables) and analysed there by the command it names; then the notebook reads that copy
    from typer.testing import CliRunner

    from workbench.cli import app

    shutil.copytree(dest.parent / "runs" / mla, own / mla)
    shutil.copytree(Path(smoke.root).parent / "data_cache", tmp_path / "own" / "data_cache")
    res = CliRunner().invoke(app, ["analyze", mla, "--root", str(own), "--n-boot", "50", "--what",
                                   "resample,patching,probes,trigger-attention,dla,head-summary"])
    assert res.exit_code == 0, res.output
    (outputs, text), = execute(["03_patching_and_probes.ipynb"], tmp_path).values()
    assert "is shipped without the tables" not in text and f"{mla} mla trigger-distance preset smoke" in text
    assert n_figures(outputs) >= 3  # the stored tables' figures, from the analysed copy


@pytest.mark.slow
def test_notebooks_use_shipped_runs_recreated_into_the_own_store(shipped, tmp_path, env):
    """The own store holds the shipped runs with their weights (as `workbench recreate` leaves them): the cells
    that need the model run, on the shipped tables (NB1's hand-made check matches the sampled ablation table)."""
    dest, smoke, _, _ = shipped
    env.setenv("PELAB_SHIPPED", str(dest))
    env.setenv("PELAB_RUN_ID", smoke.rope)  # NB3 names its run (the test above lets it pick one)
    shutil.copytree(Path(smoke.root).parent, tmp_path / "own")
    runs_before = sorted(p.name for p in (tmp_path / "own" / "runs").iterdir())
    results = execute(LIVE, tmp_path)
    for name, (outputs, text) in results.items():
        assert "workbench recreate" not in text
    assert "nnsight and TransformerLens agree" in results[LIVE[0]][1] and "(table: " in results[LIVE[0]][1]
    assert "patching effect of" in results[LIVE[1]][1] and "AtP estimate" in results[LIVE[1]][1]
    assert "edges sum to" in results[LIVE[1]][1] and "by input (AtP*, AtP)" in results[LIVE[1]][1]
    assert "logits; made up by later heads" in results[LIVE[1]][1]  # self-repair
    assert sorted(p.name for p in (tmp_path / "own" / "runs").iterdir()) == runs_before  # no run trained


@pytest.mark.slow
def test_notebooks_on_an_empty_shipped_store_say_so(tmp_path, env):
    env.setenv("PELAB_SHIPPED", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    for name, (outputs, text) in execute(TUTORIALS, tmp_path).items():
        assert "no run is shipped" in text and "PELAB_TRAIN=1" in text, name
    assert not (tmp_path / "own").exists()


def make_notebooks():
    spec = importlib.util.spec_from_file_location("make_notebooks", NOTEBOOKS / "make_notebooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_setup_cells_pick_shipped_runs_by_query(shipped, tmp_path, env, capsys):
    """The parameter and helper cells of notebooks 01-03, run in this process: runs are found by scheme, task,
    scheme_kwargs and tables; a missing one and a missing model are said, with the command to run."""
    pytest.importorskip("nbformat")
    dest, smoke, mla, other = shipped
    env.setenv("PELAB_SHIPPED", str(dest))
    mod, ns = make_notebooks(), {}
    exec(mod.PARAMS + mod.HELPERS, ns)
    get_run, live = ns["get_run"], ns["live"]
    assert ns["BASE"] == "smoke" and other in set(ns["catalog"].run_id)
    # the base preset's run, not the other preset's with the lower seed
    assert get_run("rope").id == smoke.rope and get_run("mla").id == mla
    assert get_run("rope", rope_heads=1, rope_layers=[0]).id == smoke.partial
    assert get_run("rope", "trigger-count").id == smoke.count
    assert get_run("nope", tables=["patching"]) is None  # shipped without the per-head tables
    assert get_run("alibi") is None
    out = capsys.readouterr().out
    assert "No nope run on trigger-distance at the `smoke` preset with the tables ['patching'] is shipped" in out
    assert "No alibi run" in out
    assert live(get_run("rope")) is None
    assert f"`workbench recreate {smoke.rope} --root {tmp_path / 'own' / 'runs'}`" in capsys.readouterr().out
    shutil.copytree(Path(smoke.root).parent, tmp_path / "own")  # as if re-created: same ids, with weights
    exec(mod.PARAMS + mod.HELPERS, ns)
    mine = ns["live"](ns["get_run"]("rope"))
    assert mine.id == smoke.rope and mine.has_weights and mine.path.parent == tmp_path / "own" / "runs"


def test_committed_notebooks_are_what_make_notebooks_writes(tmp_path):
    pytest.importorskip("nbformat")
    mod = make_notebooks()
    for name, cells in mod.NOTEBOOKS.items():
        assert mod.write(name, cells, tmp_path).read_text() == (NOTEBOOKS / name).read_text(), \
            f"{name} differs from its cell sources: run `python notebooks/make_notebooks.py`"


def test_notebook_03_names_the_largest_single_head_deposit(shipped, env, capsys):
    """NB3's head is the one the paper would name: the top head of the single-head deposit layer with the largest
    delta, not the largest zero-ablation delta overall (that one can sit in an average-deposit layer). The cell
    runs in this process on the shipped smoke RoPE run, with its deposit statistics re-labelled: the layer of the
    largest delta an average deposit, the other a single-head deposit."""
    pytest.importorskip("nbformat")
    dest, smoke, _, _ = shipped
    env.setenv("PELAB_SHIPPED", str(dest))
    mod, ns = make_notebooks(), {}
    exec(mod.PARAMS + mod.HELPERS, ns)
    run = ns["shipped"].get(smoke.rope)
    stats = ns["deposit_of"](run).reset_index(drop=True)
    assert len(stats) == 2  # the smoke model's two layers
    first = int(stats.top_delta.idxmax())
    stats["pattern"] = ["average" if i == first else "single-head" for i in range(len(stats))]
    named = stats.drop(index=first).iloc[0]
    ns.update(run=run, deposit_of=lambda r: stats)
    cell, = [c.source for c in mod.NB3 if c.cell_type == "code" and "the head the paper would name" in c.source]
    exec(cell, ns)
    assert (ns["L"], ns["H"]) == (int(named.layer), int(named.top_head)) != (int(stats.layer[first]),
                                                                             int(stats.top_head[first]))
    assert (f"the head the paper would name: layer {int(named.layer)}, head {int(named.top_head)}, the largest of its "
            "1 single-head deposit(s)") in capsys.readouterr().out
    assert int(ns["top"]["layer"]) == ns["L"] and int(ns["top"]["head"]) == ns["H"]  # the row cell 2 reads
