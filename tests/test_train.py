"""Training loop, presets, resume, sweeps and the train/runs/sweep CLI, on the smoke preset with tiny models."""
import json
import math

import pytest
import torch
from typer.testing import CliRunner

from workbench.store import RunStore
from workbench.train import (PRESETS, base_config, epoch_permutation, grid_points, load_grid, lr_at, resolve_config,
                             sweep, train)

TINY = ["model.d_model=16", "model.n_heads=2", "model.d_ff=32", "model.n_layers=1", "task.n_examples=500",
        "train.batch_size=32"]


@pytest.fixture
def store(tmp_path, data_dir):
    return RunStore(tmp_path / "runs", data_dir=data_dir)


def tiny(store, scheme="rope", *sets, **kw):
    return resolve_config("smoke", scheme, "trigger-distance", sets=TINY + list(sets), store=store, **kw)


# ---- presets and config resolution --------------------------------------------------------------------
def test_paper_preset_matches_the_spec():
    p = PRESETS["paper"]
    assert {k: p["model"][k] for k in ("d_model", "n_heads", "d_ff", "n_layers", "dropout", "max_len")} == \
        {"d_model": 256, "n_heads": 16, "d_ff": 512, "n_layers": 6, "dropout": 0.1, "max_len": 128}
    t = p["train"]
    assert (t["lr"], t["betas"], t["weight_decay"], t["warmup_frac"], t["batch_size"], t["seed"]) == \
        (1e-4, [0.98, 0.9], 1e-5, 0.06, 512, 42)
    assert base_config("paper", "rope", "trigger-distance")["train"]["epochs"] == 100
    assert base_config("paper", "rope", "trigger-count")["train"]["epochs"] == 150
    assert base_config("paper", "mla", "t1")["train"]["batch_size"] == 1024


def test_resolve_config_applies_overrides_and_fills_data_sizes(store):
    cfg = resolve_config("smoke", "rope", "t1", seed=7, store=store,
                         sets=["train.epochs=5", "model.n_layers=3", "model.scheme_kwargs.rope_heads=[1,0,2]",
                               "task.middle_max=10", "train.betas=[0.9,0.95]"])
    ds = store.load_task(cfg["task"])
    assert cfg["train"]["epochs"] == 5 and cfg["train"]["seed"] == 7 and cfg["model"]["seed"] == 7
    assert cfg["model"]["n_layers"] == 3 and cfg["model"]["scheme_kwargs"] == {"rope_heads": [1, 0, 2]}
    assert cfg["task"] == {"task": "trigger-distance", "preset": "smoke", "seed": 42, "overrides": {"middle_max": 10}}
    assert cfg["model"]["n_classes"] == ds.n_classes == 12 and cfg["model"]["vocab_size"] == ds.vocab_size
    assert cfg["model"]["max_len"] == ds.seq_len and cfg["train"]["betas"] == [0.9, 0.95]
    with pytest.raises(ValueError, match="unknown train key"):
        resolve_config("smoke", "rope", "t1", store=store, sets=["train.lrr=1"])
    with pytest.raises(ValueError, match="rope_heads"):
        resolve_config("smoke", "rope", "t1", store=store, sets=["model.scheme_kwargs.rope_heads=[1]"])


def test_lr_schedule_and_shuffling_are_functions_of_their_inputs():
    t = {"lr": 1.0, "warmup_frac": 0.1, "schedule": "cosine"}
    lrs = [lr_at(s, 100, t) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0) and lrs[10] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:])) and lrs[-1] < 1e-3
    assert lrs[55] == pytest.approx(0.5 * (1 + math.cos(math.pi * 45 / 90)))
    assert torch.equal(epoch_permutation(50, 3, 2), epoch_permutation(50, 3, 2))
    assert not torch.equal(epoch_permutation(50, 3, 2), epoch_permutation(50, 3, 1))
    assert not torch.equal(epoch_permutation(50, 3, 2), epoch_permutation(50, 4, 2))


