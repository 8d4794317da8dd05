"""benchmarks/gpu_window.sh, a lent GPU window, run end to end on CPU (DEVICE=cpu, a tiny grid): in one call it trains
what fits the deadline, ships each run beside the sweep (the follower stops when the sweep ends), and packs what a
window brings back into OUT: results, metrics without weights, logs. In two calls (--detach, then --attach) the
training job outlives the first call's process group, and the second call packs what it shipped, or resumes it
when the first call's end killed it."""
import hashlib
import io
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TINY = ('name = "tiny"\npreset = "smoke"\ntasks = ["trigger-distance"]\nseeds = [42]\nschemes = []\n'
        'set = { "task.n_examples" = 400, "train.epochs" = 2 }\n'
        '[[variants]]\nname = "rope"\nscheme = "rope"\n[[variants]]\nname = "nope"\nscheme = "nope"\n')


def window_env(tmp_path, **extra) -> dict:
    """The window's variables for a CPU dry run in `tmp_path`: the tiny grid, RoPE's step time known (NoPE's not, so
    NoPE is never started: no checkpoint comes back), every folder the window writes under tmp_path."""
    (tmp_path / "tiny.toml").write_text(TINY)
    (tmp_path / "step_ms.json").write_text(json.dumps({"rope": 5.0}))
    return {**os.environ, "OUT": str(tmp_path / "out"), "GRID": str(tmp_path / "tiny.toml"), "TAGS": "rope,nope",
            "GPU_PY": sys.executable, "GPU_SITE": str(tmp_path / "site"), "DEVICE": "cpu", "COMPILE": "no",
            "RESERVE": "5", "STEP_MS": str(tmp_path / "step_ms.json"),
            "STORED_MS": str(tmp_path / "step_ms.json"), "RESULTS": str(tmp_path / "results"),
            "INDUCTOR_CACHE": str(tmp_path / "cache"), "PAPER_RUNS": str(tmp_path / "runs"),
            "INDUCTOR_TGZ": str(tmp_path / "none.tgz"), "WINDOW_STATE": str(tmp_path / "state"),
            "WHEELS": str(tmp_path / "no-wheels"),  # never the checkout's own .whl/ (made for the GPU's Python)
            "SPARE": "",  # no step measurement in the time a sweep leaves (test_the_job_measures_in_the_spare_time)
            "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", **extra}


# a stand-in's case branch for the window's calls a test of the script's decisions does not need: the sweep (it
# trains nothing), the shipping, and the import checks (`python -c ...`)
NOTHING_RUNS = '*" sweep "*|*" ship "*|*" -c "*) exit 0'


def stand_in_python(tmp_path, name: str, on_sweep: str) -> Path:
    """A stand-in for the window's python (GPU_PY): it logs each call's arguments to calls.log, runs the bash case
    branch `on_sweep` (`PATTERN) COMMANDS`) where they match, then the real python."""
    py = tmp_path / name
    py.write_text(f'#!/bin/bash\necho "$*" >> {tmp_path / "calls.log"}\ncase " $* " in {on_sweep};; esac\n'
                  f'exec {sys.executable} "$@"\n')
    py.chmod(0o755)
    return py


def window(env, *args, timeout=240, **kw) -> subprocess.CompletedProcess:
    res = subprocess.run(["bash", "benchmarks/gpu_window.sh", *args], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=timeout, **kw)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res


def shipped_in(tgz: Path) -> set[str]:
    """The run ids a results-paper.tgz holds (members RESULTS/RUN_ID/...), none half-shipped."""
    with tarfile.open(tgz) as t:
        names = t.getnames()
    assert not any("/." in n for n in names), names  # no .RUN_ID.shipping / .old folder
    return {Path(n).parent.name for n in names if n.endswith("/manifest.json")}


@pytest.mark.slow
def test_gpu_window_trains_ships_and_packs_on_cpu(tmp_path):
    """One call; SDPA_BACKEND=auto puts first the backend its check chose (here a check's JSON put in place; a check
    that ran would also bring it back), with --fail-fast: when that sweep fails (here a stand-in python that fails
    every sweep given a backend), the runs go on in PyTorch's order."""
    py = stand_in_python(tmp_path, "python",
                         '*" sweep "*--sdpa-backend*) echo "simulated: the backend broke the step"; exit 1')
    env = window_env(tmp_path, SDPA_BACKEND="auto", GPU_PY=str(py))
    out, results = tmp_path / "out", tmp_path / "results"
    (out / "check").mkdir(parents=True)
    (out / "check" / "gpu_step.json").write_text(json.dumps(
        {"step": {"rope": {"eager_ms": 50.0, "compiled_ms": 20.0}}, "sdpa": {"math": {"eager": 40.0}}}))
    t0 = time.monotonic()
    window(env, "120")
    assert time.monotonic() - t0 < 100  # the follower stopped with the sweep, not after idle looks
    shipped = [p.name for p in results.iterdir()]
    assert len(shipped) == 1 and shipped[0].startswith("t1-rope-smoke-s42")
    assert {"manifest.json", "tables.parquet", "metrics.jsonl"} <= {p.name for p in (results / shipped[0]).iterdir()}
    from workbench.store import RunStore

    # shipped with TABLES, then with THEN_TABLES (the fast analyses) too
    assert set(RunStore(results, readonly=True).get(shipped[0]).tables()) == {
        "ablation", "deposit", "qk_means", "angles", "spectral", "distance_bias"}
    assert {p.name for p in out.iterdir()} == {"window.log", "results-paper.tgz", "runs-paper-meta.tgz", "logs.tgz"}
    assert shipped_in(out / "results-paper.tgz") == set(shipped)
    with tarfile.open(out / "runs-paper-meta.tgz") as t:
        names = t.getnames()
        assert any(n.endswith("metrics.jsonl") for n in names) and not any(n.endswith(".safetensors") for n in names)
    with tarfile.open(out / "logs.tgz") as t:
        sweep_log = t.extractfile("./sweep.log").read().decode()
        ship_log = t.extractfile("./ship.log").read().decode()
    assert "its time unknown: no --step-ms entry for 'nope'" in sweep_log
    assert f"{shipped[0]}: shipped again, with qk_means, angles, spectral, distance_bias" in ship_log
    assert "environment ready" in (out / "window.log").read_text()
    log = (out / "window.log").read_text()
    assert "flags: --sdpa-backend math;" in log
    assert "the sweep failed with SDPA's math first: the runs again in PyTorch's order" in log
    assert any("--sdpa-backend math --fail-fast" in c for c in (tmp_path / "calls.log").read_text().splitlines())
    assert json.loads((results / shipped[0] / "run.json").read_text())["sdpa_backend"] is None


