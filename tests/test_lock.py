"""One trainer per run: the per-run OS lock (workbench/store/lock.py) as trainers, --force and sweeps see it."""
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench.store import RunLock, RunLocked, RunStore, StoreError, lock_holder

REPO = Path(__file__).resolve().parent.parent

# A trainer process: resolve the smoke config, wait for the shared start signal, train (each epoch sleeps 1.5 s
# so the two trainers overlap), print one JSON line with the outcome.
TRAINER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from workbench.store import RunStore, StoreError
    from workbench.train import resolve_config, train

    root, go = sys.argv[1], Path(sys.argv[2])
    store = RunStore(root)
    cfg = resolve_config(preset="smoke", scheme="rope", task="t1", sets=["train.epochs=2"], store=store)
    print(json.dumps({"ready": os.getpid()}), flush=True)
    while not go.exists():
        time.sleep(0.01)
    try:
        run = train(cfg, store, progress=False, threads=1, on_epoch=lambda run, row: time.sleep(1.5))
        print(json.dumps({"pid": os.getpid(), "outcome": run.status, "id": run.id}), flush=True)
    except StoreError as e:
        print(json.dumps({"pid": os.getpid(), "outcome": "refused", "error": str(e), "type": type(e).__name__}),
              flush=True)
""")


def _env(tmp_path):
    return dict(os.environ, PYTHONPATH=str(REPO), PELAB_DATA=str(tmp_path / "data"), PELAB_THREADS="1",
                OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1")


@pytest.mark.slow
def test_two_trainers_of_one_config_in_parallel_processes(tmp_path):
    root, go = tmp_path / "runs", tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", TRAINER, str(root), str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env(tmp_path)) for _ in range(2)]
    for p in procs:  # both have imported torch and resolved the config: start them together
        line = p.stdout.readline()
        assert "ready" in line, p.stderr.read()
    go.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    by = {o["outcome"]: o for o in outs}
    assert set(by) == {"finished", "refused"}, outs  # exactly one trains; the other is refused at once
    assert by["refused"]["type"] == "RunLocked"
    assert f"pid {by['finished']['pid']}" in by["refused"]["error"] and "being trained" in by["refused"]["error"]
    store = RunStore(root)
    run = store.get(by["finished"]["id"])
    assert run.status == "finished" and run.info["epoch"] == 2
    assert not list(run.path.glob(".*.tmp")) and not list(run.path.glob("*.next"))
    assert run.load_checkpoint()[2]["epoch"] == 2  # the checkpoint is intact and matches its digests
    assert lock_holder(root, run.id) is None  # released when the trainer finished


def test_a_refused_trainer_names_a_holder_that_writes_its_pid_just_after_taking_the_lock(tmp_path):
    """The holder takes the flock, then writes pid / host / since: a trainer refused in that window (it happened
    under load: "is being trained by pid ? on ?") waits for them instead of naming nobody."""
    import fcntl
    import threading

    from workbench.store.lock import lock_path

    path = lock_path(tmp_path, "t1-x")
    path.parent.mkdir(parents=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT)  # another open file description: flock conflicts with it
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    late = threading.Timer(0.3, lambda: path.write_text(json.dumps({"pid": 4242, "host": "h", "since": "t"})))
    late.start()
    try:
        with pytest.raises(RunLocked, match="being trained by pid 4242 on h"):
            RunLock(tmp_path, "t1-x").acquire()
        assert lock_holder(tmp_path, "t1-x")["pid"] == 4242
    finally:
        late.cancel()
        os.close(fd)
    assert lock_holder(tmp_path, "t1-x") is None


def test_force_refuses_to_delete_a_run_another_process_trains(tmp_path):
    from workbench.train import resolve_config, train

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config(preset="smoke", store=store)
    run = store.create(cfg)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from workbench.store import RunLock
        RunLock({str(store.root)!r}, {run.id!r}).acquire()
        print("held", flush=True)
        time.sleep(120)
    """)], stdout=subprocess.PIPE, text=True, env=_env(tmp_path))
    try:
        assert holder.stdout.readline().strip() == "held"
        h = lock_holder(store.root, run.id)
        assert h["pid"] == holder.pid
        with pytest.raises(RunLocked, match=rf"pid {holder.pid}"):
            train(cfg, store, force=True, progress=False)
        with pytest.raises(StoreError, match="cannot delete.*being trained"):
            store.delete(run.id)
        assert (run.path / "config.json").exists()  # nothing was deleted
    finally:
        holder.send_signal(signal.SIGKILL)  # the kernel drops the lock of a killed process
        holder.wait()
    assert lock_holder(store.root, run.id) is None
    assert train(cfg, store, force=True, progress=False, threads=1).status == "finished"


def test_lock_is_exclusive_across_handles_and_survives_deleting_the_run(tmp_path):
    a, b = RunLock(tmp_path, "r1"), RunLock(tmp_path, "r1")
    with a:
        with pytest.raises(RunLocked, match=f"pid {os.getpid()}"):
            b.acquire()
        assert RunLock(tmp_path, "r2").acquire().held  # other runs are independent
        assert not (tmp_path / "r1").exists() and a.path.parent.name == ".locks"
    assert b.acquire().held
    b.release()


def test_cli_train_of_a_locked_run_is_a_clear_error(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from workbench.cli import app
    from workbench.train import resolve_config

    monkeypatch.setenv("PELAB_DATA", str(tmp_path / "data"))
    store = RunStore(tmp_path / "runs")
    rid = store.run_id(resolve_config(preset="smoke", store=store))
    with store.lock(rid):
        for extra in ([], ["--force"]):
            r = CliRunner().invoke(app, ["train", "-p", "smoke", "-q", "--root", str(store.root), *extra])
            assert r.exit_code == 2 and "error:" in r.output and "being trained by pid" in r.output, r.output
            assert "Traceback" not in r.output
    assert not store.exists(rid)
    # released: training now works
    r = CliRunner().invoke(app, ["train", "-p", "smoke", "-q", "--threads", "1", "--root", str(store.root)])
    assert r.exit_code == 0, r.output