# ---- training and resume ------------------------------------------------------------------------------
def test_training_learns_and_records_everything(store):
    cfg = tiny(store, "rope", "train.epochs=3", "train.lr=1e-2")
    run = train(cfg, store, progress=False, device="cpu")
    assert run.status == "finished" and run.id == store.run_id(cfg)
    m = run.metrics()
    assert m["epoch"].tolist() == [1, 2, 3]
    assert {"train_loss", "train_acc", "test_loss", "test_acc", "lr", "wall_s", "seq_per_s"} <= set(m.columns)
    assert m["train_loss"].iloc[-1] < m["train_loss"].iloc[0]  # it learns something
    info = run.info
    ds = run.load_dataset()
    assert info["dataset_hash"] == ds.hash and info["device"] == "cpu" and info["code_version"]
    # the scheme's kwargs as trained, its defaults filled in (config.json keeps only what was set)
    assert info["scheme_params"] == {"base": 10000.0, "rotary_fraction": 1.0, "rope_heads": None, "rope_layers": None}
    assert cfg["model"]["scheme_kwargs"] == {}
    assert info["final"]["test_acc"] == m["test_acc"].iloc[-1] and info["wall_time_s"] > 0
    # the stored model reproduces the recorded test accuracy
    model = run.load_model()
    with torch.no_grad():
        acc = (model(torch.from_numpy(ds.test_x)).argmax(-1) == torch.from_numpy(ds.test_y)).float().mean().item()
    assert acc == pytest.approx(info["final"]["test_acc"], abs=1e-6)
    again = train(cfg, store, progress=False, device="cpu")
    assert again.info["finished"] == info["finished"]  # finished: not retrained
    row = store.query(scheme="rope").iloc[0]
    assert row["status"] == "finished" and row["test_acc"] == pytest.approx(info["final"]["test_acc"])


@pytest.mark.parametrize("batching", ["random", "length"])
def test_interrupted_and_resumed_run_equals_an_uninterrupted_one(tmp_path, data_dir, batching):
    # dropout: the RNG stream must be restored too
    sets = ["train.epochs=3", "model.dropout=0.1", f"train.batching={batching}"]
    straight_store = RunStore(tmp_path / "a", data_dir=data_dir)
    straight = train(tiny(straight_store, "rope", *sets), straight_store, progress=False, device="cpu")

    store = RunStore(tmp_path / "b", data_dir=data_dir)
    cfg = tiny(store, "rope", *sets)
    run = train(cfg, store, progress=False, device="cpu", stop_after_epochs=1)  # a clean stop after epoch 1
    assert run.status == "interrupted" and run.info["epoch"] == 1

    class Crash(RuntimeError):
        pass

    def crash(run, row):
        if row["epoch"] == 2:
            raise Crash("injected")

    with pytest.raises(Crash):  # a crash after epoch 2
        train(cfg, store, progress=False, device="cpu", resume=True, on_epoch=crash)
    assert run.status == "failed" and "injected" in run.info["error"]
    # a re-run without --resume refuses to clobber the unfinished run
    from workbench.store import StoreError

    with pytest.raises(StoreError, match="resume"):
        train(cfg, store, progress=False, device="cpu")
    resumed = train(cfg, store, progress=False, device="cpu", resume=True)
    assert resumed.status == "finished" and resumed.info["resumed_from_epoch"] == 2

    keys = ["epoch", "step", "lr", "train_loss", "train_acc", "test_loss", "test_acc"]
    a, b = straight.metrics()[keys], resumed.metrics()[keys]
    assert a.to_dict("records") == b.to_dict("records")  # exactly, not approximately
    wa, wb = straight.model_tensors(), resumed.model_tensors()
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    oa, ob = straight.load_checkpoint()[1], resumed.load_checkpoint()[1]
    assert all(torch.equal(oa[k], ob[k]) for k in oa if k.startswith("state."))


