"""The run store: ids, index, atomic writes, checkpoint journal, corruption errors, tables."""
import json
import os
import socket
import subprocess
import sys

import pandas as pd
import pytest
import torch

from workbench.model import ModelConfig, PEClassifier
from workbench.store import RunStore, StoreError, atomic_write_json, atomic_write_text, config_hash, run_id_for


def make_config(scheme="rope", task="trigger-distance", seed=42, preset="smoke", arch="paper", tag=None, **model_kw):
    model = ModelConfig(vocab_size=20, n_classes=5, arch=arch, scheme=scheme, d_model=16, n_heads=2, d_ff=16,
                        n_layers=1, max_len=12, dropout=0.0, seed=seed, **model_kw).to_dict()
    return {"preset": preset, "tag": tag, "model": model,
            "task": {"task": task, "preset": "smoke", "seed": 42, "overrides": {}},
            "train": {"lr": 1e-3, "betas": [0.9, 0.99], "weight_decay": 0.0, "warmup_frac": 0.0,
                      "schedule": "cosine", "epochs": 1, "batch_size": 8, "eval_batch_size": 8, "seed": seed,
                      "grad_clip": None}}


def save_model(run):
    """Give a run a committed checkpoint holding its (untrained) model."""
    model = PEClassifier(run.model_config())
    run.save_checkpoint(model.state_dict(), {"state.0.step": torch.tensor(1.0)}, {"epoch": 1, "step": 1})
    return model


@pytest.fixture
def store(tmp_path):
    return RunStore(tmp_path / "runs", data_dir=tmp_path / "data")


# ---- ids --------------------------------------------------------------------------------------------
def test_run_ids_are_readable_stable_and_unique():
    a = make_config()
    assert run_id_for(a) == run_id_for(json.loads(json.dumps(a)))  # same config -> same id
    assert run_id_for(a).startswith("t1-rope-smoke-s42-") and len(run_id_for(a).rsplit("-", 1)[1]) == 6
    b = make_config()
    b["train"]["lr"] = 2e-3
    assert run_id_for(b) != run_id_for(a) and config_hash(b) != config_hash(a)
    assert run_id_for(make_config("rope+sinusoidal", task="trigger-count")).startswith("t2-rope_sinusoidal-")
    assert run_id_for(make_config(tag="rope-h1")).startswith("t1-rope-h1-smoke-")
    assert "-decoder-" in run_id_for(make_config(arch="decoder"))


# ---- create / get / query / reindex -----------------------------------------------------------------
def test_create_get_query_and_reindex(store):
    ids = {}
    for scheme in ("rope", "nope"):
        for seed in (1, 2):
            run = store.create(make_config(scheme, seed=seed))
            ids[scheme, seed] = run.id
    store.create(make_config("alibi", task="trigger-count", seed=1))
    assert store.create(make_config("rope", seed=1)).id == ids["rope", 1]  # idempotent

    run = store.get(ids["rope", 1])
    assert run.config["model"]["scheme"] == "rope" and run.status == "created"
    assert run.path == store.root / ids["rope", 1] and (run.path / "config.json").exists()

    df = store.query()
    assert len(df) == 5 and {"id", "scheme", "task", "arch", "preset", "seed", "status", "test_acc", "created",
                             "updated", "path", "config"} <= set(df.columns)
    assert sorted(store.query(scheme="rope")["id"]) == sorted([ids["rope", 1], ids["rope", 2]])
    assert list(store.query(scheme="nope", seed=2)["id"]) == [ids["nope", 2]]
    assert len(store.query(task="trigger-count")) == 1 and len(store.query(scheme=["rope", "alibi"])) == 3
    assert json.loads(df.set_index("id").loc[ids["nope", 1], "config"])["model"]["scheme"] == "nope"
    with pytest.raises(ValueError, match="unknown filters"):
        store.query(colour="red")

    # the index follows the folders: status changes, new runs, vanished runs, a deleted index
    store.get(ids["nope", 1]).update_info(status="finished", final={"test_acc": 0.75})
    info_path = store.root / ids["rope", 2] / "run.json"
    info = json.loads(info_path.read_text())
    atomic_write_json(info_path, info | {"status": "failed"})  # written behind the store's back
    assert list(store.query(status="finished")["id"]) == [ids["nope", 1]]
    assert store.query(status="finished")["test_acc"].iloc[0] == 0.75
    assert list(store.query(status="failed")["id"]) == [ids["rope", 2]]
    import shutil

    shutil.rmtree(store.root / ids["nope", 2])
    assert ids["nope", 2] not in set(store.query()["id"])
    os.unlink(store.index_path)
    assert len(store.query()) == 4  # rebuilt from the folders
    store.index_path.write_bytes(b"this is not a database" * 100)
    assert store.reindex() == 4 and len(store.query(scheme="rope")) == 2

    with pytest.raises(StoreError, match="no such run"):
        store.get("t1-nothing-here")


