"""Re-creating a shipped run: shipped results hold no weights, but training is deterministic, so the run is
re-trained from its config.json into the user's store under the same run id (same seed, same data, the shipped
run's thread count), and its metrics match the shipped ones epoch by epoch.

    run = recreate(RunStore("results/repro", readonly=True), RunStore("runs"), "t1-rope-repro-s42-e451f6")

Used by `workbench recreate` / `workbench verify` and by the dashboard's "Re-create this run" job. The own
store is read first wherever both stores are, so the copy also receives the shipped analysis tables -- only when
every epoch's metrics agree with the shipped ones (within `tol`), i.e. it is the model those tables describe.
A CPU run trained at a lower SIMD level than this machine's is re-trained in a child process held to that level
(`simd_hold`, `_train_held`), its epochs reported as the child writes them.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from workbench.store import Run, RunStore, StoreError
from workbench.store.run import (now_iso, numerics_differences, numerics_identity, recorded_numerics,
                                 same_training)

from .loop import StopTraining, train
from .workers import exit_with_parent

METRIC_KEYS = ("train_loss", "train_acc", "test_loss", "test_acc")
SIMD_LEVELS = ("DEFAULT", "AVX2", "AVX512")  # ATen's x86 CPU capabilities, lowest first
# the OpenBLAS kernels (numpy's and scipy's, DYNAMIC_ARCH builds) a machine at a SIMD level runs: an AVX2 CPU's
# (Haswell, Zen 1-3) are the Haswell ones; measured where the probes' ridge fits use them
OPENBLAS_CORE = {"AVX2": "Haswell"}


def said_hold(env: dict[str, str]) -> str:
    """`simd_hold`'s environment in words: "ATen held to AVX2, OpenBLAS to its Haswell kernels
    (ATEN_CPU_CAPABILITY=avx2, OPENBLAS_CORETYPE=Haswell)"."""
    what = ([f"ATen held to {env['ATEN_CPU_CAPABILITY'].upper()}"] if "ATEN_CPU_CAPABILITY" in env else []) \
        + ([f"OpenBLAS to its {env['OPENBLAS_CORETYPE']} kernels"] if "OPENBLAS_CORETYPE" in env else [])
    return f"{', '.join(what)} ({_assignments(env)})"


def _assignments(env: dict[str, str]) -> str:
    """"ATEN_CPU_CAPABILITY=avx2, OPENBLAS_CORETYPE=Haswell": the variables as a shell would set them."""
    return ", ".join(f"{k}={v}" for k, v in env.items())


def simd_hold(info: dict) -> dict[str, str]:
    """The environment that holds the CPU kernels to the SIMD level a CPU run was trained with, where this machine's
    is higher: {"ATEN_CPU_CAPABILITY": "avx2", "OPENBLAS_CORETYPE": "Haswell"} for a run trained at AVX2 re-trained
    on an AVX-512 machine; {} where the levels agree, the recorded one is unknown or higher, or the run trained on a
    GPU. ATen and OpenBLAS read their variable once, at start, so the re-training and the re-check of its tables run
    in processes started with it (`workbench recreate` / `verify`). ATen's level is what changes the training's
    floats: one training step of a `repro-paperdata-long` model gives other gradients at AVX2 than at AVX-512, and
    the same ones with MKL and oneDNN held to AVX2 or not; two runs shipped from an AVX2 machine re-trained here held
    to AVX2 equal their shipped metrics (docs/reproduction.md). OpenBLAS's kernels change the probes' ridge fits
    (1.07e-05 in `score_lo` of t1-alibi-repro-long-s42 at SkylakeX's, equal at Haswell's and the thread count the
    table was made on: benchmarks/measured/cpu-probes-residue-2026-12-07)."""
    import torch

    if (info.get("device") or "cpu") != "cpu":
        return {}
    recorded, here = recorded_numerics(info).get("cpu_capability"), torch.backends.cpu.get_cpu_capability()
    if recorded in SIMD_LEVELS and here in SIMD_LEVELS and SIMD_LEVELS.index(recorded) < SIMD_LEVELS.index(here):
        blas = {"OPENBLAS_CORETYPE": OPENBLAS_CORE[recorded]} if recorded in OPENBLAS_CORE else {}
        return {"ATEN_CPU_CAPABILITY": recorded.lower()} | blas
    return {}


