"""benchmarks/gpu_window.sh, the one-call GPU window, run end to end on CPU (DEVICE=cpu, a tiny grid): it trains
what fits the deadline, ships each run beside the sweep (the follower stops when the sweep ends), and packs what a
window brings back into OUT: results, metrics without weights, logs."""
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_gpu_window_trains_ships_and_packs_on_cpu(tmp_path):
    grid = tmp_path / "tiny.toml"
    grid.write_text('name = "tiny"\npreset = "smoke"\ntasks = ["trigger-distance"]\nseeds = [42]\nschemes = []\n'
                    'set = { "task.n_examples" = 400, "train.epochs" = 2 }\n'
                    '[[variants]]\nname = "rope"\nscheme = "rope"\n[[variants]]\nname = "nope"\nscheme = "nope"\n')
    step_ms = tmp_path / "step_ms.json"
    step_ms.write_text(json.dumps({"rope": 5.0}))  # NoPE's time unknown: not started (no checkpoint comes back)
    out, results = tmp_path / "out", tmp_path / "results"
    env = {**os.environ, "OUT": str(out), "GRID": str(grid), "TAGS": "rope,nope", "GPU_PY": sys.executable,
           "GPU_SITE": str(tmp_path / "site"), "DEVICE": "cpu", "COMPILE": "no", "RESERVE": "5",
           "STEP_MS": str(step_ms), "RESULTS": str(results), "INDUCTOR_CACHE": str(tmp_path / "cache"), "PAPER_RUNS": str(tmp_path / "runs"),
           "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    t0 = time.monotonic()
    res = subprocess.run(["bash", "benchmarks/gpu_window.sh", "120"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=240)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert time.monotonic() - t0 < 100  # the follower stopped with the sweep, not after idle looks
    shipped = [p.name for p in results.iterdir()]
    assert len(shipped) == 1 and shipped[0].startswith("t1-rope-smoke-s42")
    assert {"manifest.json", "tables.parquet", "metrics.jsonl"} <= {p.name for p in (results / shipped[0]).iterdir()}
    assert {p.name for p in out.iterdir()} == {"window.log", "results-paper.tgz", "runs-paper-meta.tgz", "logs.tgz"}
    with tarfile.open(out / "results-paper.tgz") as t:
        assert any(n.endswith(f"{shipped[0]}/manifest.json") for n in t.getnames())
    with tarfile.open(out / "runs-paper-meta.tgz") as t:
        names = t.getnames()
        assert any(n.endswith("metrics.jsonl") for n in names) and not any(n.endswith(".safetensors") for n in names)
    with tarfile.open(out / "logs.tgz") as t:
        sweep_log = t.extractfile("sweep.log").read().decode()
    assert "its time unknown: no --step-ms entry for 'nope'" in sweep_log
    assert "environment ready" in (out / "window.log").read_text()