def test_dead_running_run_reads_as_interrupted(store):
    run = store.create(make_config())
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    run.update_info(status="running", pid=int(proc.stdout), host=socket.gethostname(), pid_started=0.0)
    assert run.status == "interrupted"
    assert store.query()["status"].iloc[0] == "interrupted"
    run.update_info(status="running", pid=os.getpid(), pid_started=None)
    assert run.status == "running"


# ---- atomic writes ----------------------------------------------------------------------------------
def test_a_write_under_a_file_names_the_file_asked_for(tmp_path):
    """`-o FILE/x.svg`, `--figures-dir FILE`: the error names the path given and what is wrong with it, not the
    temp file beside it ("cannot use .x.svg.k3j2.tmp: File exists")."""
    from workbench.store import atomic_write_text

    (tmp_path / "f").write_text("a file")
    with pytest.raises(OSError) as e:
        atomic_write_text(tmp_path / "f" / "x.svg", "<svg/>")
    assert e.value.filename == str(tmp_path / "f" / "x.svg") and "a file is where a folder should be" in str(e.value)
    assert (tmp_path / "f").read_text() == "a file"


def test_atomic_write_leaves_old_file_intact_on_failure(tmp_path):
    from workbench.store import atomic_write

    target = tmp_path / "state.json"
    atomic_write_text(target, "old content")

    def crash(f):
        f.write(b"new content that never completes")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, crash)
    assert target.read_text() == "old content"
    assert os.listdir(tmp_path) == ["state.json"]  # no temp files left behind


def test_checkpoint_journal_survives_a_crash_at_every_step(store):
    run = store.create(make_config())
    old = save_model(run)
    new = PEClassifier(run.model_config())
    with torch.no_grad():
        for p in new.parameters():
            p.add_(1.0)
    old_sd = {k: v.clone() for k, v in old.state_dict().items()}

    # crash after the .next files, before the commit: readers and resume see the old checkpoint
    from safetensors.torch import save

    (run.path / "model.safetensors.next").write_bytes(save(new.state_dict()))
    for k, v in run.load_model().state_dict().items():
        assert torch.equal(v, old_sd[k]), k
    assert run.load_checkpoint()[2]["epoch"] == 1 and not (run.path / "model.safetensors.next").exists()

    # crash after the commit (state.json), before the renames: readers and resume see the new checkpoint
    import workbench.store.run as run_mod

    real_replace = os.replace
    calls = []

    def replace_then_crash(src, dst):
        real_replace(src, dst)
        if str(dst).endswith("state.json"):
            calls.append(dst)
            raise KeyboardInterrupt("killed")

    run_mod.os.replace = replace_then_crash
    try:
        with pytest.raises(KeyboardInterrupt):
            run.save_checkpoint(new.state_dict(), {"state.0.step": torch.tensor(2.0)}, {"epoch": 2, "step": 2})
    finally:
        run_mod.os.replace = real_replace
    assert calls and (run.path / "model.safetensors.next").exists()
    for k, v in run.load_model().state_dict().items():
        assert torch.equal(v, new.state_dict()[k]), k
    model_t, optim_t, state = run.load_checkpoint()
    assert state["epoch"] == 2 and optim_t["state.0.step"].item() == 2.0
    assert not (run.path / "model.safetensors.next").exists()


