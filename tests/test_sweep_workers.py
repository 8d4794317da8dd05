"""Parallel sweep workers (`sweep(..., workers=N)`, `workbench sweep --workers N`) on tiny smoke runs."""
import os
import subprocess
import sys
import threading
import time

import psutil
import pytest
from typer.testing import CliRunner

from sweeps import TINY, metrics_without_timing, quiet
from workbench.store import RunStore
from workbench.train import grid_points, resolve_config, sweep, train
from workbench.train.workers import warn_oversubscribed

GRID = {"name": "w", "preset": "smoke", "tasks": ["t1", "t2"], "seeds": [1], "schemes": ["nope", "rope"], "set": TINY}


@pytest.mark.slow
def test_workers_match_a_sequential_sweep_and_keep_skip_resume_semantics(tmp_path, data_dir, monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    seq_store, par_store = RunStore(tmp_path / "seq", data_dir=data_dir), RunStore(tmp_path / "par", data_dir=data_dir)
    seq = sweep(GRID, seq_store, device="cpu", threads=1, progress=False, log=quiet)
    assert {r["outcome"] for r in seq} == {"trained"}

    configs = [resolve_config(store=par_store, **p) for p in grid_points(GRID)]
    done = train(configs[0], par_store, device="cpu", progress=False, threads=1)
    half = train(configs[1], par_store, device="cpu", progress=False, threads=1, stop_after_epochs=1)
    lines = []
    par = sweep(GRID, par_store, device="cpu", workers=2, progress=True, log=lines.append)
    assert [r["id"] for r in par] == [r["id"] for r in seq]  # grid order, same record keys
    assert [set(r) for r in par] == [set(r) for r in seq]
    assert [r["outcome"] for r in par] == ["finished", "resumed", "trained", "trained"]
    assert [r["test_acc"] for r in par] == [r["test_acc"] for r in seq]
    for r in seq:  # bit-identical metrics, whether trained here, in a worker, or resumed in a worker
        assert metrics_without_timing(par_store.get(r["id"])) == metrics_without_timing(seq_store.get(r["id"]))
    workers_pids = {par_store.get(r["id"]).info["pid"] for r in par[1:]}
    assert os.getpid() not in workers_pids and done.info["pid"] == os.getpid()
    assert {par_store.get(r["id"]).info["omp_wait_policy"] for r in par[1:]} == {"PASSIVE"}
    assert all(par_store.get(r["id"]).info["threads"] == 1 for r in par[1:])
    assert all(par_store.get(r["id"]).info["peak_rss_mb"] > 50 for r in par)
    assert half.status == "finished" and half.info["resumed_from_epoch"] == 1
    assert any(line.startswith("w0 ") and "epoch 2/2" for line in lines)  # per-worker progress (not a tty)
    assert any(line.startswith("w1 ") for line in lines)
    again = sweep(GRID, par_store, device="cpu", workers=2, progress=False, log=quiet)
    assert {r["outcome"] for r in again} == {"finished"}


@pytest.mark.slow
def test_workers_skip_a_run_another_live_process_trains(tmp_path, data_dir):
    store = RunStore(tmp_path / "runs", data_dir=data_dir)
    grid = GRID | {"tasks": ["t1"]}
    cfg = resolve_config(store=store, **grid_points(grid)[0])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run = store.create(cfg)
        run.update_info(status="running", host=__import__("socket").gethostname(), pid=other.pid,
                        pid_started=psutil.Process(other.pid).create_time())
        res = sweep(grid, store, device="cpu", workers=2, progress=False, log=quiet)
        assert store.get(run.id).info["pid"] == other.pid and store.get(run.id).status == "running"  # untouched
    finally:
        other.kill()
        other.wait()
    assert [r["outcome"] for r in res] == ["busy", "trained"]


@pytest.mark.slow
def test_a_killed_worker_leaves_its_run_for_the_next_sweep(tmp_path, data_dir):
    store = RunStore(tmp_path / "runs", data_dir=data_dir)
    grid = GRID | {"tasks": ["t1"], "schemes": ["rope"], "set": TINY | {"train.epochs": 12}}
    run_id = store.run_id(resolve_config(store=store, **grid_points(grid)[0]))
    out = {}
    t = threading.Thread(target=lambda: out.update(res=sweep(grid, store, device="cpu", workers=2, progress=False,
                                                             log=quiet)))
    t.start()
    deadline = time.time() + 120
    while time.time() < deadline:  # kill the worker once the run has a checkpoint
        info = store.get(run_id).info if store.exists(run_id) else {}
        if info.get("status") == "running" and info.get("epoch", 0) >= 1:
            os.kill(info["pid"], 9)
            break
        time.sleep(0.02)
    t.join(timeout=120)
    assert out["res"][0]["outcome"] == "failed" and "worker process died" in out["res"][0]["error"]
    epoch_at_kill = store.get(run_id).info["epoch"]
    for _ in range(100):  # the dead pid is recognised once the OS has it (zombies count as dead)
        if store.get(run_id).status == "interrupted":
            break
        time.sleep(0.1)
    assert store.get(run_id).status == "interrupted" and 1 <= epoch_at_kill < 12  # dead pid: resumable
    again = sweep(grid, store, device="cpu", workers=2, progress=False, log=quiet)
    assert again[0]["outcome"] == "resumed" and store.get(run_id).status == "finished"
    assert store.get(run_id).info["resumed_from_epoch"] == epoch_at_kill


def test_bad_worker_counts(tmp_path, data_dir, monkeypatch):
    with pytest.raises(ValueError, match="workers=0"):
        sweep(GRID, RunStore(tmp_path / "runs", data_dir=data_dir), device="cpu", workers=0, log=quiet)
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())
    lines = []
    warn_oversubscribed(len(os.sched_getaffinity(0)) + 1, lines.append)
    assert len(lines) == 1 and "more than the" in lines[0] and "CPU cores" in lines[0]
    warn_oversubscribed(1, lines.append)
    assert len(lines) == 1

    from workbench.cli import app

    grid = tmp_path / "g.toml"
    grid.write_text('preset = "smoke"\nschemes = ["nope"]\n')
    res = CliRunner().invoke(app, ["sweep", str(grid), "--workers", "0", "--root", str(tmp_path / "cli")])
    assert res.exit_code == 2 and "--workers 0" in res.output and not (tmp_path / "cli").exists()