def test_a_kill_after_the_last_checkpoint_resumes_to_its_numbers(store):
    """Killed after the last epoch's checkpoint was committed but before run.json was written (run.json: the epoch
    before, its final metrics, its digests), a resume has no epoch left to train: it finishes with run.json
    re-read from the committed checkpoint and its metric rows, so its record, its metrics digest and its weights
    digest are the last epoch's (it finished with the epoch before's numbers, its digests failing)."""
    cfg = tiny(store, "rope", "train.epochs=2")
    run = train(cfg, store, progress=False, device="cpu")
    done = run.info
    rows = run.metric_rows()
    # run.json as it stood when the kill came: epoch 1's record, the run still running
    before = dict(done, status="running", epoch=1, final={k: rows[0][k] for k in done["final"] if k in rows[0]},
                  metrics_sha256="0" * 64, weights={"sha256": "1" * 64, "epoch": 1}, pid=2 ** 22 + 7)
    (run.path / "run.json").write_text(json.dumps(before))
    assert run.trust_problems()  # the digests are epoch 1's
    resumed = train(cfg, store, progress=False, device="cpu", resume=True)
    info = resumed.info
    assert resumed.status == "finished" and info["epoch"] == 2 and info["final"] == done["final"]
    assert info["metrics_sha256"] == done["metrics_sha256"] and info["weights"] == done["weights"]
    assert resumed.trust_problems() == []


def test_a_resume_keeps_what_its_first_session_ran_with_and_refuses_other_data(store):
    """A resume with other settings (here the math SDPA backend) keeps the first session's in run.json
    and records both (`resumed_settings`, with a warning); one whose data changed (another dataset hash) is refused
    before it trains: its later epochs would learn other data. Before, each session's values overwrote the last."""
    cfg = tiny(store, "rope", "train.epochs=3")
    run = train(cfg, store, progress=False, device="cpu", stop_after_epochs=1)
    first = run.info
    with pytest.warns(UserWarning, match="resumed with other settings than it started with"):
        train(cfg, store, progress=False, device="cpu", resume=True, stop_after_epochs=2, sdpa_backend="math")
    info = run.info
    assert info["sdpa_backend"] == first["sdpa_backend"] and info["resumed_settings"]["sdpa_backend"] == [
        first["sdpa_backend"], "math"]
    (run.path / "run.json").write_text(json.dumps(dict(info, dataset_hash="0" * 64)))
    from workbench.store import StoreError

    with pytest.raises(StoreError, match="its data changed since it started .*--force"):
        train(cfg, store, progress=False, device="cpu", resume=True)
    assert run.info["epoch"] == 2  # nothing trained


def test_each_kept_session_is_recorded_from_its_epoch_and_an_abandoned_one_is_dropped_with_its_diff(store,
                                                                                                    monkeypatch):
    """run.json `sessions` lists each training session whose epochs the run keeps (the epoch it started from and its
    code version, device, backend ...); a session that left no checkpoint (here: started from a dirty tree, then
    gone before its first epoch ended) is dropped when the next resumes from the same epoch, and so is the
    code.diff it wrote, where no kept session ran dirty; the provenance line names each session's epochs."""
    from workbench.analysis.claims.runs import resumed_otherwise
    from workbench.store import runstore
    from workbench.train.loop import mark_running

    monkeypatch.setattr(runstore, "code_version", lambda: "abc1234")  # a clean tree, whatever this checkout's is
    monkeypatch.setattr(runstore, "code_diff", lambda: None)
    cfg = tiny(store, "rope", "train.epochs=3")
    run = train(cfg, store, progress=False, device="cpu", stop_after_epochs=1)
    first = run.info
    assert first["sessions"] == [{"from_epoch": 0, **{k: first[k] for k in first["sessions"][0] if k != "from_epoch"}}]
    with monkeypatch.context() as m:  # a dirty session that starts from epoch 1 and never checkpoints
        m.setattr(runstore, "code_version", lambda: "abc1234-dirty")
        m.setattr(runstore, "code_diff", lambda: "diff --git a/y b/y\n+x\n")
        with pytest.warns(UserWarning, match="resumed with other settings"):
            mark_running(run, resumed=True, start_epoch=1, n_threads=1, dev=torch.device("cpu"), amp=False,
                         compiled=False, sdpa_backend=first["sdpa_backend"], dataset_hash=first["dataset_hash"],
                         scheme_params=first["scheme_params"], epochs=3, checkpoint_every=1)
    assert (run.path / "code.diff").exists() and run.info["sessions"][-1]["code_version"] == "abc1234-dirty"
    with pytest.warns(UserWarning, match="resumed with other settings"):
        train(cfg, store, progress=False, device="cpu", resume=True, stop_after_epochs=2, sdpa_backend="math")
    assert not (run.path / "code.diff").exists()  # the abandoned session's diff trained nothing the run keeps
    assert [(s["from_epoch"], s["sdpa_backend"], s["code_version"]) for s in run.info["sessions"]] == [
        (0, first["sdpa_backend"], first["code_version"]), (1, "math", first["code_version"])]
    train(cfg, store, progress=False, device="cpu", resume=True)
    info = run.info
    assert [s["from_epoch"] for s in info["sessions"]] == [0, 1, 2] and info["epoch"] == 3
    assert resumed_otherwise(info, 3) == (f"`sdpa_backend` {first['sdpa_backend']} (epochs 1-1) -> math (2-2) -> "
                                          f"{first['sdpa_backend']} (3-3)")
    # a kept dirty session keeps its diff through a clean resume; a run from before `sessions` reads as before
    dirty = tiny(store, "nope", "train.epochs=2")
    with monkeypatch.context() as m:
        m.setattr(runstore, "code_version", lambda: "abc1234-dirty")
        m.setattr(runstore, "code_diff", lambda: "diff --git a/y b/y\n+x\n")
        d = train(dirty, store, progress=False, device="cpu", stop_after_epochs=1)
    with pytest.warns(UserWarning, match="resumed with other settings"):
        train(dirty, store, progress=False, device="cpu", resume=True)
    assert (d.path / "code.diff").read_text() == "diff --git a/y b/y\n+x\n"
    assert resumed_otherwise(d.info, 2) == "`code_version` abc1234-dirty (epochs 1-1) -> abc1234 (2-2)"
    assert resumed_otherwise({"resumed_settings": {"code_version": ["a509157", "2ca9d57"]}}, 12) == (
        "`code_version` a509157 -> 2ca9d57")