# ---- corruption -------------------------------------------------------------------------------------
def test_corrupted_or_missing_files_raise_store_error_naming_run_and_file(store):
    run = store.create(make_config())
    with pytest.raises(StoreError, match=rf"{run.id}.*model\.safetensors"):
        run.load_model()  # no checkpoint yet
    save_model(run)
    assert not run.load_model().training

    path = run.path / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # one flipped bit in the weights: safetensors parses it, the sha256 does not match
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=rf"{run.id}.*model\.safetensors.*sha256") as e:
        run.load_model()
    assert e.value.run_id == run.id and e.value.file == "model.safetensors"

    path.write_bytes(b"\x00" * 10)  # truncated, and state.json gone: the parser must complain
    (run.path / "state.json").unlink()
    with pytest.raises(StoreError, match=rf"{run.id}.*model\.safetensors.*corrupted"):
        run.load_model()

    (run.path / "metrics.jsonl").write_text('{"epoch": 1}\n{"epoch": 2, "test_')
    with pytest.raises(StoreError, match=rf"{run.id}.*metrics\.jsonl.*line 2"):
        run.metrics()

    (run.path / "config.json").write_text('{"model": {')
    with pytest.raises(StoreError, match=rf"{run.id}.*config\.json.*corrupted"):
        store.get(run.id)
    (run.path / "config.json").unlink()
    with pytest.raises(StoreError, match=rf"{run.id}.*config\.json.*missing"):
        store.get(run.id)
    assert store.query()["status"].tolist() == ["corrupt"]  # the index lists it instead of failing


def test_loading_never_unpickles(store, monkeypatch):
    import pickle

    run = store.create(make_config())
    save_model(run)
    run.write_metrics([{"epoch": 1, "test_acc": 0.5}])

    def forbidden(*a, **k):
        raise AssertionError("unpickling is forbidden")

    for mod, name in ((torch, "load"), (pickle, "load"), (pickle, "loads"), (pickle, "Unpickler")):
        monkeypatch.setattr(mod, name, forbidden)
    fresh = RunStore(store.root, data_dir=store.data_dir).get(run.id)
    assert not fresh.load_model().training
    assert fresh.load_checkpoint()[2]["epoch"] == 1 and fresh.metrics()["test_acc"].tolist() == [0.5]


# ---- tables -----------------------------------------------------------------------------------------
def test_tables_roundtrip(store):
    run = store.create(make_config())
    assert run.tables() == []
    df = pd.DataFrame({"layer": [0, 0, 1], "head": [0, 1, 0], "delta": [0.5, 0.0, 0.25]})
    run.save_table("ablation", df)
    run.save_table("ablation", df.assign(delta=df.delta * 2))  # replaced atomically
    run.save_table("qk_means", df.head(1))
    assert run.tables() == ["ablation", "qk_means"]
    pd.testing.assert_frame_equal(run.load_table("ablation"), df.assign(delta=df.delta * 2))
    with pytest.raises(StoreError, match=r"no table 'missing'.*ablation"):
        run.load_table("missing")
    with pytest.raises(ValueError, match=r"table name '\.\./escape' may only contain letters"):
        run.save_table("../escape", df)