def metric_differences(shipped_rows: list[dict], rerun_rows: list[dict]) -> dict[str, float]:
    """Largest |difference| per metric over epochs (inf when the epochs do not match)."""
    if [r["epoch"] for r in shipped_rows] != [r["epoch"] for r in rerun_rows]:
        return {"epochs": math.inf}
    return {k: max(abs(float(a[k]) - float(b[k])) for a, b in zip(shipped_rows, rerun_rows)) for k in METRIC_KEYS}


def last_epoch(rows: list[dict]) -> int:
    """The last epoch of a run's metric rows (0 for none): how many epochs a shipped run trained."""
    return max((int(r["epoch"]) for r in rows), default=0)


def first_difference(shipped_rows: list[dict], rows: list[dict]) -> tuple[int, str, float] | None:
    """(epoch, metric, |difference|) of the first of `rows` whose metrics are not exactly the shipped run's at that
    epoch (an epoch the shipped run lacks: metric "epochs", inf), or None where every one is."""
    shipped = {int(r["epoch"]): r for r in shipped_rows}
    for row in rows:
        epoch = int(row["epoch"])
        diff = metric_differences([shipped[epoch]], [row]) if epoch in shipped else {"epochs": math.inf}
        worst = max(diff, key=diff.get)
        if diff[worst] > 0:
            return epoch, worst, diff[worst]
    return None


def said_difference(off: tuple[int, str, float], last: int) -> str:
    """`first_difference`'s (epoch, metric, |difference|) in words: "epoch 1 of 3 is not the shipped run's
    (|difference| 0.0206 in train_loss)"; `last`: the shipped run's epochs."""
    return f"epoch {off[0]} of {last} is not the shipped run's (|difference| {off[2]:.3g} in {off[1]})"


def stop_at_first_difference(shipped_rows: list[dict],
                             upto: int | None = None) -> Callable[[Run, dict[str, Any]], None]:
    """An `on_epoch` for a re-training that is worth only if bit-identical (`workbench verify --refresh`, `--epochs`):
    raises StopTraining at the first epoch, before the shipped run's last, whose metrics are not exactly the shipped
    ones (`first_difference`), saying where and by how much, and with `upto` after that many equal epochs (the run is
    left `interrupted`, resumable). A last epoch that differs is left to the caller: the run is then finished and
    judged as any other."""
    last = last_epoch(shipped_rows)

    def check(run: Run, row: dict[str, Any]) -> None:
        epoch = int(row["epoch"])
        if epoch >= last:
            return
        off = first_difference(shipped_rows, [row])
        if off:
            raise StopTraining(f"{said_difference(off, last)}: stopped there, its weights cannot be the shipped ones")
        if upto is not None and epoch >= upto:
            raise StopTraining(f"stopped after epoch {epoch} of {last}: the first {epoch} equal the shipped run's")
    return check


def gpu_needed(info: dict, run_id: str) -> str | None:
    """Why a shipped run cannot be re-trained on this machine, and where it can: run.json says it trained on a GPU
    (`device`, `gpu`) and torch sees none here (a re-training runs where the run was trained, and a paper-scale run
    would take days on a CPU); None where it can. The one phrase `recreate`, the pages' hints and their jobs say."""
    import torch

    device = info.get("device") or "cpu"
    if device == "cpu" or torch.cuda.is_available():
        return None
    return (f"it was trained on a GPU ({info.get('gpu') or device}) and is re-trained only on one, which this machine "
            f"lacks (`workbench recreate {run_id}` on a machine with a CUDA GPU)")


def analyze_command(run_id: str, what: str) -> str:
    """The `workbench analyze` command that stores table `what` for the run (`ablation_<mode>`: `--mode`; `all`:
    every analysis)."""
    if what == "all":
        return f"workbench analyze {run_id} --all"
    if what.startswith("ablation_"):
        return f"workbench analyze {run_id} --what ablation --mode {what.split('_', 1)[1]}"
    return f"workbench analyze {run_id} --what {what.replace('_', '-')}"


