"""`workbench analyze` on a tiny trained run in a temporary store."""
import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.cli.analyze import parse_what

TINY = ["train.epochs=1", "task.n_examples=300", "task.extrap_size=20"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from workbench.store import RunStore
    from workbench.train import resolve_config, train

    root = tmp_path_factory.mktemp("runs")
    st = RunStore(root / "runs", data_dir=root / "data")
    ids = {}
    for name, scheme, seed in (("rope", "rope", None), ("learned", "learned", None), ("rope2", "rope", 43)):
        cfg = resolve_config(preset="smoke", scheme=scheme, task="trigger-distance", seed=seed, sets=TINY, store=st)
        ids[name] = train(cfg, st, progress=False).id
    return st, ids


def test_parse_what():
    assert parse_what("qk-means,ablation", False) == ["ablation", "deposit", "qk_means"]
    assert parse_what("distance_bias", False) == ["distance_bias"]
    assert len(parse_what(None, True)) == 17


def test_analyze_all_saves_tables_and_prints_the_deposit_sentence(store):
    st, ids = store
    res = CliRunner().invoke(app, ["analyze", ids["rope"], "--all", "--n-boot", "50", "--root", str(st.root)])
    assert res.exit_code == 0, res.output
    assert "RoPE, Task 1:" in res.output
    assert set(st.get(ids["rope"]).tables()) == {"ablation", "deposit", "qk_means", "angles", "spectral",
                                                 "distance_bias", "extrapolation", "ablation_resample", "patching",
                                                 "attribution", "edges", "qkv", "probes", "trigger_attention", "dla",
                                                 "self_repair", "head_summary"}
    assert "deposit heads (>= 2 methods agree, the dla vote on the margin vs the runner-up)" in res.output
    assert "vs the runner-up class: layer" in res.output  # dla's line
    assert "logits; its zero ablation" in res.output  # self-repair's line
    assert st.get(ids["rope"]).load_table("head_summary")["self_repair"].notna().all()
    # one epoch on 300 examples: the run did not learn, so its deposit sentence is "cannot tell", with the rule's why
    from workbench.analysis.claims import NOT_LEARNED, status_of_run

    reading = status_of_run(st.get(ids["rope"]))
    assert reading["status"] in NOT_LEARNED
    flat = " ".join(res.output.split())
    assert f"{ids['rope']} ({reading['status']}: {' '.join(reading['why'].split())})" in flat  # the table's title
    assert f"cannot tell, the run did not learn ({' '.join(reading['why'].split())}): RoPE, Task 1:" in flat


def test_analyze_says_plainly_what_does_not_apply(store):
    st, ids = store
    res = CliRunner().invoke(app, ["analyze", ids["learned"], "--what", "angles,extrapolation", "--root",
                                   str(st.root)])
    assert res.exit_code == 3, res.output
    assert "not applicable" in res.output and "rope" in res.output
    assert st.get(ids["learned"]).tables() == []
    res = CliRunner().invoke(app, ["analyze", ids["learned"], "--what", "bogus", "--root", str(st.root)])
    assert res.exit_code == 2 and "unknown analysis" in res.output


def test_ig_steps_reach_attribution_and_edges(store):
    """`--ig-steps` makes attribution AtP-IG and edges EAP-IG, stored in their tables and said in the summary."""
    st, ids = store
    res = CliRunner().invoke(app, ["analyze", ids["rope"], "--what", "attribution,edges", "--ig-steps", "3",
                                   "--n-pairs", "16", "--n-boot", "20", "--root", str(st.root)])
    assert res.exit_code == 0, res.output
    run = st.get(ids["rope"])
    atp, eap = run.load_table("attribution"), run.load_table("edges")
    assert (atp["ig_steps"] == 3).all() and (atp["method"] == "atp_ig").all() and (eap["ig_steps"] == 3).all()
    assert "3 IG steps, completeness" in res.output


def test_grad_drop_reaches_attribution(store):
    """`--grad-drop` stores the GradDrop score of every site and says the largest; together with --ig-steps it is
    refused with the reason."""
    st, ids = store
    res = CliRunner().invoke(app, ["analyze", ids["rope"], "--what", "attribution", "--grad-drop", "--n-pairs", "16",
                                   "--n-boot", "20", "--root", str(st.root)])
    assert res.exit_code == 0, res.output
    atp = st.get(ids["rope"]).load_table("attribution")
    assert atp["grad_drop"].notna().all() and (atp["grad_drop"] >= 0).all()
    assert "largest GradDrop score" in res.output
    res = CliRunner().invoke(app, ["analyze", ids["rope"], "--what", "attribution", "--grad-drop", "--ig-steps", "2",
                                   "--n-pairs", "8", "--root", str(st.root)])
    assert res.exit_code != 0 and "choose one" in res.output


def test_self_repair_measure_and_mode_reach_the_table(store):
    st, ids = store
    res = CliRunner().invoke(app, ["analyze", ids["rope"], "--what", "self-repair", "--measure", "runner_up", "--mode",
                                   "mean", "--max-examples", "20", "--n-boot", "20", "--root", str(st.root)])
    assert res.exit_code == 0, res.output
    df = st.get(ids["rope"]).load_table("self_repair")
    assert (df["measure"] == "runner_up").all() and (df["mode"] == "mean").all() and (df["n_examples"] == 20).all()
    assert "largest direct effect (runner_up)" in res.output and "its mean ablation" in res.output
    res = CliRunner().invoke(app, ["analyze", ids["rope"], "--what", "self-repair", "--measure", "prob", "--root",
                                   str(st.root)])
    assert res.exit_code == 2 and "--measure 'prob'" in res.output


def test_dla_measure_reaches_the_head_summary(store):
    """`--dla-measure mean` makes the head summary's dla vote read the margin vs the mean over classes (the default:
    vs the runner-up class), stored with the table and said in the summary line; an unknown margin is refused before
    any work."""
    st, ids = store
    res = CliRunner().invoke(app, ["analyze", ids["rope"], "--what", "dla,head-summary", "--dla-measure", "mean",
                                   "--n-boot", "20", "--root", str(st.root)])
    assert res.exit_code == 0, res.output
    hs = st.get(ids["rope"]).load_table("head_summary")
    assert (hs["dla_measure"] == "mean").all() and hs["dla_runner_up"].notna().all()
    assert "the dla vote on the margin vs the mean" in res.output
    res = CliRunner().invoke(app, ["analyze", ids["rope"], "--what", "head-summary", "--dla-measure", "median",
                                   "--root", str(st.root)])
    assert res.exit_code == 2 and "--dla-measure 'median'" in res.output


def test_runs_rules_adds_what_each_run_can_show(store, tmp_path):
    """`workbench runs --rules`: each run's status by the registered run rules (claims.status_of_run), in the table
    (`shows`) and the JSON (`run_status`); without the flag neither, and no run is read."""
    import json

    from workbench.analysis.claims import status_of_run

    st, ids = store
    (tmp_path / "no-shipped").mkdir()
    base = ["runs", "--root", str(st.root), "--shipped", str(tmp_path / "no-shipped")]
    res = CliRunner().invoke(app, base + ["--rules", "--json"])
    assert res.exit_code == 0, res.output
    got = {r["id"]: r["run_status"] for r in json.loads(res.output)}
    want = {rid: status_of_run(st.get(rid))["status"] for rid in ids.values()}
    assert got == want and all(isinstance(v, str) and v for v in got.values())
    table = CliRunner().invoke(app, base + ["--rules"]).output
    assert "shows" in table and all(v in table for v in want.values())
    plain = CliRunner().invoke(app, base + ["--json"]).output
    assert "run_status" not in plain and "shows" not in CliRunner().invoke(app, base).output


def test_resample_with_mode_resample_runs_the_resample_ablation(store):
    """`--what resample --mode resample` ran nothing (exit 0): now it stores the resample ablation."""
    st, ids = store
    assert not st.get(ids["rope2"]).has_table("ablation_resample")
    res = CliRunner().invoke(app, ["analyze", ids["rope2"], "--what", "resample", "--mode", "resample", "--n-boot",
                                   "20", "--root", str(st.root)])
    assert res.exit_code == 0, res.output
    assert "ablation_resample" in res.output and st.get(ids["rope2"]).has_table("ablation_resample")
    assert "[resample]" in res.output  # the summary's tag printed as text, not read as rich markup


def test_deposit_computes_a_missing_ablation_table_with_the_commands_options(store):
    """`--what deposit` without a stored ablation table computes it first with --max-examples / --n-boot / --seed
    (it was computed with the defaults: every test example, 1000 resamples)."""
    st, ids = store
    assert not st.get(ids["rope2"]).has_table("ablation")
    res = CliRunner().invoke(app, ["analyze", ids["rope2"], "--what", "deposit", "--max-examples", "5", "--n-boot",
                                   "20", "--seed", "3", "--root", str(st.root)])
    assert res.exit_code == 0, res.output
    run = st.get(ids["rope2"])
    assert {"ablation", "deposit"} <= set(run.tables()) and (run.load_table("ablation")["n_examples"] == 5).all()
    assert "largest accuracy drop" in res.output  # the ablation's own line: it was run, not fetched behind


def test_aggregate_pools_only_seeds_of_one_configuration(store):
    """RoPE and a learned PE in one deposit sentence: refused before any work, naming what differs."""
    st, ids = store
    res = CliRunner().invoke(app, ["analyze", ids["rope"], ids["learned"], "--what", "ablation", "--aggregate",
                                   "--root", str(st.root)], env={"COLUMNS": "250"})
    assert res.exit_code == 2, res.output
    assert "these runs differ in model.scheme (rope / learned)" in res.output and ".seed" not in res.output
    assert st.get(ids["learned"]).tables() == []


def test_aggregate_reads_a_config_stored_before_a_field_existed_with_its_default():
    """Two seeds, one config stored before `model.attn_pad_mask` existed (its implicit value, True, is the
    other's): seeds of one configuration, pooled (the raw configs differ in the field's presence)."""
    from types import SimpleNamespace

    from workbench.cli.analyze import check_aggregate
    from workbench.train.presets import resolve_config

    new, old = resolve_config("smoke", "rope", seed=42), resolve_config("smoke", "rope", seed=43)
    assert new["model"]["attn_pad_mask"] is True
    del old["model"]["attn_pad_mask"]
    check_aggregate([SimpleNamespace(id="a", config=new), SimpleNamespace(id="b", config=old)], ["ablation"])


def test_aggregate_says_when_fewer_than_two_ablation_tables_were_computed(store, monkeypatch):
    import workbench.analysis as A

    st, ids = store
    real = A.ANALYSES["ablation"]

    def ablation(run, **kw):
        if run.id == ids["rope2"]:
            raise RuntimeError("simulated")
        return real(run, **kw)

    monkeypatch.setitem(A.ANALYSES, "ablation", ablation)
    res = CliRunner().invoke(app, ["analyze", ids["rope"], ids["rope2"], "--what", "ablation", "--aggregate",
                                   "--n-boot", "20", "--root", str(st.root)])
    assert res.exit_code == 1, res.output
    assert "no mean over runs: 1 of the 2 runs' ablation tables computed" in " ".join(res.output.split())


def test_the_pooled_deposit_names_the_runs_the_rules_do_not_count(store):
    """`--aggregate` pools the ablation tables of seeds of one configuration; the line says which of them did not
    learn (and so do not count)."""
    st, ids = store
    res = CliRunner().invoke(app, ["analyze", ids["rope"], ids["rope2"], "--what", "ablation", "--aggregate",
                                   "--n-boot", "20", "--root", str(st.root)])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert "mean over 2 runs (2 of them the registered run rules do not count: " in flat
    assert f"{ids['rope']} did not learn" in flat and f"{ids['rope2']} did not learn" in flat


def test_a_damaged_training_record_makes_the_deposit_sentence_say_it_cannot_tell(store, tmp_path):
    """A run whose metrics.jsonl cannot be read has no reading by the run rules: `analyze` says it cannot tell
    whether the run learned (naming the file), never prints the deposit sentence as an unqualified finding."""
    import shutil

    from workbench.store import RunStore

    st, ids = store
    root = tmp_path / "runs"
    RunStore(root, data_dir=st.data_dir)
    shutil.copytree(st.get(ids["rope2"]).path, root / st.get(ids["rope2"]).path.name)
    metrics = root / st.get(ids["rope2"]).path.name / "metrics.jsonl"
    metrics.write_bytes(metrics.read_bytes()[:30])
    res = CliRunner().invoke(app, ["analyze", ids["rope2"], "--what", "deposit", "--n-boot", "5", "--max-examples",
                                   "40", "--root", str(root)])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert "cannot tell whether the run learned (run" in flat and "metrics.jsonl" in flat
    assert "cannot tell whether it learned:" in flat  # the table's title says it too


def test_each_table_records_the_parameters_it_was_made_with(store, tmp_path):
    """`analyze --seed` (and n_boot, mode, max_examples) change a table's numbers: its provenance records them,
    defaults included (`analysis.recording`), and a deposit computed from a missing ablation table records each
    table's own parameters."""
    import shutil

    from workbench.store import RunStore

    st, ids = store
    root = tmp_path / "runs"
    RunStore(root, data_dir=st.data_dir)
    shutil.copytree(st.get(ids["rope2"]).path, root / st.get(ids["rope2"]).path.name)
    res = CliRunner().invoke(app, ["analyze", ids["rope2"], "--what", "ablation,qk-means", "--n-boot", "7", "--seed",
                                   "5", "--max-examples", "40", "--root", str(root)])
    assert res.exit_code == 0, res.output
    run = RunStore(root).get(ids["rope2"])
    abl = run.provenance_of("ablation")["parameters"]
    assert abl["seed"] == 5 and abl["n_boot"] == 7 and abl["max_examples"] == 40 and abl["mode"] == "zero"
    assert run.provenance_of("qk_means")["parameters"]["seed"] == 5
    from workbench.analysis.reproduce import shipped_params  # what `verify` recomputes them with

    shared, per_table = shipped_params(run)
    assert shared == {"n_boot": 7, "max_examples": 40, "seed": 5} and per_table["qk_means"]["seed"] == 5  # 40 used
    assert "device" not in per_table["qk_means"] and "ablation" not in per_table
    run.path.joinpath("tables", "ablation.parquet").unlink()
    from workbench.analysis import ANALYSES

    ANALYSES["deposit"](run)  # computes the missing ablation table (defaults) inside deposit's own call
    assert run.provenance_of("ablation")["parameters"]["seed"] == 0
    assert run.provenance_of("deposit")["parameters"] == {"table": "ablation", "compute_missing": True}


def test_analysing_an_unfinished_run_says_its_tables_are_of_a_checkpoint(tmp_path):
    """A run stopped (or still being trained) after epoch 1 of 2: its tables are of that checkpoint, and the
    command says so (the analysis itself is allowed: a deposit forming during training is worth a look)."""
    from workbench.store import RunStore
    from workbench.train import resolve_config, train

    st = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config(preset="smoke", sets=["train.epochs=2", "task.n_examples=300", "task.extrap_size=20"],
                         store=st)
    run = train(cfg, st, progress=False, stop_after_epochs=1)
    assert run.status == "interrupted"
    res = CliRunner().invoke(app, ["analyze", run.id, "--what", "qk-means", "--root", str(st.root)],
                             env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert f"note: {run.id} is interrupted (epoch 1 of 2): its tables are of that checkpoint" in res.output