def test_a_table_records_what_made_it_and_a_bundle_keeps_it(store, tmp_path):
    """Each saved table records its provenance (code version, when, CPU, numerics with the thread count) in its
    parquet metadata, without changing the frame it reads back; a copied table keeps its source's record (None:
    unknown); bundling a run's tables keeps every record."""
    import shutil

    import numpy as np

    from workbench.store import code_version
    from workbench.store.ship import bundle_run

    run = store.create(make_config())
    df = pd.DataFrame({"layer": [0, 1], "delta": np.float32([0.5, 0.25])})  # as shipped tables hold floats
    run.save_table("ablation", df)
    made = run.provenance_of("ablation")
    assert made["code_version"] == code_version() and made["numerics"]["threads"] == torch.get_num_threads()
    from datetime import datetime, timezone

    assert abs((datetime.now(timezone.utc) - datetime.fromisoformat(made["analysed"])).total_seconds()) < 600
    assert made["cpu"]
    from threadpoolctl import threadpool_info  # the OpenBLAS kernels numpy runs, which the probes' ridge fits follow

    assert made["numerics"]["openblas"] == next((i["architecture"] for i in threadpool_info()
                                                 if i["internal_api"] == "openblas"), None)
    pd.testing.assert_frame_equal(run.load_table("ablation"), df)
    pd.testing.assert_frame_equal(pd.read_parquet(run.table_file("ablation")), df)  # any parquet reader
    run.save_table("probes", df, provenance={"analysed": "2026-11-01T00:00:00+00:00"})
    run.save_table("dla", df, provenance=None)
    assert run.provenance_of("probes") == {"analysed": "2026-11-01T00:00:00+00:00"}
    assert run.provenance_of("dla") is None
    folder = tmp_path / run.id
    shutil.copytree(run.path, folder)
    bundle_run(folder)
    shipped = RunStore(tmp_path, readonly=True).get(run.id)
    assert not (folder / "tables").exists() and shipped.tables() == ["ablation", "dla", "probes"]
    assert [shipped.provenance_of(n) for n in ("ablation", "probes", "dla")] == \
        [made, {"analysed": "2026-11-01T00:00:00+00:00"}, None]


# ---- every reader tolerates every malformed run folder (issue 10) ------------------------------------
def _flip_byte(path, at=5):
    data = bytearray(path.read_bytes())
    data[at] = 0xFF
    path.write_bytes(bytes(data))


MALFORMED = {  # name -> (damage(run), file named in the error)
    "config_not_utf8": (lambda run: _flip_byte(run.path / "config.json"), "config.json"),
    "config_is_a_list": (lambda run: (run.path / "config.json").write_text("[1, 2]"), "config.json"),
    "config_section_wrong_type": (lambda run: atomic_write_json(run.path / "config.json",
                                                                dict(run.config, train=[1])), "config.json"),
    "config_seed_wrong_type": (lambda run: atomic_write_json(run.path / "config.json", dict(
        run.config, train=dict(run.config["train"], seed="abc"))), "config.json"),
    "info_is_a_list": (lambda run: (run.path / "run.json").write_text("[1,2]\n"), "run.json"),
    "info_final_is_a_string": (lambda run: atomic_write_json(run.path / "run.json", dict(run.info, final="x")),
                               "run.json"),
    "info_created_is_a_list": (lambda run: atomic_write_json(run.path / "run.json", dict(run.info, created=[1])),
                               "run.json"),
    "info_unknown_status": (lambda run: atomic_write_json(run.path / "run.json", dict(run.info, status=7)),
                            "run.json"),
    "info_is_a_directory": (lambda run: ((run.path / "run.json").unlink(), (run.path / "run.json").mkdir()),
                            "run.json"),
}


@pytest.mark.parametrize("damage", sorted(MALFORMED))
def test_a_malformed_run_is_listed_as_corrupt_and_the_others_are_served(store, damage, tmp_path):
    from typer.testing import CliRunner

    from workbench.cli import app
    from workbench.report import build_report

    good = store.create(make_config("nope"))
    bad = store.create(make_config("rope"))
    store.query()  # indexed while healthy
    fn, file = MALFORMED[damage]
    fn(bad)
    df = store.query().set_index("id")
    assert df.loc[good.id, "status"] == "created"
    assert df.loc[bad.id, "status"] == "corrupt"
    assert file in df.loc[bad.id, "error"] and bad.id in df.loc[bad.id, "error"]
    assert store.query(scheme="nope")["id"].tolist() == [good.id]
    r = CliRunner().invoke(app, ["runs", "--root", str(store.root), "--json"])
    assert r.exit_code == 0, r.output
    assert {x["id"]: x["status"] for x in json.loads(r.output)} == {good.id: "created", bad.id: "corrupt"}
    for query in ("all", "scheme=nope"):
        s = build_report(store, query, tmp_path / f"{damage}-{query}.html")
        assert good.id in [x["id"] for x in s["runs"]]