def analyze_hint(run, what: str) -> str:
    """How to get table `what` of `run`, in words for a hint: the `analyze` command, after `workbench recreate` for a
    shipped run (no weights are shipped, and `analyze` reads your store), or the GPU it needs (`gpu_needed`)."""
    cmd = f"`{analyze_command(run.id, what)}`"
    if not getattr(getattr(run, "store", None), "readonly", False):
        return f"run {cmd}"
    why = gpu_needed(run.info, run.id)
    if why:
        return f"no weights to compute it here: {why}, then {cmd}"
    return (f"re-create the shipped run in your store first (`workbench recreate {run.id}`: no weights are shipped), "
            f"then {cmd}")


def vendor_differs(info: dict) -> str | None:
    """Why this machine's CPU vendor rules out re-training a shipped CPU run bit for bit (MKL takes other code paths
    on AMD than on Intel: a run re-trained across vendors differs from its first epoch), or None: the vendor
    run.json records (`numerics`, `machine.cpu_vendor`), else the one its CPU model names, is this machine's, or
    neither is known."""
    from workbench.store.run import machine_identity

    machine = info.get("machine") if isinstance(info.get("machine"), dict) else {}
    model = str(machine.get("cpu") or "")
    there = recorded_numerics(info).get("cpu_vendor") or machine.get("cpu_vendor") or (
        "GenuineIntel" if "Intel" in model else "AuthenticAMD" if "AMD" in model else None)
    here = machine_identity().get("cpu_vendor")
    if there and here and there != here:
        return f"trained on {model or there} ({there}), this machine is {here}"
    return None


def simd_beyond(info: dict) -> str | None:
    """Why this machine cannot re-train a shipped CPU run bit for bit though its vendor matches: the run recorded a
    SIMD level above this machine's (`simd_hold` holds ATen down to a lower level, never up: an AVX-512 run re-trained
    on an AVX2 machine follows another trajectory); None where the level is not above or not recorded."""
    import torch

    level, top = recorded_numerics(info).get("cpu_capability"), torch.backends.cpu.get_cpu_capability()
    if (info.get("device") or "cpu") == "cpu" and level in SIMD_LEVELS and top in SIMD_LEVELS \
            and SIMD_LEVELS.index(level) > SIMD_LEVELS.index(top):
        return f"trained at {level}, this machine's kernels reach {top}"
    return None


def numerics_here(info: dict, threads: int | None = None) -> dict:
    """This machine's numerics (`numerics_identity`) as a re-training of the shipped run `info` runs at: its thread
    count (`threads`, else the shipped run's) and the SIMD level `recreate` holds it to (`simd_hold`)."""
    level = simd_hold(info).get("ATEN_CPU_CAPABILITY")
    held = {"cpu_capability": level.upper()} if level else {}
    return numerics_identity() | {"threads": threads or info.get("threads")} | held


def numerics_note(info: dict, threads: int | None = None) -> str | None:
    """Before a re-training: a note naming what of the shipped run's recorded numerics differs here (torch, SIMD
    level, CPU vendor, BLAS / MKL / oneDNN, threads), since then the floats differ from the first step and training
    follows another trajectory; None when nothing recorded differs. A SIMD level `recreate` holds (`simd_hold`) is
    the one the re-training runs at, so it is not named. A CPU run that recorded no SIMD level (trained before
    run.json recorded it) cannot be held to it: the note says so."""
    here = numerics_here(info, threads)
    recorded = recorded_numerics(info)
    diff = {k: v for k, v in numerics_differences(recorded, here).items() if v[0] is not None}
    if not diff:
        if (info.get("device") or "cpu") == "cpu" and recorded.get("cpu_capability") is None:
            cpu = (info.get("machine") or {}).get("cpu") or "a CPU it did not name"
            return (f"note: the shipped run did not record its SIMD level or BLAS (trained on {cpu} before run.json "
                    f"recorded them), so it cannot be held to them: if they differ from this machine's "
                    f"({here.get('cpu_capability')}), the re-training follows another trajectory; its metrics are "
                    "compared with the shipped ones when it ends")
        return None
    return ("note: this machine's numerics differ from the shipped run's (" +
            ", ".join(f"{k} {a} there, {b} here" for k, (a, b) in diff.items()) + "): the re-training follows "
            "another trajectory from the first step, so its metrics will not equal the shipped ones and no shipped "
            "table is copied to it; `workbench verify` judges it by one rule, and `workbench ship` will not "
            "replace the shipped run with it unless --replace")