@pytest.mark.parametrize("agrees", [True, False])
def test_a_window_told_to_train_with_the_triton_kernel_checks_its_agreement_first(tmp_path, agrees):
    """SDPA_BACKEND=triton with no check of this window behind it: `gpu_step.py --kernel-check` first; the sweep
    puts the kernel first (with --fail-fast) only where that passed, else trains in PyTorch's order. A stand-in
    python answers the agreement, the import checks and the shipping, and ends each sweep at once."""
    verdict = "exit 0" if agrees else "exit 1"
    py = stand_in_python(tmp_path, "python", f'*gpu_step.py*--kernel-check*) {verdict};; {NOTHING_RUNS}')
    window(window_env(tmp_path, GPU_PY=str(py), SDPA_BACKEND="triton"), "60")
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert any("--kernel-check" in c and "kernel_check.json" in c for c in calls)
    sweeps = [c for c in calls if " sweep " in f" {c} "]
    log = (tmp_path / "out" / "window.log").read_text()
    if agrees:
        assert "agrees with SDPA" in log and "--sdpa-backend triton --fail-fast" in sweeps[0]
    else:
        assert "did not pass its agreement" in log and all("--sdpa-backend" not in c for c in sweeps)


def test_the_job_measures_the_step_in_the_time_its_sweep_leaves(tmp_path):
    """Where the sweep ends with SPARE_MIN s or more before the window's end (no run fitted them), the job runs
    benchmarks/gpu_step.py with SPARE's arguments in that time, its JSON in the logs that come back, and writes its
    exit status only after it (an --attach call waits for that); with less time left it measures nothing
    (test_the_planner_gets_the_checks_step_times_filled_from_the_stored_table). A stand-in python answers the import
    checks and the shipping, ends the sweep at once and writes the measurement's JSON."""
    said = '{"device": "NVIDIA H200", "step_ms": {"mla": 30.0}}'
    fake_step = f'for x in "$@"; do [ "$prev" = --json ] && echo \'{said}\' > "$x"; prev=$x; done; exit 0'
    py = stand_in_python(tmp_path, "python", f'{NOTHING_RUNS};; *gpu_step.py*) {fake_step}')
    env = window_env(tmp_path, GPU_PY=str(py), SPARE="--schemes mla --steps 3", SPARE_MIN="30")
    window(env, "120")
    log = (tmp_path / "out" / "window.log").read_text()
    calls = [c for c in (tmp_path / "calls.log").read_text().splitlines() if "gpu_step.py" in c]
    assert len(calls) == 1 and calls[0].endswith("--schemes mla --steps 3") and "--device cpu" in calls[0]
    assert "spare time: up to" in log and "spare measurement exit 0" in log
    assert log.index("spare measurement exit") < log.index("packed")
    with tarfile.open(tmp_path / "out" / "logs.tgz") as t:
        assert json.loads(t.extractfile("./spare_step.json").read()) == {"device": "NVIDIA H200",
                                                                          "step_ms": {"mla": 30.0}}


def test_the_planner_gets_the_checks_step_times_filled_from_the_stored_table(tmp_path):
    """The window's sweep reads the check's step_ms.json first and the stored table second (`--step-ms` twice: the
    schemes the check did not time are filled from it, `sweep.fill_step_ms`; where no check ran the two are one
    file, passed once). A stand-in python logs the sweep's arguments, trains and ships nothing, and answers the
    import checks."""
    py = stand_in_python(tmp_path, "python", NOTHING_RUNS)
    stored = tmp_path / "stored.json"
    stored.write_text(json.dumps({"step_ms": {"rope": 10.0, "nope": 8.0}}))
    window(window_env(tmp_path, GPU_PY=str(py), STORED_MS=str(stored), SPARE="--schemes mla"), "60")
    calls = [c.split() for c in (tmp_path / "calls.log").read_text().splitlines() if " sweep " in f" {c} "]
    assert [calls[-1][i + 1] for i, a in enumerate(calls[-1]) if a == "--step-ms"] == [
        str(tmp_path / "step_ms.json"), str(stored)]
    # the sweep ended with less than SPARE_MIN (60) s before the window's end less SPARE_END: nothing measured
    assert "no spare time for a step measurement" in (tmp_path / "out" / "window.log").read_text()
    assert "gpu_step.py" not in (tmp_path / "calls.log").read_text()