def test_an_unusable_index_file_falls_back_to_an_in_memory_index(store):
    run = store.create(make_config())
    store.index_path.unlink()
    store.index_path.mkdir()  # index.sqlite is a directory
    with pytest.warns(UserWarning, match="in memory"):
        assert store.query()["id"].tolist() == [run.id]
    with pytest.warns(UserWarning):
        assert RunStore(store.root).query(status="created")["id"].tolist() == [run.id]


def test_an_index_that_opens_but_cannot_be_written_falls_back_to_memory(store, monkeypatch):
    """A read-only store (or index file): the listing, the report and the dashboard read it through an in-memory
    index (root ignores chmod, so the file is opened read-only as such a store's would be)."""
    import sqlite3

    first, second = store.create(make_config()), store.create(make_config(seed=7))
    with sqlite3.connect(store.index_path) as conn:  # the index file has not seen the second run yet
        conn.execute("DELETE FROM runs WHERE id = ?", (second.id,))
    ro = RunStore(store.root)
    monkeypatch.setattr(ro, "_connect", lambda: sqlite3.connect(f"file:{ro.index_path}?mode=ro", uri=True))
    with pytest.warns(UserWarning, match="cannot write .*in memory"):
        assert sorted(ro.query()["id"]) == sorted([first.id, second.id])
    assert sorted(ro.query()["id"]) == sorted([first.id, second.id])  # the memory index from then on
    assert ro.get(second.id).status == "created"


def test_a_finished_run_whose_curve_was_cut_is_listed_corrupt(store):
    """metrics.jsonl cut at a line's end still parses: only its sha256 against run.json's shows the lost epoch
    (else listings say finished and figures draw, and verdicts read, the wrong last epoch)."""
    run = store.create(make_config())
    rows = [{"epoch": e, "test_acc": a} for e, a in ((1, 0.5), (2, 0.9))]
    run.update_info(status="finished", epoch=2, final=rows[-1], metrics_sha256=run.write_metrics(rows))
    assert store.query()["status"].tolist() == ["finished"]
    path = run.path / "metrics.jsonl"
    path.write_text(path.read_text().splitlines(keepends=True)[0])
    row = store.query().iloc[0]
    assert row["status"] == "corrupt" and "metrics.jsonl changed after training" in row["error"]


def test_ctrl_c_during_an_epochs_record_waits_until_it_is_whole(store, monkeypatch):
    """Ctrl-C while an epoch is being recorded (metrics written, run.json not yet): the record is completed, then
    KeyboardInterrupt is raised, so run.json never lags the metrics (a listing read the epoch before)."""
    import os
    import signal

    from workbench.train.loop import commit_epoch

    run = store.create(make_config())
    write = run.write_metrics

    def write_then_ctrl_c(rows):
        sha = write(rows)
        os.kill(os.getpid(), signal.SIGINT)  # delivered here, in the middle of the record
        return sha

    monkeypatch.setattr(run, "write_metrics", write_then_ctrl_c)
    row = {"epoch": 1, "train_loss": 1.0, "wall_s": 1.0, "test_acc": 0.5}
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        commit_epoch(run, [], row, None, None, {}, dev=torch.device("cpu"), cpu_time_s=1.0)
    assert run.info["epoch"] == 1 and not run.metrics_changed()
    assert signal.getsignal(signal.SIGINT) is before  # the handler given back