def recreate(shipped: RunStore, own: RunStore, run_id: str, *, threads: int | None = None, progress: bool = False,
             on_epoch: Callable[[Run, dict[str, Any]], None] | None = None, tables: bool = True,
             tol: float = 1e-4, retrain: bool = False, hold: bool = True,
             say: Callable[[str], None] | None = None) -> Run:
    """Train `run_id` of the `shipped` store from its config into `own` (resuming an interrupted re-creation;
    a finished copy is returned as is). threads: default the shipped run's recorded count (bit-identical metrics
    need the same one). tables: then copy the shipped analysis tables the copy lacks, if every metric of every
    epoch agrees within `tol`. StoreError for an id that is not a shipped run or whose config hashes to another
    id, when `own` is the shipped store, or when `own` holds a copy of the shipped folder instead of a re-training
    (nothing would be re-trained: its metrics are the shipped ones). retrain: delete the own copy and train it
    again (`workbench verify`, when the copy's files do not check out: `Run.trust_problems`). hold: where the
    shipped CPU run was trained at a lower SIMD level than this machine's, train in a child process held to it
    (`simd_hold`), as the run was trained; `say` receives a line saying so."""
    src = shipped.get(run_id)  # StoreError for a malformed id or one that is not a run folder of `shipped`
    if own.root.resolve() == shipped.root.resolve():
        raise StoreError(f"your store is the shipped store {shipped.root}: re-create into another one (--root)",
                         run_id)
    mine = own.get(run_id) if own.exists(run_id) else None
    if mine is not None and mine.status == "finished" and (not mine.has_weights or "shipped" in mine.info):
        raise StoreError(f"{own.root} holds a copy of the shipped run (no weights, or run.json says 'shipped'), "
                         "not a re-training of it; delete that folder or pass another --root", run_id)
    if own.run_id(src.config) != run_id:
        raise StoreError(f"its config hashes to {own.run_id(src.config)} with this code version; the config format "
                         "changed since it was shipped", run_id)
    why = gpu_needed(src.info, run_id)
    if why:  # before anything is written to `own`
        raise StoreError(f"cannot re-create it here: {why}", run_id)
    device = src.info.get("device") or "cpu"  # re-train where it was trained: a CPU run re-run on CUDA cannot match
    threads = threads or src.info.get("threads")
    env = simd_hold(src.info) if hold and not (mine and mine.status == "finished" and not retrain) else {}
    if env:
        run = _train_held(shipped, own, run_id, env, mine, threads=threads, progress=progress, on_epoch=on_epoch,
                          retrain=retrain, say=say or (lambda line: None))
    else:
        run = train(src.config, own, resume=not retrain, force=retrain, threads=threads, progress=progress,
                    on_epoch=on_epoch, device=device)
    if tables and run.status == "finished":
        diff = metric_differences(src.metric_rows(), run.metric_rows())
        identical = same_training(src.metric_rows(), run.metric_rows())  # every shipped field but the timings
        # the shipped tables are the copy's only where its weights are the shipped run's: its metrics equal
        copied = [name for name in src.tables() if not run.has_table(name)] if identical else []
        for name in copied:
            run.save_table(name, src.load_table(name), provenance=src.provenance_of(name))  # what made the copy
        if say:
            say(agreement_line(run_id, diff, tol, copied, identical))
    return run


