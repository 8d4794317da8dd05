"""Parallel sweep workers: `sweep(grid, store, workers=N)` / `workbench sweep GRID --workers N`.

N worker processes (multiprocessing "spawn": a fresh interpreter each, so OMP_WAIT_POLICY=PASSIVE and the
thread count are in place before torch is imported) each train one run at a time with `threads` torch threads
(default 1). The parent hands the next grid point to whichever worker is idle and shows one progress line per
worker; the skip / resume / busy / fail decisions are `sweep.attempt`'s, taken by the worker when it starts the
run, so two sweeps sharing a store never train one run twice. A worker that dies (killed, out of memory) leaves
its run `running` with a dead pid: the run is reported failed and the next sweep resumes it from its last
checkpoint; a fresh worker takes its place. A worker exits when the sweep process dies (SIGKILL, SIGTERM), so
none is left blocked on its queue.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import sys
from typing import Any

from workbench.store import RunStore, code_version
from workbench.store.runstore import code_diff

from .sweep import attempt

PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}  # idle OpenMP threads sleep instead of spinning (docs/training.md)


def warn_oversubscribed(workers: int, log) -> None:
    """More workers than CPU cores is allowed, with a warning (they only time-share the cores)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if workers > cores:
        log(f"warning: --workers {workers} is more than the {cores} CPU cores available; runs will time-share "
            "cores and each will be slower (total throughput does not grow)")


def exit_with_parent(parent: int, period_s: float = 0.2) -> None:
    """Exit this process as soon as `parent` is gone (killed with SIGKILL or SIGTERM, it cannot tell its workers):
    a daemon thread polls the parent pid every `period_s` (an orphan is re-parented), so a run does not go on
    training for long behind a dead parent (a smoke run's epoch is under a second). A run being trained is left
    `running` with a dead pid, i.e. interrupted, and the next sweep resumes it from its last checkpoint. Used by the
    sweep's workers and by `recreate`'s held child."""
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period_s)
        os._exit(3)

    threading.Thread(target=watch, name="pe-lab-parent-watch", daemon=True).start()


def _worker(wid: int, root: str, data_dir: str, inbox, events, opts: dict[str, Any], parent: int) -> None:
    """Worker process: train the jobs from `inbox` until None; report every step to `events`; exit when the
    sweep process `parent` dies."""
    exit_with_parent(parent)
    code_version(), code_diff()  # cached for the process: its runs record the code it imported now, not a later edit
    store = RunStore(root, data_dir=data_dir)
    events.put(("ready", wid))
    while True:
        job = inbox.get()
        if job is None:
            return
        k, head, cfg = job
        events.put(("start", wid, k, head, cfg["train"]["epochs"]))

        def on_epoch(run, row, k=k):
            events.put(("epoch", wid, k, row["epoch"], row["test_acc"]))

        try:
            rec = attempt(cfg, store, head=head, log=lambda msg: events.put(("log", wid, msg)), on_epoch=on_epoch,
                          progress=False, **opts)
        except KeyboardInterrupt:
            events.put(("interrupted", wid, k))
            return
        events.put(("done", wid, k, rec))


class _Lines:
    """One progress line per worker (tqdm bars when stderr is a terminal, else plain log lines)."""

    def __init__(self, n: int, enabled: bool, log):
        self.log, self.bars = log, None
        if enabled and sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bars = [tqdm(total=1, position=i, desc=f"w{i} idle", file=sys.stderr, dynamic_ncols=True,
                              bar_format="{desc} |{bar:20}| {n}/{total} epochs {postfix}") for i in range(n)]
            self.log = lambda msg: self.bars[0].write(msg, file=sys.stderr)

    def start(self, wid: int, head: str, epochs: int) -> None:
        if self.bars:
            bar = self.bars[wid]
            bar.reset(total=epochs)
            bar.set_description_str(f"w{wid} {head.split()[-1]}")
            bar.set_postfix_str("")

    def epoch(self, wid: int, head: str, epoch: int, epochs: int, acc: float) -> None:
        if self.bars:
            self.bars[wid].update(epoch - self.bars[wid].n)
            self.bars[wid].set_postfix_str(f"test acc {acc:.4f}")
        else:
            self.log(f"w{wid} {head.split()[-1]}  epoch {epoch}/{epochs}: test acc {acc:.4f}")

    def close(self) -> None:
        for bar in self.bars or []:
            bar.close()