def test_a_run_whose_creation_was_interrupted_is_incomplete(store):
    (store.root / "t1-rope-smoke-s42-abcdef").mkdir()  # kill between mkdir and config.json
    row = store.query().iloc[0]
    assert row["status"] == "incomplete" and "config.json" in row["error"]


def test_a_delete_cut_short_never_leaves_a_finished_run_without_training(store):
    """A delete moves the run's folder out of the store before removing it (`.<id>.deleting`); a folder left with
    files but no config.json (a delete cut short by older code, files put there by hand) is refused by `create`
    with what to do, never taken for the new run (its run.json read "finished" with nothing trained)."""
    run = store.create(make_config())
    save_model(run)
    run.update_info(status="finished", epoch=1)
    store.delete(run.id)
    assert not (store.root / run.id).exists() and not list(store.root.glob(".*.deleting"))
    run = store.create(make_config())
    run.update_info(status="finished", epoch=1)
    (run.path / "config.json").unlink()  # as a cut rmtree could leave it
    with pytest.raises(StoreError, match="holds run.json but no config.json .*delete the folder"):
        store.create(make_config())
    store.delete(run.id)
    assert store.create(make_config()).status == "created"


def test_a_config_edited_after_the_run_was_created_is_named_damage(store):
    """config.json that gives another run id than its folder's (edited after training: rope, 1 epoch -> nope, 3)
    no longer describes the run's weights and metrics: `get` refuses it and the index lists it as corrupt, naming
    the file and what to do; it is never read as a run of the edited config."""
    run = store.create(make_config())
    cfg = make_config("nope")
    cfg["train"]["epochs"] = 3
    atomic_write_json(run.path / "config.json", cfg)
    with pytest.raises(StoreError, match="config.json gives the run id t1-nope-.*edited after the run was created"):
        store.get(run.id)
    row = store.query().set_index("id").loc[run.id]
    assert row["status"] == "corrupt" and "edited after the run was created" in row["error"]


def test_weights_are_verified_against_the_digest_in_run_json(store):
    run = store.create(make_config())
    save_model(run)
    info = run.info
    assert info["weights"]["sha256"] == run.state()["files"]["model.safetensors"] and info["weights"]["epoch"] == 1
    (run.path / "state.json").unlink()  # lost: run.json's digest still guards the weights
    assert not run.load_model().training
    _flip_byte(run.path / "model.safetensors", at=-5)
    with pytest.raises(StoreError, match=r"sha256 differs from the one recorded in run\.json"):
        run.load_model()
    atomic_write_json(run.path / "run.json", {k: v for k, v in info.items() if k != "weights"})
    with pytest.warns(UserWarning, match="cannot be verified: no sha256 recorded"):
        run.load_model()  # no digest anywhere: loads, but says so


def test_stale_temp_files_are_cleaned_when_a_run_is_next_written(store):
    run = store.create(make_config())
    for name in (".model.safetensors.next.x1.tmp", ".state.json.x2.tmp", ".run.json.x3.tmp"):
        (run.path / name).write_bytes(b"half")
    (run.path / "tables").mkdir()
    old, fresh = run.path / "tables" / ".a.parquet.x4.tmp", run.path / "tables" / ".b.parquet.x5.tmp"
    old.write_bytes(b"half")
    fresh.write_bytes(b"being written")
    os.utime(old, (1, 1))
    save_model(run)
    assert not list(run.path.glob(".*.tmp"))
    assert not old.exists() and fresh.exists()  # a table another process is writing right now is left alone


def test_run_ids_never_become_paths(store, tmp_path):
    from typer.testing import CliRunner

    from workbench.cli import app

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.json").write_text(json.dumps(make_config()))
    for bad in ("../outside", str(outside), "..", ".", "a/b", "", ".locks", "x" * 300, "t1\x00"):
        with pytest.raises(StoreError, match="unknown run|no such run"):
            store.get(bad)
        assert not store.exists(bad)
    r = CliRunner().invoke(app, ["analyze", "../outside", "--what", "qk-means", "--root", str(store.root)])
    assert r.exit_code == 2 and r.output.startswith("error: unknown run") and "Traceback" not in r.output
    assert sorted(p.name for p in outside.iterdir()) == ["config.json"]  # no tables/ written outside


