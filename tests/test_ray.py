"""Ray as the sweep engine, on a local 2-CPU Ray cluster started once for this module (smoke grid, tiny models)."""
import os
import sys
import threading
import time

import pytest
from typer.testing import CliRunner

from sweeps import TINY, metrics_without_timing, quiet
from workbench.store import RunStore
from workbench.train import grid_points, resolve_config, sweep

GRID = {"name": "r", "preset": "smoke", "tasks": ["t1"], "seeds": [1], "schemes": ["nope", "rope"], "set": TINY}


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="the Ray engine needs the extra: pip install 'pe-lab[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False,
             _system_config={"worker_niceness": 0})
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_sweep_matches_a_sequential_sweep(ray_cluster, tmp_path, data_dir):
    seq_store, ray_store = RunStore(tmp_path / "seq", data_dir=data_dir), RunStore(tmp_path / "ray", data_dir=data_dir)
    seq = sweep(GRID, seq_store, device="cpu", threads=1, progress=False, log=quiet)
    res = sweep(GRID, ray_store, device="cpu", ray=True, log=quiet)
    assert [r["outcome"] for r in res] == ["trained", "trained"] and [set(r) for r in res] == [set(r) for r in seq]
    assert [r["id"] for r in res] == [r["id"] for r in seq]
    for r in res:  # bit-identical metrics (same thread count: 1)
        run = ray_store.get(r["id"])
        assert run.status == "finished" and run.info["pid"] != os.getpid() and run.info["threads"] == 1
        assert run.info["omp_wait_policy"] == "PASSIVE"
        assert metrics_without_timing(run) == metrics_without_timing(seq_store.get(r["id"]))
    assert {r["outcome"] for r in sweep(GRID, ray_store, device="cpu", ray=True, log=quiet)} == {"finished"}


def test_a_killed_ray_worker_leaves_its_run_for_the_next_sweep(ray_cluster, tmp_path, data_dir):
    store = RunStore(tmp_path / "runs", data_dir=data_dir)
    grid = GRID | {"schemes": ["rope"], "set": TINY | {"train.epochs": 12}}
    run_id = store.run_id(resolve_config(store=store, **grid_points(grid)[0]))
    out = {}
    t = threading.Thread(target=lambda: out.update(res=sweep(grid, store, device="cpu", ray=True, log=quiet)))
    t.start()
    deadline = time.time() + 180
    while time.time() < deadline:  # kill the Ray worker process once the run has a checkpoint
        info = store.get(run_id).info if store.exists(run_id) else {}
        if info.get("status") == "running" and info.get("epoch", 0) >= 1:
            os.kill(info["pid"], 9)
            break
        time.sleep(0.02)
    t.join(timeout=180)
    assert out["res"][0]["outcome"] == "failed" and "next sweep resumes" in out["res"][0]["error"]
    epoch_at_kill = store.get(run_id).info["epoch"]
    for _ in range(100):  # the dead pid is recognised once the OS has it (zombies count as dead)
        if store.get(run_id).status == "interrupted":
            break
        time.sleep(0.1)
    assert store.get(run_id).status == "interrupted" and 1 <= epoch_at_kill < 12
    again = sweep(grid, store, device="cpu", ray=True, log=quiet)
    assert again[0]["outcome"] == "resumed" and store.get(run_id).status == "finished"
    assert store.get(run_id).info["resumed_from_epoch"] == epoch_at_kill


def test_unreachable_ray_address_fails_fast_and_creates_nothing(tmp_path):
    from workbench.cli import app

    grid = tmp_path / "g.toml"
    grid.write_text('preset = "smoke"\nschemes = ["nope"]\n')
    t0 = time.time()
    res = CliRunner().invoke(app, ["sweep", str(grid), "--ray-address", "127.0.0.1:9", "--root", str(tmp_path / "r")])
    text = res.output + str(res.exception or "")  # the CLI's error path: `error: ...`
    assert res.exit_code != 0 and "127.0.0.1:9" in text and "ray start --head" in text
    assert time.time() - t0 < 10 and not (tmp_path / "r").exists() and not (tmp_path / "data_cache").exists()
    with pytest.raises(ValueError, match="no Ray cluster reachable"):
        sweep(GRID, RunStore(tmp_path / "r2"), device="cpu", ray="ray://127.0.0.1:9")
    assert not list((tmp_path / "r2").iterdir()) and not (tmp_path / "data_cache").exists()


def test_missing_ray_names_the_extra(tmp_path, monkeypatch):
    from workbench.cli import app

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    grid = tmp_path / "g.toml"
    grid.write_text('preset = "smoke"\nschemes = ["nope"]\n')
    res = CliRunner().invoke(app, ["sweep", str(grid), "--ray", "--root", str(tmp_path / "r")])
    assert res.exit_code == 2 and "pip install 'pe-lab[ray]'" in res.output and not (tmp_path / "r").exists()