def sweep_workers(jobs: list[tuple[str, dict]], store: RunStore, workers: int, *, progress: bool, fail_fast: bool,
                  log, **opts) -> list[dict[str, Any]]:
    """Train `jobs` [(head, config)] on `workers` processes; the records in job order (see sweep.sweep)."""
    warn_oversubscribed(workers, log)
    opts["threads"] = opts.get("threads") or 1
    for key, value in PASSIVE.items():
        os.environ.setdefault(key, value)  # inherited by the spawned workers before they import torch
    ctx = mp.get_context("spawn")
    events = ctx.Queue()
    procs: dict[int, tuple[Any, Any]] = {}

    def spawn(wid: int) -> None:
        inbox = ctx.Queue()
        p = ctx.Process(target=_worker, args=(wid, str(store.root), str(store.data_dir), inbox, events, opts,
                                              os.getpid()),
                        daemon=True, name=f"pe-lab-sweep-w{wid}")
        p.start()
        procs[wid] = (p, inbox)

    n = min(workers, len(jobs))
    lines = _Lines(n, progress, log)
    todo = list(enumerate(jobs))
    running: dict[int, tuple[int, str, int]] = {}  # worker -> (job index, head, epochs)
    idle, results, failure = list(range(n)), {}, None

    def dispatch() -> None:
        while idle and todo and failure is None:
            wid = idle.pop(0)
            k, (head, cfg) = todo.pop(0)
            running[wid] = (k, head, cfg["train"]["epochs"])
            procs[wid][1].put((k, head, cfg))

    def reap() -> None:
        """Report the run of a worker that died (killed, out of memory; the run stays resumable), replace it."""
        nonlocal failure
        for wid, (p, _) in list(procs.items()):
            if wid in running and not p.is_alive():
                k, head, _ = running.pop(wid)
                err = f"worker process died (exit code {p.exitcode}); the next sweep resumes the run"
                results[k] = {"id": head.split()[-1], "outcome": "failed", "test_acc": None, "error": err}
                lines.log(f"{head}  FAILED: {err}")
                failure = failure or (err if fail_fast else None)
                spawn(wid)
                idle.append(wid)
        dispatch()

    try:
        for wid in range(n):
            spawn(wid)
        dispatch()
        while running:
            reap()
            try:
                ev = events.get(timeout=1.0)
            except queue.Empty:
                continue
            kind, wid = ev[0], ev[1]
            if kind == "log":
                lines.log(ev[2])
            elif kind == "start":
                lines.start(wid, ev[3], ev[4])
            elif kind == "epoch" and wid in running:
                lines.epoch(wid, running[wid][1], ev[3], running[wid][2], ev[4])
            elif kind == "interrupted":
                raise KeyboardInterrupt
            elif kind == "done":
                rec = ev[3]
                results[ev[2]] = rec
                running.pop(wid, None)
                idle.append(wid)
                if rec["outcome"] == "failed" and fail_fast:
                    failure = failure or rec["error"]
                dispatch()
    except KeyboardInterrupt:  # let the workers mark their runs interrupted (resumable) before they exit
        for p, _ in procs.values():
            p.join(timeout=2)
            if p.is_alive():
                os.kill(p.pid, signal.SIGINT)
        raise
    finally:
        lines.close()
        for p, inbox in procs.values():
            if p.is_alive():
                inbox.put(None)
        for p, _ in procs.values():
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    if failure is not None:
        raise RuntimeError(f"sweep stopped at the first failing run (--fail-fast): {failure}")
    return [results[k] for k in sorted(results)]