def test_the_store_names_its_own_files_and_refuses_paths_and_runs(store):
    run = store.create(make_config())
    assert store.own_file("report.html") == store.root / "report.html"
    for bad in ("../report.html", "a/b.html", "/tmp/x.log", "", "..", "index.sqlite", run.id):
        with pytest.raises(StoreError, match="cannot be a file of the store"):
            store.own_file(bad)
    store.own_file("demo.log").write_text("a line\n")
    assert store.run_ids() == [run.id]  # a file beside the runs is not a run


def test_read_only_store_never_writes(store, tmp_path):
    import shutil

    run = store.create(make_config())
    save_model(run)
    run.update_info(status="finished", final={"epoch": 1, "test_acc": 0.5})
    run.save_table("t", pd.DataFrame({"a": [1]}))
    shipped = tmp_path / "shipped"
    shutil.copytree(run.path, shipped / run.id)
    (shipped / run.id / "model.safetensors").unlink()  # results without weights
    (shipped / run.id / "optim.safetensors").unlink()
    (shipped / run.id / "state.json").unlink()
    before = sorted((p.relative_to(shipped), p.stat().st_mtime_ns) for p in shipped.rglob("*"))
    ro = RunStore(shipped, readonly=True)
    df = ro.query()
    assert df["id"].tolist() == [run.id] and df["status"].tolist() == ["finished"]
    r = ro.get(run.id)
    assert not r.has_weights and r.load_table("t")["a"].tolist() == [1] and r.final["test_acc"] == 0.5
    with pytest.raises(StoreError, match=rf"not shipped.*workbench recreate {run.id}"):
        r.load_model()
    for write in (lambda: r.update_info(x=1), lambda: r.save_table("u", pd.DataFrame({"a": [1]})),
                  lambda: r.write_metrics([]), lambda: r.load_checkpoint(), lambda: ro.create(make_config("nope")),
                  lambda: ro.delete(run.id), lambda: ro.lock(run.id)):
        with pytest.raises(StoreError, match="read-only store"):
            write()
    after = sorted((p.relative_to(shipped), p.stat().st_mtime_ns) for p in shipped.rglob("*"))
    assert after == before  # no index.sqlite, no temp files, no locks
    with pytest.raises(StoreError, match="not a folder"):
        RunStore(tmp_path / "nope", readonly=True)


def test_store_set_reads_own_then_shipped(store, tmp_path):
    from workbench.store import StoreSet

    own = store.create(make_config("rope"))
    other = RunStore(tmp_path / "other")
    shipped_run = other.create(make_config("nope"))
    s = StoreSet(store, RunStore(other.root, readonly=True))
    df = s.query()
    assert dict(zip(df["id"], df["source"])) == {own.id: "own", shipped_run.id: "shipped"}
    assert s.get(shipped_run.id).store.readonly and not s.get(own.id).store.readonly
    with pytest.raises(StoreError, match="unknown run"):
        s.get("../other/" + shipped_run.id)
    # a shipped run re-created into the own store, still training: a filter never picks the shipped copy, which
    # `get` would not return (the own one: its early epochs read as a finished run's)
    other.get(shipped_run.id).update_info(status="finished", final={"test_acc": 0.75})
    mine = store.create(make_config("nope"))
    assert mine.id == shipped_run.id and s.get(mine.id).status == "created"
    assert shipped_run.id not in set(s.query(status="finished")["id"])
    assert dict(zip(s.query()["id"], s.query()["source"]))[mine.id] == "own"


