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

import pytest

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
           "INDUCTOR_TGZ": str(tmp_path / "none.tgz"),
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


def test_gpu_window_check_only_runs_the_step_benchmark_and_trains_nothing(tmp_path):
    """`--check-only` (a second, short call of a window): the wheels, benchmarks/gpu_check.sh without the gpu tests
    (T_TESTS=0) and without the epochs, i.e. benchmarks/gpu_step.py on CPU at the smoke preset (eager and compiled
    step, the agreement, the mask, the profile of the compiled step), and no training: gpu_step.json and the logs
    come back, no results."""
    out = tmp_path / "out"
    packed = tmp_path / "packed" / ".inductor-cache" / "triton" / "K"  # an earlier window's kernels, as it packs them
    packed.mkdir(parents=True)
    (packed / "k.cubin").write_bytes(b"\x7fELF")
    with tarfile.open(tmp_path / "cache.tgz", "w:gz") as t:
        t.add(tmp_path / "packed" / ".inductor-cache", arcname=".inductor-cache")
    env = {**os.environ, "OUT": str(out), "GPU_PY": sys.executable, "GPU_SITE": str(tmp_path / "site"),
           "DEVICE": "cpu", "T_TESTS": "0", "EPOCH": "0", "RESULTS": str(tmp_path / "results"),
           "PAPER_RUNS": str(tmp_path / "runs"), "INDUCTOR_CACHE": str(tmp_path / "cache"),
           "INDUCTOR_TGZ": str(tmp_path / "cache.tgz"),
           "CHECK_ARGS": "--device cpu --preset smoke --schemes rope --steps 2 --agree-steps 2 --profile "
                         "--profile-rows 5", "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    res = subprocess.run(["bash", "benchmarks/gpu_window.sh", "--check-only", "200"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert not (tmp_path / "runs").exists() and not any((tmp_path / "results").iterdir())
    got = json.loads((out / "gpu_step.json").read_text())
    row = got["step"]["rope"]
    assert row["eager_ms"] > 0 and row["compiled_ms"] > 0 and got["step_ms"]
    assert got["agree"]["max_abs_diff"] < 1e-4  # fp32 on CPU: eager and compiled agree
    assert got["profile"]["top"] and got["profile"]["scheme"] == "rope"
    assert {"window.log", "gpu_step.json", "logs.tgz"} <= {p.name for p in out.iterdir()}
    assert "results-paper.tgz" not in {p.name for p in out.iterdir()}
    assert "check only: no training" in (out / "window.log").read_text()
    # the carried kernels were unpacked into the cache before anything compiled, and Triton's folder goes back
    assert "compile cache unpacked" in (out / "window.log").read_text()
    assert (tmp_path / "cache" / "triton" / "K" / "k.cubin").read_bytes() == b"\x7fELF"
    with tarfile.open(out / "inductor-cache.tgz") as t:
        names = t.getnames()
    assert "cache/triton/K/k.cubin" in names and not any(n.startswith("cache/fxgraph") for n in names)


def test_the_step_benchmark_reads_modes_and_refuses_a_wrong_one_first():
    """gpu_step.py --modes: torch.compile modes (`loop.compile_mode`); a wrong one stops the benchmark before
    anything is compiled, naming the ones to use."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from gpu_step import parse_modes

    assert parse_modes("reduce-overhead,default,") == ["reduce-overhead", "default"]
    with pytest.raises(SystemExit, match="compile mode 'foo'"):
        parse_modes("reduce-overhead,foo")


def test_the_step_profile_ranks_gpu_kernels_once_not_operators_and_launches_too():
    """On CUDA an operator's row (aten::mm) carries its kernels' device time and a Triton kernel's launch is a CPU
    row named as the kernel: the profile ranks the GPU's kernel rows only, so each kernel counts once (the H100
    check of 2026-11-27 summed 29.2 ms for a 15.9-ms step). On CPU it ranks the operators by their CPU time."""
    from types import SimpleNamespace as Row

    from torch.autograd import DeviceType

    sys.path.insert(0, str(REPO / "benchmarks"))
    from gpu_step import profile_rows

    rows = [Row(key="aten::mm", device_type=DeviceType.CPU, self_device_time_total=30, self_cpu_time_total=5),
            Row(key="nvjet_gemm", device_type=DeviceType.CUDA, self_device_time_total=30, self_cpu_time_total=0),
            Row(key="triton_poi_k", device_type=DeviceType.CPU, self_device_time_total=15, self_cpu_time_total=2),
            Row(key="triton_poi_k", device_type=DeviceType.CUDA, self_device_time_total=15, self_cpu_time_total=0),
            Row(key="cudaLaunchKernel", device_type=DeviceType.CPU, self_device_time_total=0, self_cpu_time_total=9)]
    key, kept = profile_rows(rows, cuda=True)
    assert key == "self_device_time_total" and [r.key for r in kept] == ["nvjet_gemm", "triton_poi_k"]
    assert sum(getattr(r, key) for r in kept) == 45
    key, kept = profile_rows(rows, cuda=False)
    assert key == "self_cpu_time_total" and [r.key for r in kept] == ["aten::mm", "triton_poi_k", "cudaLaunchKernel"]


def test_the_step_benchmarks_indexed_reference_computes_what_the_split_does(tiny_cfg):
    """gpu_step.py --kv-ab times the fused key/value projection as the model splits it against the indexing it
    replaced (`indexed_memory_kv`): a fair A/B needs the two to compute the same keys, values and gradients."""
    import torch

    sys.path.insert(0, str(REPO / "benchmarks"))
    from gpu_step import fused_memory_kv, indexed_memory_kv

    from workbench.model import PEClassifier

    grads, outs = [], []
    for patch in (fused_memory_kv, indexed_memory_kv):
        torch.manual_seed(0)
        model = PEClassifier(tiny_cfg(scheme="rope", arch="paper"))
        patch(model)
        x = torch.randint(1, model.cfg.vocab_size, (3, 10))
        logits = model(x)
        logits.square().sum().backward()
        outs.append(logits.detach())
        grads.append([p.grad.clone() for p in model.parameters()])
    assert torch.equal(outs[0], outs[1])
    assert all(torch.equal(a, b) for a, b in zip(*grads))