def agreement_line(run_id: str, diff: dict[str, float], tol: float, copied: list[str], identical: bool) -> str:
    """What a finished re-training is against the shipped run: equal bit for bit (`identical`: every field of every
    epoch but the timings), within `tol` (no shipped table copied: its weights are not the shipped run's), or other
    (the largest |difference| and its metric; `workbench verify` judges it)."""
    worst = max(diff, key=diff.get)
    tables = f"; {len(copied)} shipped analysis tables copied to it" if copied else ""
    if identical:
        return f"{run_id}: every metric of every epoch equals the shipped run's (bit-identical){tables}"
    if diff[worst] <= tol:
        return (f"{run_id}: every metric of every epoch is within {diff[worst]:.2g} of the shipped run's, not equal "
                "bit for bit, so no shipped table is copied to it (its weights are not the shipped run's)")
    what = "its epochs differ" if worst == "epochs" else f"largest |difference| {diff[worst]:.3g} in {worst}"
    return (f"{run_id}: the re-training's metrics differ from the shipped run's ({what}; tolerance {tol:g}): it "
            f"followed another trajectory, so no shipped table is copied to it; `workbench verify {run_id}` judges "
            "it by one rule")


def _train_held(shipped: RunStore, own: RunStore, run_id: str, env: dict[str, str], mine: Run | None, *,
                threads: int | None, progress: bool, on_epoch: Callable[[Run, dict[str, Any]], None] | None,
                retrain: bool, say: Callable[[str], None]) -> Run:
    """`recreate`'s training in a child process started with `env` (ATen reads its level once, at its first kernel,
    so this process cannot change its own). The child exits when this process is gone (`workers.exit_with_parent`);
    `on_epoch` is called for each epoch the child writes. `mine`: the own copy, if any. An unfinished copy started at
    another level is trained again from the start: resumed held, its epochs would mix two trajectories."""
    level = env["ATEN_CPU_CAPABILITY"]
    say(f"the shipped run was trained at {level.upper()}: re-training it with ATen's CPU kernels held to it "
        f"({_assignments(env)}), as it was trained")
    started = recorded_numerics(mine.info).get("cpu_capability") if mine and not retrain else None
    if started not in (None, level.upper()):
        say(f"your unfinished copy was started at {started}: training it again from the start")
        retrain = True
    cmd = [sys.executable, "-c", "from workbench.train.recreate import _held_child; _held_child()", str(os.getpid()),
           run_id, str(shipped.root), str(own.root), str(own.data_dir), str(threads or 0),
           "retrain" if retrain else "resume", "progress" if progress else "quiet"]
    errors = tempfile.TemporaryFile("w+")  # not a pipe: nothing reads it while the child runs
    child = subprocess.Popen(cmd, env=os.environ | env, stderr=None if progress else errors, text=True)
    reported, stopped = 0, ""
    try:
        while True:
            done = child.poll() is not None
            if on_epoch is not None and own.exists(run_id):
                run = own.get(run_id)
                if run.info.get("pid") == child.pid:  # the child's training, not a copy it is about to replace
                    for row in run.metric_rows()[reported:]:
                        on_epoch(run, row)
                        reported += 1
            if done:
                break
            time.sleep(0.5)
    except StopTraining as e:  # `on_epoch` stopped it: the child is ended below, its copy left interrupted
        stopped = str(e) if child.poll() is None else ""  # (unless it has finished meanwhile: then it stays so)
    finally:
        if child.poll() is None:
            child.terminate()
            child.wait()
    if stopped:  # as the loop records a StopTraining of its own
        own.get(run_id).update_info(status="interrupted", interrupted=now_iso(), error=stopped)
    errors.seek(0)
    tail = " ".join(errors.read().strip().splitlines()[-3:])
    errors.close()
    if child.returncode and not stopped:
        tail = f"; {tail}" if tail else ""
        raise StoreError(f"the re-training held to {level.upper()} failed (exit status {child.returncode}{tail})",
                         run_id)
    return own.get(run_id)


def _held_child() -> None:
    """The held child of `_train_held` (`python -c ... PARENT_PID RUN_ID SHIPPED OWN DATA THREADS retrain|resume
    progress|quiet`): the training alone, unheld (its process is), without tables (the parent copies them)."""
    parent, run_id, shipped, own, data, threads, how, shown = sys.argv[1:9]
    exit_with_parent(int(parent))  # a cancelled dashboard job or a killed command leaves no training behind
    try:
        recreate(RunStore(shipped, readonly=True), RunStore(own, data_dir=data), run_id, threads=int(threads) or None,
                 progress=shown == "progress", tables=False, retrain=how == "retrain", hold=False)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