def test_entry_points_set_omp_wait_policy_before_torch():
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    code = "import os, workbench.cli; print(os.environ.get('OMP_WAIT_POLICY'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "PASSIVE"


def test_a_sweep_skips_grid_points_shipped_in_a_results_store(tmp_path, data_dir):
    """A grid resumes across sessions whose run stores did not survive: `shipped` (`--shipped results/repro`) skips
    the points finished in the results store, in grid order; a point still in the own store trains there."""
    from workbench.cli import app
    from workbench.store.ship import ship_run

    first = RunStore(tmp_path / "old", data_dir=data_dir)
    one = train(resolve_config(store=first, **grid_points(GRID)[0]), first, device="cpu", progress=False, threads=1)
    ship_run(one, tmp_path / "results")
    shipped = RunStore(tmp_path / "results", readonly=True)
    fresh = RunStore(tmp_path / "new", data_dir=data_dir)
    plan = sweep(GRID, fresh, device="cpu", dry_run=True, progress=False, log=quiet, shipped=shipped)
    assert [r["outcome"] for r in plan] == ["shipped", "planned", "planned", "planned"]
    assert plan[0]["id"] == one.id and plan[0]["test_acc"] == one.final["test_acc"]
    assert not fresh.exists(one.id)  # nothing written for it
    assert [r["outcome"] for r in sweep(GRID, fresh, device="cpu", dry_run=True, progress=False, log=quiet)] \
        == ["planned"] * 4  # without it, the shipped point would train again
    res = CliRunner().invoke(app, ["sweep", "--dry-run", "--root", str(tmp_path / "new"), "--shipped",
                                   str(tmp_path / "results"), str(_grid_file(tmp_path))],
                             env={"PELAB_DATA": str(data_dir)})
    assert res.exit_code == 0, res.output
    assert f"{one.id}  shipped already" in res.output and "1 shipped" in res.output


def _grid_file(tmp_path):
    import json

    path = tmp_path / "grid.toml"
    lines = [f"{k} = {json.dumps(v)}" for k, v in GRID.items() if k != "set"]
    lines += ["[set]"] + [f'"{k}" = {json.dumps(v)}' for k, v in TINY.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_worker_reads_the_code_version_when_it_starts(tmp_path, monkeypatch):
    """A worker's runs record the code it imported: `_worker` reads (and caches) the version before its first job,
    so an edit made while it waits for one does not change what its runs record."""
    import queue as q

    from workbench.store import runstore
    from workbench.train import workers

    tree = {"version": "v1"}
    monkeypatch.setattr(runstore, "git_version", lambda src: tree["version"])
    runstore.code_version.cache_clear()
    inbox, events = q.Queue(), q.Queue()
    inbox.put(None)  # no job: the worker starts and stops
    monkeypatch.setattr(workers, "exit_with_parent", lambda parent: None)
    try:
        workers._worker(0, str(tmp_path / "runs"), str(tmp_path / "data"), inbox, events, {}, os.getpid())
        assert events.get_nowait() == ("ready", 0)
        tree["version"] = "v2-dirty"  # an edit after the worker started
        assert runstore.code_version() == "v1"  # what the worker read when it started
    finally:
        runstore.code_version.cache_clear()