def test_a_table_made_before_the_run_finished_is_not_shipped_as_its_final_models(store, tmp_path):
    """A table records the weights it was computed from (run.json's `weights`: sha256 and epoch); `ship` refuses a
    table of earlier weights than the run's last (an analysis of the run while it was interrupted, kept after it
    was resumed and finished), naming it and the command that makes it again; made again, it ships."""
    import pandas as pd

    from workbench.store import StoreError
    from workbench.store.ship import ship_run

    cfg = tiny(store, "rope", "train.epochs=2")
    run = train(cfg, store, progress=False, device="cpu", stop_after_epochs=1)
    run.save_table("qk_means", pd.DataFrame({"x": [1.0]}))  # analysed at epoch 1
    assert run.provenance_of("qk_means")["weights"]["epoch"] == 1
    train(cfg, store, progress=False, device="cpu", resume=True)
    with pytest.raises(StoreError, match=r"qk_means \(epoch 1\) were made from earlier weights than its last "
                                         r"\(epoch 2\).*workbench analyze .* --what qk-means"):
        ship_run(run, tmp_path / "out")
    assert not (tmp_path / "out" / run.id).exists()
    run.save_table("qk_means", pd.DataFrame({"x": [2.0]}))  # made again from the final weights
    ship_run(run, tmp_path / "out")
    assert (tmp_path / "out" / run.id / "tables.parquet").is_file()


# ---- length-grouped batches ---------------------------------------------------------------------------
def test_length_batches_cover_every_example_once_and_group_lengths():
    from workbench.train.loop import epoch_batches

    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(3, 60, (1000,), generator=g)
    spread = {}
    for mode in ("random", "length"):
        batches = epoch_batches(lengths, 32, seed=7, epoch=2, batching=mode, chunk_batches=8)
        assert sorted(torch.cat(batches).tolist()) == list(range(1000))
        assert [b.tolist() for b in batches] == [b.tolist() for b in epoch_batches(lengths, 32, 7, 2, mode, 8)]
        assert [b.tolist() for b in batches] != [b.tolist() for b in epoch_batches(lengths, 32, 7, 3, mode, 8)]
        spread[mode] = sum((lengths[b].max() - lengths[b].min()).item() for b in batches) / len(batches)
    assert spread["length"] < spread["random"] / 4
    with pytest.raises(ValueError, match="batching"):
        epoch_batches(lengths, 32, 7, 2, "sorted")