def test_runs_command_lists_own_and_shipped_runs(store, tmp_path):
    from typer.testing import CliRunner

    from workbench.cli import app

    own = store.create(make_config("rope"))
    shipped = RunStore(tmp_path / "shipped").create(make_config("nope"))
    r = CliRunner().invoke(app, ["runs", "--root", str(store.root), "--shipped", str(tmp_path / "shipped"), "--json"])
    assert r.exit_code == 0, r.output
    assert {x["id"]: x["source"] for x in json.loads(r.output)} == {own.id: "own", shipped.id: "shipped"}


def test_code_version_is_dirty_only_when_code_changed(tmp_path):
    """A re-shipped results table or an edited doc leaves the code version clean; an edited source file does not."""
    import subprocess

    from workbench.store.runstore import git_version

    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "run.json").write_text("{}")
    (tmp_path / "README.md").write_text("x")
    (tmp_path / "model.py").write_text("a = 1\n")
    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    clean = git_version(tmp_path)
    assert clean and not clean.endswith("-dirty")
    (tmp_path / "results" / "run.json").write_text('{"a": 1}')
    (tmp_path / "README.md").write_text("y")
    assert git_version(tmp_path) == clean
    (tmp_path / "model.py").write_text("a = 2\n")
    assert git_version(tmp_path) == f"{clean}-dirty"
    assert git_version(tmp_path / "nowhere") is None


def test_contains_commit_reads_git_ancestry_and_says_when_git_cannot_tell(tmp_path):
    """`contains_commit`: a branch made before a commit does not hold it whatever the dates; a later commit of
    its line does (also with `-dirty`); a version git cannot name, or an option-like one, gives None."""
    import subprocess

    from workbench.store.runstore import contains_commit

    def git(*a):
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *a],
                              check=True, capture_output=True, text=True).stdout.strip()

    def commit(msg):
        (tmp_path / "f").write_text(msg)
        git("add", "f")
        git("commit", "-qm", msg)
        return git("rev-parse", "--short", "HEAD")

    git("init", "-q")
    base = commit("base")
    git("checkout", "-qb", "side")
    side = commit("side")  # the branch leaves before `change`
    git("checkout", "-q", base)
    change = commit("change")
    later = commit("later")
    assert contains_commit(later, change, tmp_path) is True and contains_commit(f"{later}-dirty", change, tmp_path)
    assert contains_commit(side, change, tmp_path) is False and contains_commit(change, base, tmp_path) is True
    assert contains_commit("pe-lab 0.1", change, tmp_path) is None
    assert contains_commit("--help", change, tmp_path) is None and contains_commit(None, change, tmp_path) is None
    assert contains_commit("0123abcd", change, tmp_path) is None  # not a commit of this repository
    assert contains_commit(later, change, tmp_path / "nowhere") is None


def test_flat_config_dots_nested_fields_and_fills_the_later_defaults():
    """`store.flat_config`, the one flattening behind `analyze --aggregate`, the runs page and the one-setting claims:
    nested sections become dotted keys, lists stay leaves, an empty section has none, and a field added after a
    config was stored reads as its implicit value (so a config from before `train.fused_attention` equals one with
    False)."""
    from workbench.store import flat_config

    old = {"preset": "repro", "model": {"scheme": "rope", "pe": {}}, "task": {"task": "trigger-distance",
           "overrides": {"n_examples": 100}}, "train": {"seed": 42, "lrs": [1, 2]}}
    flat = flat_config(old)
    assert flat["preset"] == "repro" and flat["model.scheme"] == "rope"
    assert not any(k.startswith("model.pe") for k in flat)
    assert flat["task.overrides.n_examples"] == 100 and flat["train.lrs"] == [1, 2]
    assert flat["train.fused_attention"] is False and "train" not in flat and "task.overrides" not in flat
    new = {**old, "train": {**old["train"], "fused_attention": False}}
    assert flat_config(new) == flat
    assert flat_config({**old, "train": {**old["train"], "fused_attention": True}})["train.fused_attention"] is True