def test_the_window_trains_with_what_its_check_measured_faster(tmp_path):
    """`window_choice.choose`: compiled unless the eager RoPE step was faster; the SDPA backend of the fastest eager step
    where it saves more than 3 % of the step the window trains with (a backend that failed is not a candidate)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from window_choice import choose

    check = {"step": {"rope": {"eager_ms": 42.7, "compiled_ms": 15.9}},
             "sdpa": {"flash_attention": {"eager": 40.0}, "cudnn_attention": {"eager": 42.6},
                      "efficient_attention": {"error": "No available kernel"}}}
    assert choose(check) == (True, "flash_attention")  # 2.7 ms saved of a 15.9-ms step
    check["sdpa"]["flash_attention"]["eager"] = 42.3  # 0.4 ms: under 3 % of 15.9 ms
    assert choose(check) == (True, None)
    check["step"]["rope"]["compiled_ms"] = 50.0  # eager faster: the threshold is 3 % of the eager step
    assert choose(check) == (False, None)
    check["sdpa"]["flash_attention"]["eager"] = 41.0
    assert choose(check) == (False, "flash_attention")
    assert choose({}) == (True, None)
    # PE-Lab's kernel: judged by its compiled step where the window compiles, and only where it agreed with SDPA
    check["step"]["rope"]["compiled_ms"], check["sdpa"]["flash_attention"]["eager"] = 15.9, 42.3
    check["sdpa"]["triton"] = {"agree": {"ok": True}, "eager": 43.0, "compiled": 12.0}  # eager slower, compiled not
    assert choose(check) == (True, "triton")
    check["sdpa"]["triton"]["agree"]["ok"] = False
    assert choose(check) == (True, None)
    check["sdpa"]["triton"] = {"agree": {"ok": True}, "eager": 30.0, "compiled": 15.8}  # compiled: 0.1 ms saved
    assert choose(check) == (True, None)
    check["step"]["rope"]["compiled_ms"], check["sdpa"]["flash_attention"]["eager"] = 50.0, 41.0
    del check["sdpa"]["triton"]
    (tmp_path / "gpu_step.json").write_text(json.dumps(check))  # what gpu_window.sh reads: "yes|no BACKEND|-"
    got = subprocess.run([sys.executable, str(REPO / "benchmarks" / "window_choice.py"), str(tmp_path / "gpu_step.json")],
                         capture_output=True, text=True, check=True)
    assert got.stdout.split() == ["no", "flash_attention"]
    assert "torch" not in subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'benchmarks'); "
                                          "import window_choice; print(sorted(sys.modules))"], cwd=REPO,
                                         capture_output=True, text=True, check=True).stdout


def _kill_session(pid: int) -> None:
    """SIGKILL the process session `pid` leads, once it leads one (the job's setsid happens as it starts)."""
    deadline = time.monotonic() + 10
    while os.getpgid(pid) != pid and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(pid, signal.SIGKILL)
    while True:  # until it is gone or a zombie (init reaps it when it does)
        try:
            if " Z " in Path(f"/proc/{pid}/stat").read_text():
                return
        except FileNotFoundError:
            return
        time.sleep(0.05)


@pytest.mark.slow
def test_a_detached_job_outlives_its_call_and_the_next_call_resumes_one_that_did_not(tmp_path):
    """`--detach WINDOW CALL`: the job trains in its own process session, so killing the first call's process group
    (what the device machine does to what a call leaves running) does not stop it; the call packs what is shipped by
    CALL (here only what was shipped before) and returns, and a second window is refused while the job trains.
    A machine that killed the job anyway: `--attach` trains its runs in the time it has and packs them beside the
    earlier ones, as results/paper/RUN_ID/..., leaving results/paper itself as it was."""
    # the job's sweep waits before it trains (a stand-in python), so it is still training when the refusal is
    # asked on any machine: a tiny run could end within the first call's 2 s on a fast one; and the job's start
    # waits 1 s before its setsid, as a loaded machine's can: the call must not return before it (the group kill
    # below would take the job with it)
    slow = stand_in_python(tmp_path, "python-slow", '*" sweep "*) sleep 60;; *"os.setsid()"*) sleep 1')
    env = window_env(tmp_path, RESULTS=str(tmp_path / "results" / "paper"), PACK_S="1", GPU_PY=str(slow))
    old = tmp_path / "results" / "paper" / "t0-old-run"  # shipped in an earlier window: seeded, so packed again
    old.mkdir(parents=True)
    (old / "manifest.json").write_text("{}")
    out, state = tmp_path / "out", tmp_path / "state"
    first = subprocess.Popen(["bash", "benchmarks/gpu_window.sh", "--detach", "120", "2"], cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert first.wait(timeout=120) == 0, first.stdout.read()[-3000:]
    try:
        os.killpg(first.pid, signal.SIGKILL)  # what the call left running in its group
    except ProcessLookupError:
        pass
    job = int((state / "job.pid").read_text())
    time.sleep(0.5)
    os.kill(job, 0)  # still training after its call ended
    log = (out / "window.log").read_text()
    assert "training job detached" in log and "the job goes on training" in log
    assert shipped_in(out / "results-paper.tgz") == {"t0-old-run"}
    refused = subprocess.run(["bash", "benchmarks/gpu_window.sh", "--detach", "60", "2"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "a detached job is still training" in refused.stdout
    _kill_session(job)
    window(env | {"GPU_PY": sys.executable}, "--attach", "150")
    assert "did not outlive the first call: resuming" in (out / "window.log").read_text()
    got = shipped_in(out / "results-paper.tgz")
    assert "t0-old-run" in got and any(r.startswith("t1-rope-smoke-s42") for r in got) and len(got) == 2
    with tarfile.open(out / "logs.tgz") as t:
        assert {"./sweep.log", "./ship.log", "./job.log", "./window.log"} <= set(t.getnames())
    assert not any((tmp_path / "results" / "paper").glob("t1-*"))  # results/paper itself is left as it was


def test_the_next_call_waits_for_a_detached_job_and_packs_what_it_shipped(tmp_path):
    """`--attach` on a machine where the job still trains (here a stand-in that writes its exit status after 2 s):
    it waits for the job's end, then packs the runs the job shipped; no training of its own."""
    env = window_env(tmp_path, PACK_S="1")
    state, out = tmp_path / "state", tmp_path / "out"
    run = state / "results" / "t1-rope-smoke-s42-abc123"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    (state / "logs").mkdir()
    job = subprocess.Popen(["bash", "-c", f"sleep 2; echo 0 > {state / 'job.rc'}"], start_new_session=True)
    (state / "job.pid").write_text(str(job.pid))
    window(env, "--attach", "60")
    assert (state / "job.rc").exists()  # it returned only after the job had ended (the stand-in's 2 s)
    job.wait()
    log = (out / "window.log").read_text()
    assert f"the detached job is training (pid {job.pid}); waiting" in log and "resuming" not in log
    assert shipped_in(out / "results-paper.tgz") == {"t1-rope-smoke-s42-abc123"}


@pytest.mark.slow
def test_gpu_window_check_only_runs_the_step_benchmark_and_trains_nothing(tmp_path):
    """`--check-only`: the wheels, benchmarks/gpu_check.sh without the gpu tests (T_TESTS=0) and without the epochs,
    i.e. benchmarks/gpu_step.py on CPU at the smoke preset with the next window's short check (eager and "compiled"
    step, the profile of the latter, the SDPA backends; no agreement, no mask), and no training: gpu_step.json and
    the logs come back, no results. The window's plumbing is what is tested, so torch.compile is off
    (TORCH_COMPILE_DISABLE: its cold CPU compile was 29 of the test's 53 CPU-s); test_fast_path compiles the step."""
    out = tmp_path / "out"
    packed = tmp_path / "packed" / ".inductor-cache" / "triton" / "K"  # an earlier window's kernels, as it packs them
    packed.mkdir(parents=True)
    (packed / "k.cubin").write_bytes(b"\x7fELF")
    with tarfile.open(tmp_path / "cache.tgz", "w:gz") as t:
        t.add(tmp_path / "packed" / ".inductor-cache", arcname=".inductor-cache")
    env = {**os.environ, "OUT": str(out), "GPU_PY": sys.executable, "GPU_SITE": str(tmp_path / "site"),
           "DEVICE": "cpu", "T_TESTS": "0", "EPOCH": "0", "RESULTS": str(tmp_path / "results"),
           "PAPER_RUNS": str(tmp_path / "runs"), "INDUCTOR_CACHE": str(tmp_path / "cache"),
           "INDUCTOR_TGZ": str(tmp_path / "cache.tgz"), "WINDOW_STATE": str(tmp_path / "state"),
           "WHEELS": str(tmp_path / "no-wheels"),
           "CHECK_ARGS": "--device cpu --preset smoke --set model.n_layers=1 --schemes rope --steps 2 --agree-steps 0 "
                         "--no-mask --profile --profile-rows 5 --sdpa flash_attention,math", "OMP_NUM_THREADS": "1",
           "OMP_WAIT_POLICY": "PASSIVE", "TORCH_COMPILE_DISABLE": "1"}
    res = subprocess.run(["bash", "benchmarks/gpu_window.sh", "--check-only", "200"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()
    got = json.loads((out / "gpu_step.json").read_text())
    row = got["step"]["rope"]
    assert row["eager_ms"] > 0 and row["compiled_ms"] > 0 and got["step_ms"]
    assert got["triton"] == importlib.metadata.version("triton")  # the compiler of the kernels it timed
    assert got["profile"]["top"] and got["profile"]["scheme"] == "rope"
    assert set(got["sdpa"]) == {"flash_attention", "math"} and all(r["eager"] > 0 for r in got["sdpa"].values())
    assert got["agree"] == {} and got["mask"] == {}  # left out, as asked
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


def test_what_a_window_brought_back_lands_in_the_checkout(tmp_path):
    """benchmarks/window_back.py on a window's files: a new run is copied into results/paper and checked; one held
    here with another manifest is left alone and named (exit 1); the compile cache is kept for the next window; the
    logs and the check go under benchmarks/measured/<card>-<date> (a letter added for a second window that day);
    the check's step times are folded into step_ms.json; another card's replace its table, the schemes they do not
    time kept from the old card's scaled by the ratio on those they do."""
    import datetime

    sys.path.insert(0, str(REPO / "benchmarks"))
    from window_back import card_name, main

    assert (card_name("NVIDIA H100 80GB HBM3"), card_name("NVIDIA H200"), card_name(None)) == ("h100", "h200", None)
    shipped = REPO / "results" / "paper" / "t1-rope-paper-s42-82c372"  # a run a window shipped
    src, results, measured = tmp_path / "files", tmp_path / "results", tmp_path / "measured"
    src.mkdir()
    with tarfile.open(src / "results-paper.tgz", "w:gz") as t:
        t.add(shipped, arcname=f"results/paper/{shipped.name}")
    (tmp_path / "sweep.log").write_text("sweep done\n")
    with tarfile.open(src / "logs.tgz", "w:gz") as t:
        t.add(tmp_path / "sweep.log", arcname="./sweep.log")
    (src / "inductor-cache.tgz").write_bytes(b"kernels")
    (src / "window.log").write_text("[window 0 s] environment ready\n")
    (src / "gpu_step.json").write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130",
                                                   "step_ms": {"nope": 13.0}}))
    measured.mkdir()
    (measured / "step_ms.json").write_text(json.dumps(
        {"device": "NVIDIA H100 80GB HBM3", "step_ms": {"rope+sinusoidal": 15.9, "nope": 14.4}}))
    kernels = tmp_path / "kernels" / "triton.tgz"
    args = [str(src), "--results", str(results), "--measured", str(measured), "--kernels", str(kernels),
            "--no-compare"]
    assert main(args) == 0
    assert (results / shipped.name / "manifest.json").read_bytes() == (shipped / "manifest.json").read_bytes()
    day = f"h100-{datetime.date.today().isoformat()}"
    assert kernels.read_bytes() == b"kernels"  # kept for every later checkout, with where it came from
    assert json.loads(kernels.with_suffix(".json").read_text()) == {
        "window": day, "device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "bytes": 7,
        "sha256": hashlib.sha256(b"kernels").hexdigest()}
    assert {p.name for p in (measured / day).iterdir()} == {"window.log", "gpu_step.json", "sweep.log", "README.md"}
    draft = (measured / day / "README.md").read_text()  # what it knows of the window, from the run's own metrics
    rows = [json.loads(x) for x in (shipped / "metrics.jsonl").read_text().splitlines()]
    assert "NVIDIA H100 80GB HBM3" in draft and f"| `{shipped.name}` | {len(rows)} |" in draft
    assert f"{100 * rows[-1]['test_acc']:.2f} %" in draft and "- sweep done" in draft
    assert json.loads((measured / "step_ms.json").read_text()) == {
        "device": "NVIDIA H100 80GB HBM3", "measured": day, "step_ms": {"rope+sinusoidal": 15.9, "nope": 13.0}}

    (results / shipped.name / "manifest.json").write_text("{}")  # shipped here with another manifest
    (src / "gpu_step.json").write_text(json.dumps({"device": "NVIDIA H200",
                                                   "step_ms": {"rope+sinusoidal": 12.72, "mla": 30.0}}))
    assert main(args) == 1
    assert (results / shipped.name / "manifest.json").read_text() == "{}"  # left as it was
    table = json.loads((measured / "step_ms.json").read_text())  # another card's, NoPE scaled by RoPE's 0.8
    assert table["device"] == "NVIDIA H200" and table["step_ms"] == pytest.approx(
        {"rope+sinusoidal": 12.72, "mla": 30.0, "nope": 13.0 * 0.8})
    assert list(table["filled"]) == ["nope"] and "x 0.800 (rope+sinusoidal" in table["filled"]["nope"]
    assert f"from NVIDIA H100 80GB HBM3 ({day})" in table["filled"]["nope"]
    (src / "gpu_step.json").write_text(json.dumps({"device": "NVIDIA H200", "step_ms": {"nope": 11.0}}))
    main(args)  # the same card: its own figure replaces the filled one, and the note goes
    table = json.loads((measured / "step_ms.json").read_text())
    assert table["step_ms"]["nope"] == 11.0 and table["step_ms"]["mla"] == 30.0 and "filled" not in table
    assert (measured / day.replace("h100", "h200")).is_dir()
    (src / "gpu_step.json").write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "step_ms": {"nope": 12.0}}))
    main(args)
    assert (measured / (day + "b") / "gpu_step.json").exists()  # a second H100 window that day
    assert json.loads((measured / "step_ms.json").read_text())["step_ms"] == pytest.approx(
        {"nope": 12.0, "rope+sinusoidal": 12.72 * 12 / 11, "mla": 30.0 * 12 / 11})
    (src / "gpu_step.json").unlink()  # no check, and the runs do not name their GPU (trained before run.json had it)
    spare = tmp_path / "spare_step.json"  # the job's measurement in the time its sweep left: folded as a check's
    spare.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "step_ms": {"mla": 25.0}}))
    with tarfile.open(src / "logs.tgz", "w:gz") as t:
        t.add(spare, arcname="./spare_step.json")
    first = tmp_path / "call1"  # a window of two calls: the first call's own log kept beside the last's
    first.mkdir()
    (first / "window.log").write_text("[window 24 s] training job detached\n")
    main(args + ["--first", str(first)])
    assert (measured / day.replace("h100", "gpu") / "window-call1.log").read_text() == \
        "[window 24 s] training job detached\n"
    assert json.loads((measured / "step_ms.json").read_text())["step_ms"]["mla"] == 25.0
    spare.write_text('{"device": "NVIDIA H100 80GB HBM3", "step_')  # cut off mid-write: left out
    with tarfile.open(src / "logs.tgz", "w:gz") as t:
        t.add(spare, arcname="./spare_step.json")
    main(args)
    assert json.loads((measured / "step_ms.json").read_text())["step_ms"]["mla"] == 25.0