@pytest.mark.parametrize("arch", ["paper", "decoder"])
@pytest.mark.parametrize("scheme", ["nope", "rope", "learned", "alibi", "relative", "t5", "mla", "coca", "tapa"])
def test_trimming_trailing_pads_leaves_every_logit_unchanged(tiny_cfg, arch, scheme):
    from workbench.model import PEClassifier
    from workbench.train.loop import trim

    model = PEClassifier(tiny_cfg(scheme, arch=arch)).eval()
    g = torch.Generator().manual_seed(1)
    x = torch.randint(1, 24, (6, 16), generator=g)
    for row, n in enumerate([3, 5, 9, 9, 2, 7]):
        x[row, n:] = 0
    assert trim(x).shape == (6, 9)
    with torch.no_grad():
        torch.testing.assert_close(model(trim(x)), model(x), atol=1e-5, rtol=1e-5)


def test_length_batching_is_refused_when_pads_reach_the_output(store):
    with pytest.raises(ValueError, match="batching"):
        train(tiny(store, "nope", "train.batching=length", "model.readout_include_pad=true"), store, progress=False)


def test_length_batching_trains_on_fewer_tokens(store):
    run = train(tiny(store, "rope", "train.batching=length", "train.epochs=1"), store, progress=False)
    row = run.metrics().iloc[-1]
    assert row["pad_frac"] < 0.2 and row["test_acc"] > 0
    random_run = train(tiny(store, "rope", "train.epochs=1"), store, progress=False)
    assert random_run.metrics().iloc[-1]["pad_frac"] > row["pad_frac"] + 0.1


# ---- sweeps -------------------------------------------------------------------------------------------
def test_sweep_skips_finished_and_resumes_interrupted_runs(store):
    grid = {"preset": "smoke", "tasks": ["t1"], "seeds": [1], "schemes": ["nope", "alibi"],
            "set": {"train": {"epochs": 2}, "model.d_model": 16, "model.n_heads": 2, "model.d_ff": 32,
                    "model.n_layers": 1, "task.n_examples": 500, "train.batch_size": 32},
            "variants": [{"name": "rope-h1", "scheme": "rope", "set": {"model.scheme_kwargs": {"rope_heads": 1}}}]}
    points = grid_points(grid)
    assert [(p["scheme"], p["tag"]) for p in points] == [("nope", None), ("alibi", None), ("rope", "rope-h1")]
    configs = [resolve_config(store=store, **p) for p in points]
    assert configs[2]["model"]["scheme_kwargs"] == {"rope_heads": 1}

    done = train(configs[0], store, progress=False, device="cpu")
    half = train(configs[2], store, progress=False, device="cpu", stop_after_epochs=1)
    done_mtime = (done.path / "model.safetensors").stat().st_mtime_ns
    assert half.status == "interrupted"

    results = sweep(grid, store, device="cpu", progress=False, log=lambda msg: None)
    assert {r["id"]: r["outcome"] for r in results} == {
        done.id: "finished", store.run_id(configs[1]): "trained", half.id: "resumed"}
    assert (done.path / "model.safetensors").stat().st_mtime_ns == done_mtime  # untouched
    assert half.status == "finished" and half.info["resumed_from_epoch"] == 1
    assert set(store.query(status="finished")["id"]) == {r["id"] for r in results}
    assert set(store.query(tag="rope-h1")["id"]) == {half.id}
    again = sweep(grid, store, device="cpu", progress=False, log=lambda msg: None)
    assert {r["outcome"] for r in again} == {"finished"}


def test_one_unreadable_run_never_stops_a_sweep(store):
    """A run whose run.json does not read (a field of the wrong type) is that run's failure, said with what to do;
    the sweep trains the others (it stopped at the first such run with a StoreError)."""
    grid = {"preset": "smoke", "tasks": ["t1"], "seeds": [1], "schemes": ["nope", "alibi"],
            "set": {"train": {"epochs": 1}, "model.d_model": 16, "model.n_heads": 2, "model.d_ff": 32,
                    "model.n_layers": 1, "task.n_examples": 300, "train.batch_size": 32}}
    broken = store.create(resolve_config(store=store, **grid_points(grid)[0]))
    info = json.loads((broken.path / "run.json").read_text())
    (broken.path / "run.json").write_text(json.dumps(dict(info, epoch="one")))
    said = []
    results = sweep(grid, store, device="cpu", progress=False, log=said.append)
    outcome = {r["id"]: r for r in results}
    assert outcome[broken.id]["outcome"] == "failed" and "delete its folder" in outcome[broken.id]["error"]
    assert [r["outcome"] for r in results if r["id"] != broken.id] == ["trained"]
    assert any("cannot be read" in line for line in said)


