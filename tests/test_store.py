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
    with pytest.raises(ValueError):
        run.save_table("../escape", df)