def _runs_tgz(path: Path, runs: list[Path], manifest: dict[str, str] | None = None) -> None:
    """A results-paper.tgz of `runs` (members results/paper/RUN_ID/...), a run's manifest.json replaced by
    `manifest[run id]` where given (another ship of it)."""
    with tarfile.open(path, "w:gz") as t:
        for run in runs:
            for f in sorted(run.iterdir()):
                if f.name == "manifest.json" and run.name in (manifest or {}):
                    data = manifest[run.name].encode()
                    info = tarfile.TarInfo(f"results/paper/{run.name}/manifest.json")
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
                else:
                    t.add(f, arcname=f"results/paper/{run.name}/{f.name}")


def test_a_window_of_two_calls_keeps_each_calls_runs_and_logs(tmp_path):
    """window_back.py --first: call 1's runs that call 2 did not bring back (call 2 on a fresh machine) are kept;
    a run both brought is call 2's (call 1's held its first ship), with no "another manifest"; the detached job's
    window.log (in logs.tgz) lands as job-window.log beside the call's own; the card is that of the runs the window
    added, not of the runs shipped before; an archive cut off mid-write is named and nothing of it is merged."""
    import datetime

    sys.path.insert(0, str(REPO / "benchmarks"))
    from window_back import main

    paper = REPO / "results" / "paper"
    old, a, b = (paper / r for r in ("t2-rope-paper-s43-7eb08e", "t1-rope-paper-s42-82c372",
                                     "t1-nope-paper-s42-45a1da"))
    results, measured = tmp_path / "results", tmp_path / "measured"
    results.mkdir()
    shutil.copytree(old, results / old.name)  # shipped before the window (an H200's)
    call1, call2 = tmp_path / "call1", tmp_path / "call2"
    call1.mkdir(), call2.mkdir()
    _runs_tgz(call1 / "results-paper.tgz", [old, a, b], manifest={b.name: '{"first": "ship"}'})
    _runs_tgz(call2 / "results-paper.tgz", [old, b])
    (call1 / "window.log").write_text("[window 24 s] training job detached\n")
    (call2 / "window.log").write_text("[window 3 s] the detached job has ended (exit 0)\n")
    (tmp_path / "window.log").write_text("[window 78 s] training for 657 s\n")
    with tarfile.open(call2 / "logs.tgz", "w:gz") as t:
        t.add(tmp_path / "window.log", arcname="./window.log")
    info = json.loads((a / "run.json").read_text())
    assert info.get("gpu") is None  # trained before run.json named its GPU: the card is the other added run's
    args = ["--results", str(results), "--measured", str(measured), "--kernels", str(tmp_path / "k.tgz"),
            "--no-compare"]
    assert main([str(call2), "--first", str(call1)] + args) == 0
    assert sorted(p.name for p in results.iterdir()) == sorted([old.name, a.name, b.name])
    assert (results / b.name / "manifest.json").read_bytes() == (b / "manifest.json").read_bytes()  # call 2's
    folder = measured / f"h200-{datetime.date.today().isoformat()}"
    assert (folder / "job-window.log").read_text() == "[window 78 s] training for 657 s\n"
    assert (folder / "window.log").read_text() == (call2 / "window.log").read_text()
    assert (folder / "window-call1.log").read_text() == (call1 / "window.log").read_text()

    # call 2 brought nothing back (a fresh machine): call 1's runs are kept all the same
    results2 = tmp_path / "results2"
    (call2 / "results-paper.tgz").unlink()
    _runs_tgz(call1 / "results-paper.tgz", [old, a, b])
    assert main([str(call2), "--first", str(call1), "--results", str(results2), "--measured", str(measured),
                 "--kernels", str(tmp_path / "k.tgz"), "--no-compare"]) == 0
    assert sorted(p.name for p in results2.iterdir()) == sorted([old.name, a.name, b.name])

    # an archive cut off mid-write: named, nothing of it merged, exit 1
    results3 = tmp_path / "results3"
    whole = (call1 / "results-paper.tgz").read_bytes()
    (call2 / "results-paper.tgz").write_bytes(whole[: len(whole) // 2])
    rc = main([str(call2), "--results", str(results3), "--measured", str(measured), "--kernels",
               str(tmp_path / "k.tgz"), "--no-compare"])
    assert rc == 1 and not any(results3.iterdir())


def test_the_compile_cache_is_kept_only_while_the_calls_can_carry_it(tmp_path):
    """window_back.keep_kernels: a cache that would take what one device call carries (the tracked files, .whl/ and
    it) past the limit is refused with the sizes, and the kept one stays as it was; within the limit it replaces the
    kept one, whose own size is not counted twice (it is a tracked file in the checkout)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from window_back import REPO as CHECKOUT, keep_kernels
    from window_size import travel_bytes

    dest = tmp_path / "kernels" / "triton.tgz"
    new = tmp_path / "new.tgz"
    new.write_bytes(b"k" * 1000)
    carried = travel_bytes(CHECKOUT, leave_out=dest) / 2 ** 20
    assert carried > 1  # the tracked files at least (results/repro alone is tens of MiB)
    said = keep_kernels(new, dest, {"window": "w"}, limit_mib=carried)
    assert "NOT kept" in said and "a call may carry" in said and not dest.exists()
    said = keep_kernels(new, dest, {"window": "w"}, limit_mib=carried + 0.01)
    assert "commit it" in said and dest.read_bytes() == b"k" * 1000
    assert json.loads(dest.with_suffix(".json").read_text())["bytes"] == 1000
    readme = REPO / "README.md"  # a tracked file left out is not counted (the kept cache, replaced in place)
    assert travel_bytes(REPO, leave_out=readme) == travel_bytes(REPO) - readme.stat().st_size


def test_gpu_wheel_list_is_pinned_and_matches_the_project():
    """`make gpu-wheels` fetches benchmarks/gpu_wheels.txt with --no-deps, so each line
    must pin one version of one package, none in both (two versions of one stop the whole install on the GPU), and transformer-lens, the one the model code
    depends on, must lie in pyproject.toml's range: a GPU run must not use other hook code than the CPU runs."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11
        import tomli as tomllib

    def pins(name: str) -> list:
        lines = [ln.strip() for ln in (REPO / "benchmarks" / name).read_text().splitlines()]
        return [Requirement(ln) for ln in lines if ln and not ln.startswith("#")]

    reqs = pins("gpu_wheels.txt")
    names = [canonicalize_name(r.name) for r in reqs]
    assert len(names) == len(set(names)), "a package is named twice"
    for r in reqs:
        (spec,) = r.specifier  # exactly one specifier, ==
        assert spec.operator == "==", f"{r}: pin an exact version"
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    tl = next(Requirement(d) for d in project if canonicalize_name(Requirement(d).name) == "transformer-lens")
    pinned = next(r for r in reqs if canonicalize_name(r.name) == "transformer-lens")
    assert tl.specifier.contains(next(iter(pinned.specifier)).version), (pinned, tl)


def test_the_carried_wheels_need_no_more_than_the_image_has():
    """The wheels of benchmarks/gpu_wheels.txt rely on the image's own packages (its "image:" lines, e.g. transformers
    5.17.0): each pinned wheel installed here at its pinned version must accept the image's version of every package
    it requires, and no package is both carried and taken from the image."""
    import importlib.metadata as md
    import re

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    text = (REPO / "benchmarks/gpu_wheels.txt").read_text()
    image = {canonicalize_name(n): v for n, v in re.findall(r"^# image: (\S+)==(\S+)$", text, re.M)}
    assert {"transformers", "huggingface-hub"} <= set(image)
    reqs = [Requirement(ln) for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    assert not image.keys() & {canonicalize_name(r.name) for r in reqs}, "carried and taken from the image"
    checked = []
    for r in reqs:
        try:
            dist = md.distribution(r.name)
        except md.PackageNotFoundError:
            continue
        if not r.specifier.contains(dist.version):
            continue  # this venv holds another version: its metadata says nothing of the pinned one
        for line in dist.requires or []:
            need = Requirement(line)
            if need.marker is not None and not need.marker.evaluate({"extra": ""}):
                continue
            have = image.get(canonicalize_name(need.name))
            assert have is None or need.specifier.contains(have, prereleases=True), (r, need, have)
        checked.append(canonicalize_name(r.name))
    assert {"transformer-lens", "datasets"} <= set(checked)  # the two that require transformers / the hub


def test_window_size_sums_what_a_call_sends_and_fails_over_the_limit(tmp_path):
    """benchmarks/window_size.py: tracked + untracked-not-ignored files + the carried folder, against the limit;
    ignored files do not count; over the limit it exits 1 and says what to leave behind."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import window_size

    subprocess.run(["git", "-C", str(tmp_path), "init", "-q"], check=True)
    (tmp_path / ".gitignore").write_text("/.whl/\n/big/\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "a.bin").write_bytes(b"x" * 300_000)  # untracked, not ignored: travels
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "b.bin").write_bytes(b"x" * 5_000_000)  # ignored and not carried: stays
    (tmp_path / ".whl").mkdir()
    (tmp_path / ".whl" / "w.whl").write_bytes(b"x" * 700_000)
    parts, tops = window_size.travelling(tmp_path)
    assert parts == {"tree": 300_000 + len("/.whl/\n/big/\n"), ".whl": 700_000}
    assert tops == {"results": 300_000, "(files at the root)": len("/.whl/\n/big/\n")}
    assert window_size.main(["--repo", str(tmp_path), "--limit-mib", "1"]) == 0  # 1,000,013 bytes < 1 MiB
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / "window_size.py"), "--repo", str(tmp_path),
                          "--limit-mib", "0.9"], capture_output=True, text=True)
    assert res.returncode == 1 and "over the device tool's 0.9 MiB" in res.stderr and "results 0.3 MiB" in res.stdout


def test_the_window_on_a_machine_without_a_gpu_stops_at_once_and_says_what_to_run(tmp_path):
    """`make repro-gpu` on a machine without a GPU: no training, no results, exit 1 with the reason and what to run;
    a Python that cannot import torch says so too."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the window would train")
    env = window_env(tmp_path, DEVICE="cuda")
    res = subprocess.run(["bash", "benchmarks/gpu_window.sh", "100"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=120)
    log = (tmp_path / "out" / "window.log").read_text()
    assert res.returncode == 1 and "ERROR: no CUDA GPU here" in log and "`make repro`" in log
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()
    fake = tmp_path / "python"  # a Python that cannot import torch
    fake.write_text("#!/bin/sh\nexec python3 -S -I \"$@\"\n")
    fake.chmod(0o755)
    res = subprocess.run(["bash", "benchmarks/gpu_window.sh", "100"], cwd=REPO, env={**env, "GPU_PY": str(fake)},
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "cannot import torch, transformer_lens and workbench" in res.stdout
    assert "GPU_PY=.venv/bin/python" in res.stdout


def _wheel(folder: Path, module: str) -> Path:
    """A minimal pure-Python wheel of one empty module, for pip to install offline."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{module}-1.0-py3-none-any.whl"
    info = f"{module}-1.0.dist-info"
    files = {f"{module}.py": "", f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"]))
    return path


def test_the_carried_wheels_go_in_and_failing_imports_stop_the_window_with_their_traceback(tmp_path):
    """gpu_window.sh's setup: the wheels of WHEELS go into GPU_SITE; where the window's imports then fail (the image's
    own transformers not serving transformer_lens), exit 1 at once with the error and the traceback in window.log. A
    stand-in Python fails the imports until a marker module is installed from WHEELS."""
    wheels = tmp_path / "wheels"
    site = tmp_path / "site"
    py = tmp_path / "python"
    py.write_text(f'#!/bin/bash\nif [[ "$2" == "import torch, transformer_lens, workbench.cli;"* ]] && '
                  f'[ ! -f {site}/pelab_lean_marker.py ]; then echo "ImportError: stand-in" >&2; exit 1; fi\n'
                  f'exec {sys.executable} "$@"\n')
    py.chmod(0o755)
    env = window_env(tmp_path, DEVICE="cuda", GPU_PY=str(py), GPU_SITE=str(site), WHEELS=str(wheels))
    wheels.mkdir()  # no wheels: the imports fail
    res = subprocess.run(["bash", "benchmarks/gpu_window.sh", "100"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=120)
    log = (tmp_path / "out" / "window.log").read_text()
    assert res.returncode == 1 and "cannot import torch, transformer_lens" in log and "no CUDA GPU" not in log
    assert "ImportError: stand-in" in log  # the traceback kept in the log
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()
    _wheel(wheels, "pelab_lean_marker")  # with it the imports work: set up, then stopped (this machine has no GPU)
    (tmp_path / "out" / "window.log").unlink()
    res = subprocess.run(["bash", "benchmarks/gpu_window.sh", "100"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=120)
    log = (tmp_path / "out" / "window.log").read_text()
    assert (site / "pelab_lean_marker.py").exists()
    assert res.returncode == 1 and "ERROR: no CUDA GPU here" in log and "cannot import" not in log


def test_the_draft_readme_says_what_the_triton_kernel_measured():
    """window_back.triton_line: the kernel's agreement with SDPA (the largest error of each, per shape), the
    attention alone at the training's attention dropout and without, then its eager and compiled RoPE steps against
    SDPA's of the same measurement, as ratios; a failed agreement says so and has no step; an error is quoted."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from window_back import triton_line

    agree = {"ok": True, "what": "[z, dq, dk, dv] max abs error",  # `tuned`: the autotuner's choices (op_steps)
             "rope+sinusoidal": {"triton_err": [0.01, 0.02, 0.03, 0.004], "sdpa_err": [0.01, 0.02, 0.02, 0.003],
                                 "op_ms": {"triton": 0.25, "sdpa": 0.75}, "op_dropout": 0.1,
                                 "op_ms_p0": {"triton": 0.2, "sdpa": 0.5}},
             "tuned": {"fwd": {"BLOCK_M": 64, "num_warps": 4}}}
    check = {"step": {"rope": {"eager_ms": 31.0, "compiled_ms": 12.8}}, "triton": "3.6.0",
             "sdpa": {"triton": {"agree": agree, "eager": 25.0, "compiled": 10.0}}}
    line = triton_line(check)
    assert "kernel (Triton 3.6.0): agreement with SDPA ok (rope+sinusoidal: kernel 0.03, SDPA 0.02)" in line
    assert ("forward + backward: rope+sinusoidal: 0.250 against SDPA's 0.750 ms at attention dropout 0.1 (0.200 "
            "against 0.500 without)") in line
    assert "eager RoPE step 25.00 ms against SDPA's 31.00 ms (1.24x)" in line
    assert "compiled RoPE step 10.00 ms against SDPA's 12.80 ms (1.28x)" in line
    check["sdpa"]["triton"] = {"agree": dict(agree, ok=False)}
    assert "agreement with SDPA FAILED" in triton_line(check) and "step" not in triton_line(check)
    check["sdpa"]["triton"] = {"error": "triton: no module"}
    assert triton_line(check) == "- the Triton attention kernel failed: triton: no module"


def test_the_draft_readme_times_each_analysis_of_the_window_from_its_ship_log():
    """window_back.analysis_lines: each table's median and range of seconds over the runs the ship log timed, in the
    order they first ran; a table kept or not applicable is not timed."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from window_back import analysis_lines

    log = ("t1-a ablation: ran in 2.7s\nt1-a deposit: ran in 0.0s\nt1-a qk_means: ran in 1.5s\n"
           "t1-a angles: not applicable: nope has no rotary dimensions\nfollowing: 1 run(s) to ship\n"
           "t2-b ablation: ran in 1.7s\nt2-b qk_means: ran in 2.5s\nt2-b angles: ran in 3.0s\nt2-c ablation: kept\n"
           "t2-c ablation: ran in 5.0s\n")
    assert analysis_lines(log) == ["- ablation: 2.7 s (3 runs, 1.7-5.0 s)", "- deposit: 0.0 s (1 run, 0.0-0.0 s)",
                                   "- qk_means: 2.0 s (2 runs, 1.5-2.5 s)", "- angles: 3.0 s (1 run, 3.0-3.0 s)"]
    assert analysis_lines("nothing timed\n") == []