@pytest.mark.parametrize("name", ["cpu", "paper"])
def test_shipped_grids_expand_to_valid_model_configs(name):
    import pathlib

    from workbench.model import ModelConfig, list_schemes

    grid = load_grid(pathlib.Path(__file__).resolve().parent.parent / "grids" / f"{name}.toml")
    points = grid_points(grid)
    schemes = {p["scheme"] for p in points}
    assert {"nope", "sinusoidal", "learned", "random", "relative", "alibi", "rope", "rope+sinusoidal",
            "mla"} <= schemes
    assert schemes <= set(list_schemes()) and {p["task"] for p in points} == {"trigger-distance", "trigger-count"}
    assert any(p["tag"] and p["scheme"] == "rope" for p in points)  # partial RoPE variants
    for p in points:
        cfg = base_config(p["preset"], p["scheme"], p["task"], p["arch"], p["seed"], p["sets"], p["tag"])
        assert cfg["preset"] == name
        ModelConfig.from_dict(cfg["model"] | {"vocab_size": 50, "n_classes": 10, "max_len": cfg["model"]["max_len"]
                                              or 48})


# ---- CLI ----------------------------------------------------------------------------------------------
def test_cli_train_runs_and_sweep(tmp_path, data_dir, monkeypatch):
    from workbench.cli import app

    monkeypatch.setenv("PELAB_DATA", str(data_dir))
    root = str(tmp_path / "runs")
    runner = CliRunner()
    args = ["train", "--preset", "smoke", "--scheme", "nope", "--task", "t1", "--seed", "3", "--root", root, "-q",
            "--set", "train.epochs=1"] + sum((["--set", s] for s in TINY), [])
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    run_id = res.stdout.strip().splitlines()[-1]
    assert run_id.startswith("t1-nope-smoke-s3-")
    run = RunStore(root).get(run_id)
    assert run.status == "finished" and run.config["train"]["epochs"] == 1 and run.config["model"]["d_model"] == 16

    res = runner.invoke(app, ["runs", "--root", root, "--json"])
    assert res.exit_code == 0 and [r["id"] for r in json.loads(res.stdout)] == [run_id]
    res = runner.invoke(app, ["runs", "--root", root, "--scheme", "rope", "--json"])
    assert json.loads(res.stdout) == []
    res = runner.invoke(app, ["runs", "--root", root, "--task", "t1"])
    assert res.exit_code == 0 and run_id in res.stdout and "finished" in res.stdout

    bad = runner.invoke(app, ["train", "--preset", "smoke", "--root", root, "--set", "train.nonsense=1"])
    assert bad.exit_code == 2 and "nonsense" in bad.output

    grid = tmp_path / "g.toml"
    grid.write_text('preset = "smoke"\ntasks = ["t1"]\nseeds = [3]\nschemes = ["nope"]\n[set]\n"train.epochs" = 1\n'
                    + "".join(f'"{k}" = {v}\n' for k, v in (s.split("=") for s in TINY)))
    res = runner.invoke(app, ["sweep", str(grid), "--root", root, "-q"])
    assert res.exit_code == 0, res.output
    assert "finished already" in res.output and run_id in res.output


def test_tf32_is_on_for_a_cuda_training_only_and_restored_after_it():
    """A CUDA training turns TF32 on (the GPU runs' numerics) and restores the flags after it, also when it fails:
    an analysis later in the same process runs in full fp32 (the flags stayed on for the process before)."""
    from workbench.train.loop import tf32

    flags = lambda: (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)  # noqa: E731
    before = flags()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        with tf32(torch.device("cuda")):
            assert flags() == (True, True)
        assert flags() == (False, False)
        with pytest.raises(RuntimeError, match="boom"), tf32(torch.device("cuda")):
            raise RuntimeError("boom")
        assert flags() == (False, False)
        with tf32(torch.device("cpu")):
            assert flags() == (False, False)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
