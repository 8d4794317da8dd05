"""Resumable sweeps over a TOML grid: schemes x tasks x seeds (x archs), plus named override sets.

    preset  = "cpu"
    tasks   = ["trigger-distance", "trigger-count"]
    seeds   = [42, 43]
    archs   = ["paper"]                     # optional (or arch = "paper")
    schemes = ["nope", "rope", "alibi"]

    [set]                                   # overrides for every run (dotted keys or nested tables)
    "train.epochs" = 3

    [[variants]]                            # a named override set: its name becomes the run tag
    name = "rope-h1-l0"
    scheme = "rope"
    set = { "model.scheme_kwargs" = { rope_heads = 1, rope_layers = [0] } }
    # tasks / seeds / archs / preset / presets / fidelity here replace the grid's for this variant
    tier = 2                                # optional (default: the grid's `tier`, else 1); select with tiers=[1]

`presets = ["repro-long", "repro-wide"]` (top level or in a variant) runs every point at each of these presets, one
preset after another (the scale ladder, grids/ladder.toml); `preset = "x"` is `presets = ["x"]`.

`fidelity = "authors"` (top level or in a variant) applies a named setting of docs/fidelity.md to its runs; an entry
with a named setting and no `archs` of its own runs in that setting's arch (authors: paper, authors-mla: encoder).

Every grid point is a run config, hence a run id: finished runs are skipped, unfinished ones resumed, so a
sweep can be stopped (Ctrl-C, kill) and restarted at any time without losing finished work.

`deadline=SECONDS` (`workbench sweep --deadline`, for a GPU lent for a short window): a `Window` plans from each
run's seconds per epoch (measured on a run of the same config but its seeds, else from a benchmark's ms per step,
`step_ms`), trains the runs that fit in grid order, then starts the first that did not (it checkpoints at the
deadline; not with partial=False); every run stops at the deadline with a checkpoint, and the same sweep resumes the
rest next window. With partial=False a run stops as soon as it cannot finish (`train(must_finish=True)`): an
estimate that was short wastes only the epochs it took to show it, and the time left goes to runs that fit.
"""
from __future__ import annotations

import collections
import copy
import itertools
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from workbench.store import RunLocked, RunStore, StoreError, finished_runs
from workbench.store.run import process_alive

from .presets import FIDELITIES, flatten_sets, resolve_config

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

GRID_KEYS = {"preset", "presets", "tasks", "seeds", "data_seeds", "schemes", "archs", "arch", "set", "variants", "name",
             "description", "tier", "fidelity"}
VARIANT_KEYS = {"name", "scheme", "set", "tasks", "seeds", "data_seeds", "archs", "arch", "preset", "presets", "tier",
                "fidelity"}


def load_grid(path: str | Path) -> dict[str, Any]:
    with open(path, "rb") as f:
        try:
            grid = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"grid {path}: not valid TOML: {e}") from None
        except UnicodeDecodeError as e:
            raise ValueError(f"grid {path}: not a UTF-8 text file ({e.reason} at byte {e.start}): pass a TOML grid "
                             "such as grids/demo.toml") from None
    grid.setdefault("name", Path(path).stem)
    return grid


def _listify(v: Any, key: str = "") -> list:
    """A grid axis (`key`) as a list: one value or a list of values, each a single value (a nested list or table is
    an error naming the key)."""
    out = list(v) if isinstance(v, (list, tuple)) else [v]
    nested = [x for x in out if isinstance(x, (list, tuple, dict))]
    if nested:
        raise ValueError(f"grid: {key or 'an axis'} = {v!r:.80}: each entry must be one value (a name or a number), "
                         f"not {nested[0]!r:.40}; e.g. seeds = [42, 43]")
    return out


def grid_points(grid: dict[str, Any], tiers: list[int] | None = None) -> list[dict[str, Any]]:
    """The grid's points as keyword dicts for `resolve_config` (no I/O), in run order: tier, data seed, seed, task,
    arch, scheme. tiers: keep only the points of these tiers (None: all). `seeds` are training seeds (parameter
    init and batch order); `data_seeds` (default: the preset's, no `task.seed` set) each generate a dataset of
    their own (`task.seed`), so a claim can rest on more than one draw of the data."""
    unknown = set(grid) - GRID_KEYS
    if unknown:
        raise ValueError(f"grid: unknown keys {sorted(unknown)}; known: {sorted(GRID_KEYS)}")
    presets = _listify(grid.get("presets", grid.get("preset", "cpu")), "presets")
    tasks = _listify(grid.get("tasks", ["trigger-distance"]), "tasks")
    seeds = _listify(grid.get("seeds", [42]), "seeds")
    data_seeds = _listify(grid.get("data_seeds", None), "data_seeds")  # None: the preset's data seed
    archs = _listify(grid.get("archs", grid.get("arch", None)), "archs")  # None: the preset's (or the fidelity's) arch
    fidelity = grid.get("fidelity", "pelab")
    common = flatten_sets(grid.get("set", {}), where="grid: set")
    base_tier = grid.get("tier", 1)
    entries = [{"scheme": s, "tag": None, "sets": [], "tier": base_tier}
               for s in _listify(grid.get("schemes", []), "schemes")]
    variants = grid.get("variants", [])
    if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants):
        raise ValueError(f"grid: variants={variants!r:.80} must be a list of tables ([[variants]] with name and "
                         "scheme)")
    for v in variants:
        bad = set(v) - VARIANT_KEYS
        if bad or "name" not in v or "scheme" not in v:
            raise ValueError(f"grid variant {v}: needs name and scheme; allowed keys {sorted(VARIANT_KEYS)}")
        sets = flatten_sets(v.get("set", {}), where=f"grid variant {v['name']!r}: set")
        entries.append({"scheme": v["scheme"], "tag": v["name"], "sets": sets,
                        "tasks": v.get("tasks"), "seeds": v.get("seeds"), "data_seeds": v.get("data_seeds"),
                        "archs": v.get("archs", v.get("arch")),
                        "presets": v.get("presets", v.get("preset")), "tier": v.get("tier", base_tier),
                        "fidelity": v.get("fidelity")})
    for e in entries:
        e["fidelity"] = e.get("fidelity") or fidelity
        fixed = FIDELITIES.get(e["fidelity"], {}).get("arch")
        if fixed is not None and e.get("archs") is None:  # a named setting brings its own architecture
            e["archs"] = [fixed]
        if not isinstance(e["tier"], int) or isinstance(e["tier"], bool) or e["tier"] < 1:
            raise ValueError(f"grid: tier={e['tier']!r} (scheme {e['scheme']}) must be an integer >= 1")
    if tiers is not None:
        entries = [e for e in entries if e["tier"] in tiers]
    def own(e: dict[str, Any], key: str, default: list) -> list:
        return _listify(e[key], f"{key} of {e['tag'] or e['scheme']}") if e.get(key) is not None else default

    def union(key: str, default: list) -> list:  # first-seen order
        return list(dict.fromkeys(default + [x for e in entries for x in own(e, key, default)]))

    points = []
    axes = [("presets", presets), ("data_seeds", data_seeds), ("seeds", seeds), ("tasks", tasks), ("archs", archs)]
    for key, default in axes:  # an empty axis leaves no point: say which, not "no schemes"
        if not default:
            raise ValueError(f"grid: {key} = [] leaves no grid point: give at least one value (or leave it out)")
    for tier in sorted({e["tier"] for e in entries}):
        for point in itertools.product(*(union(key, default) for key, default in axes)):
            preset, data_seed, seed, task, arch = point
            for e in entries:
                if e["tier"] != tier or any(v not in own(e, key, default) for v, (key, default) in zip(point, axes)):
                    continue
                data = [] if data_seed is None else [("task.seed", data_seed)]
                points.append({"preset": preset, "scheme": e["scheme"], "task": task, "arch": arch, "seed": seed,
                               "tag": e["tag"], "sets": common + e["sets"] + data, "fidelity": e["fidelity"]})
    return points


def expand_grid(grid: dict[str, Any], store: RunStore, tiers: list[int] | None = None) -> list[dict[str, Any]]:
    """Resolved run configs of every grid point (datasets are generated or loaded once per task)."""
    return [resolve_config(store=store, **p) for p in grid_points(grid, tiers)]


def fmt_time(s: float) -> str:
    """Seconds as the sweep's logs say them: 3m05s, or 1h02m from an hour on."""
    s = int(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _finished(store, run_id: str) -> bool:
    """Whether the store holds `run_id` finished (an unreadable run is not: `attempt` says why)."""
    run = _readable(store, run_id)
    return run is not None and run.status == "finished"


def _readable(store, run_id: str):
    """The store's run `run_id`, or None where it holds none or one that does not read (one broken run never
    stops a sweep: `attempt` reports it failed, with why)."""
    try:
        return store.get(run_id) if store.exists(run_id) else None
    except StoreError:
        return None


def attempt(cfg: dict[str, Any], store: RunStore, *, head: str, device: str | None = None,
            threads: int | None = None, compile: bool | str = False, progress: bool = False,
            dry_run: bool = False, fail_fast: bool = False, retry_failed: bool = True, log=None,
            on_epoch: Callable | None = None, checkpoint_every: int = 1, deadline: float | None = None,
            clock: Callable[[], float] = time.monotonic, sdpa_backend: str | None = None,
            must_finish: bool = False) -> dict[str, Any]:
    """Train one grid point unless it is finished, busy (a live process trains it) or failed with
    retry_failed=False; the one-run step of every sweep engine (sequential, --workers, --ray).
    deadline: a time of `clock()` by which the run checkpoints and stops (outcome `interrupted`); must_finish:
    `train`'s, it stops as soon as it cannot finish by then.
    sdpa_backend: `train`'s (the SDPA backend tried first).
    Returns {"id", "outcome": finished | trained | resumed | failed | busy | planned | interrupted, "test_acc",
    "error"}."""
    from .loop import train

    log = log or _stderr
    run_id = store.run_id(cfg)
    rec: dict[str, Any] = {"id": run_id, "outcome": None, "test_acc": None, "error": None}
    try:
        existing = store.get(run_id) if store.exists(run_id) else None
        status = existing.status if existing else "new"
    except StoreError as e:  # one unreadable run never stops the sweep: failed, with what to do
        rec.update(outcome="failed", error=f"{e}; delete its folder (or `workbench train ... --force`) to train it "
                                           "again")
        log(f"{head}  cannot be read: {rec['error']}")
        return rec
    if status == "finished":
        rec.update(outcome="finished", test_acc=existing.final.get("test_acc"))
        log(f"{head}  finished already (test acc {rec['test_acc']:.4f})" if rec["test_acc"] is not None
            else f"{head}  finished already")
        return rec
    if status == "running" and process_alive(existing.info):
        rec["outcome"] = "busy"
        log(f"{head}  being trained by another process (pid {existing.info.get('pid')} on "
            f"{existing.info.get('host') or 'an unrecorded host'}); skipped (if that process is gone, e.g. a machine "
            f"or container since replaced: `workbench train --resume {run_id}` takes it over)")
        return rec
    if status == "failed" and not retry_failed:
        rec.update(outcome="failed", error=existing.info.get("error"))
        log(f"{head}  failed before ({rec['error']}); skipped (retry_failed=False)")
        return rec
    if dry_run:
        rec["outcome"] = "planned"
        log(f"{head}  would {'resume' if existing and existing.has_checkpoint() else 'train'} ({status})")
        return rec
    resumed = bool(existing and existing.has_checkpoint())
    log(f"{head}  {'resuming from epoch ' + str(existing.info.get('epoch', 0)) if resumed else 'training'}")
    t0 = time.perf_counter()
    try:
        run = train(cfg, store, resume=True, device=device, compile=compile, threads=threads, progress=progress,
                    on_epoch=on_epoch, checkpoint_every=checkpoint_every, deadline=deadline, clock=clock,
                    sdpa_backend=sdpa_backend, must_finish=must_finish)
    except KeyboardInterrupt:
        log(f"{head}  interrupted; run the sweep again to resume")
        raise
    except RunLocked as e:  # another process (sweep worker, dashboard job, `workbench train`) has it
        rec.update(outcome="busy", error=str(e))
        log(f"{head}  {e}; skipped")
        return rec
    except Exception as e:  # one broken run must not stop the sweep
        rec.update(outcome="failed", error=f"{type(e).__name__}: {e}")
        log(f"{head}  FAILED: {rec['error']}")
        if fail_fast:
            raise
        return rec
    rec.update(outcome="resumed" if resumed else "trained", test_acc=run.final.get("test_acc"))
    if run.status != "finished":  # stopped at the deadline (or by a stop hook)
        rec.update(outcome=run.status, error=run.info.get("error"))
    log(f"{head}  {rec['outcome']}: test acc {rec['test_acc']:.4f} in {fmt_time(time.perf_counter() - t0)}"
        + (f" ({rec['error']})" if rec["error"] else ""))
    return rec


EVAL_SHARE = 0.2  # an epoch's evaluation and checkpoint per second of its training, with a margin: measured 0.12
# on an H100 (compiled, NoPE Task 1, checkpoint every 10: 0.24 / 1.97 s), 0.29 on an H200 before (eager, every epoch)
STARTUP_S = {True: 120.0, False: 30.0}  # a run's start-up (data, first epoch's compilation) not yet timed, by
# `compile`; H100 2026-11-27: RoPE's step compiled cold in 109 s, a NoPE run's first epoch 26 s over the others


def cost_key(cfg: dict[str, Any]) -> str:
    """What a run's time per epoch depends on: its config without seeds, labels and epoch count."""
    c = {k: copy.deepcopy(cfg[k]) for k in ("model", "task", "train")}
    c["model"].pop("seed", None)
    for key in ("seed", "epochs"):
        c["train"].pop(key, None)
    return json.dumps(c, sort_keys=True)


def epoch_seconds(rows: list[dict[str, Any]]) -> float | None:
    """Measured wall seconds per epoch (evaluation and checkpoint included): the median difference of
    consecutive epochs' `wall_s` (start-up and compilation left out), else the first epoch's; None without rows."""
    walls = [r["wall_s"] for r in rows if "wall_s" in r]
    steps = [b - a for a, b in zip(walls, walls[1:]) if b > a]
    return statistics.median(steps) if steps else (walls[0] if walls else None)


def hardware(info: dict[str, Any]) -> str | None:
    """What a run's speed was measured on, from its run.json: the GPU's name for a CUDA run (None for runs from
    before run.json recorded it), else the CPU model."""
    if str(info.get("device", "")).startswith("cuda"):
        return info.get("gpu")
    return (info.get("machine") or {}).get("cpu")


def _packed(info: dict[str, Any]) -> bool:
    """Whether run.json `info` says the run was trained in a pack of more than one run."""
    return (info.get("packed") or 1) > 1


def this_hardware(device: str | None) -> str | None:
    """`hardware` of a run this process would train on `device`."""
    import torch

    from .loop import pick_device

    dev = pick_device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    from workbench.store.run import machine_identity

    return machine_identity()["cpu"]


class PreviewClock:
    """The clock of a window's preview (`sweep --dry-run --deadline`): time passes only as planned runs take it."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


class Window:
    """A training window of `seconds` from now (`clock()`): the time left, and each run's estimated seconds to
    finish = start-up + epochs left x seconds per epoch. Both are those of a run of the same `cost_key`: as timed in
    this window (`timed`), else as its metrics say (`learn`: the run itself from an earlier window, else a run of
    another seed shipped to `shipped` from the same `hardware`); else the epoch from `step_ms` (a benchmark's
    {scheme: ms per training step}) x steps per epoch x (1 + EVAL_SHARE) and the start-up of `startup`; None when
    the epoch is unknown."""

    def __init__(self, seconds: float, store: RunStore, *, clock: Callable[[], float] = time.monotonic,
                 step_ms: dict[str, float] | None = None, startup_s: float = 0.0, shipped: RunStore | None = None,
                 hardware: str | None = None):  # `seconds` > 0: `check_options`, before any Window is made
        self.store, self.clock, self.step_ms, self.startup_s = store, clock, step_ms or {}, startup_s
        self.end = clock() + seconds
        self.measured: dict[str, float] = {}  # cost_key -> seconds per epoch
        self.start: dict[str, float] = {}  # cost_key -> seconds of start-up (the first epoch's wall over the rest)
        self.shipped, self.hardware = shipped, hardware
        self._shipped_rows: dict[str, list[dict[str, Any]]] | None = None

    def left(self) -> float:
        return self.end - self.clock()

    def learn(self, cfg: dict[str, Any]) -> None:
        """The seconds per epoch and start-up of `cfg`'s run as its metrics record them, else those of a shipped
        run of its kind from this hardware (`shipped_rows`), unless this window timed its kind. A run trained in a
        pack (`packed`) is not read: its `wall_s` is the pack's, and a window trains one run at a time."""
        rid, key = self.store.run_id(cfg), cost_key(cfg)
        if key in self.measured:
            return
        run = _readable(self.store, rid)
        rows = run.metric_rows() if run is not None and not _packed(run.info) else \
            self.shipped_rows().get(key, [])
        sec = epoch_seconds(rows)
        if sec is not None and len(rows) > 1:
            self.measured[key], self.start[key] = sec, max(0.0, rows[0]["wall_s"] - sec)

    def shipped_rows(self) -> dict[str, list[dict[str, Any]]]:
        """{cost_key: metrics rows} of the finished runs in `shipped` trained on `hardware` alone, not in a pack
        (one per kind: a seed's timing is its kind's), read once."""
        if self._shipped_rows is None:
            self._shipped_rows = {}
            runs = self.shipped.query(status="finished") if self.shipped is not None and self.hardware else []
            for rid in (runs["id"] if len(runs) else []):
                run = _readable(self.shipped, rid)
                if run is not None and hardware(run.info) == self.hardware and not _packed(run.info):
                    self._shipped_rows.setdefault(cost_key(run.config), run.metric_rows())
        return self._shipped_rows

    def epochs_done(self, cfg: dict[str, Any], checkpointed: bool = False) -> int:
        """The epochs `cfg`'s run has recorded, or (`checkpointed`) those a resume starts after."""
        run = _readable(self.store, self.store.run_id(cfg))
        if run is None:
            return 0
        if checkpointed:
            state = run.state() if run.has_checkpoint() else None
            return state["epoch"] if state else 0
        return run.info.get("epoch", 0)

    def timed(self, cfg: dict[str, Any], seconds: float, epochs: int) -> None:
        """`epochs` of `cfg`'s run took `seconds` of this window's clock; the run's metrics (`wall_s`, cumulative
        over resumes) split them into start-up (the session's wall beyond `epochs` typical epochs) and seconds per
        epoch, in the clock's units. One epoch is split by its typical length as its session judged it (run.json
        `epoch_estimate_s`: its start-up left out) or the benchmark's epoch, the shorter, the rest start-up."""
        if epochs <= 0:
            return
        key, rid = cost_key(cfg), self.store.run_id(cfg)
        run = _readable(self.store, rid)
        rows = run.metric_rows() if run is not None else []
        startup, new = 0.0, rows[-epochs:] if len(rows) >= epochs else []
        if len(new) > 1:
            prior = rows[-epochs - 1].get("wall_s", 0.0) if len(rows) > epochs else 0.0  # the session's start
            total, per_wall = new[-1]["wall_s"] - prior, epoch_seconds(new)
            if total > 0 and per_wall is not None:
                startup = seconds * min(1.0, max(0.0, total - epochs * per_wall) / total)
        else:
            known = [e for e in ((run.info.get("epoch_estimate_s") if run is not None else None),
                                 self._from_step_ms(cfg)) if e is not None]
            if known and min(known) < seconds:
                startup = seconds - min(known)
        self.measured[key], self.start[key] = (seconds - startup) / epochs, startup

    def _from_step_ms(self, cfg: dict[str, Any]) -> float | None:
        ms = self.step_ms.get(cfg["model"]["scheme"])
        if ms is None:
            return None
        from .presets import task_spec

        spec = task_spec(cfg["task"])
        steps = math.ceil(round(spec.train_frac * spec.n_examples) / cfg["train"]["batch_size"])
        return steps * ms / 1000 * (1 + EVAL_SHARE)

    def per_epoch(self, cfg: dict[str, Any]) -> float | None:
        key = cost_key(cfg)
        return self.measured[key] if key in self.measured else self._from_step_ms(cfg)

    def epochs_left(self, cfg: dict[str, Any]) -> int:
        rid = self.store.run_id(cfg)
        if _finished(self.store, rid):
            return 0
        return cfg["train"]["epochs"] - self.epochs_done(cfg, checkpointed=True)

    def estimate(self, cfg: dict[str, Any]) -> float | None:
        """Seconds to finish `cfg`'s run (0 when finished), start-up included, or None when unknown."""
        left = self.epochs_left(cfg)
        if not left:
            return 0.0
        sec = self.per_epoch(cfg)
        return None if sec is None else self.startup(cfg) + left * sec

    def startup(self, cfg: dict[str, Any]) -> float:
        """`cfg`'s kind's start-up as timed; for a kind not timed, the largest start-up timed in this window (a
        compile cache warm or cold shows in the first run), else `startup_s`."""
        return self.start.get(cost_key(cfg), max(self.start.values(), default=self.startup_s))


def load_step_ms(paths: list[str | Path] | str | Path | None) -> tuple[dict[str, float] | None, list[str]]:
    """{scheme: ms per training step} from a benchmark's JSON (`benchmarks/gpu_step.py` writes `step_ms`); with
    several files, the first's table with the schemes it lacks filled from the next (`fill_step_ms`). Returns the
    table and a line for each scheme filled."""
    if paths is None or isinstance(paths, (str, Path)):
        paths = [] if paths is None else [paths]
    table, notes = None, []
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"--step-ms {path}: not a readable JSON file ({e}); give a benchmark's JSON "
                             "(`benchmarks/gpu_step.py` writes `step_ms`)") from None
        one = data.get("step_ms", data) if isinstance(data, dict) else data
        if not (isinstance(one, dict) and all(isinstance(v, (int, float)) for v in one.values())):
            raise ValueError(f"--step-ms {path}: expected {{scheme: ms per step}} (or one under 'step_ms')")
        one = {k: float(v) for k, v in one.items()}
        if table is None:
            table = one
        else:
            table, filled = fill_step_ms(table, one, estimated=data.get("filled", {}) if "step_ms" in data else {})
            notes += [f"{scheme}: {how}, from {path}" for scheme, how in filled.items()]
    return table, notes


def fill_step_ms(table: dict[str, float], other: dict[str, float],
                 estimated=()) -> tuple[dict[str, float], dict[str, str]]:
    """`table` with the schemes it lacks taken from `other` (another card's or an older table), each x r, r the
    median of table[s] / other[s] over the schemes both time, `other`'s own estimates (`estimated`, filled there
    in turn) left out (1 where none is shared: the other figure as it is). A window's check may time RoPE alone;
    without this its planner knows no NoPE or MLA step and, with --no-partial, starts none of them. Returns the
    table and {scheme filled: how}."""
    shared = sorted((set(table) & set(other)) - set(estimated))
    ratio = statistics.median(table[s] / other[s] for s in shared) if shared else 1.0
    how = f"x {ratio:.3f} ({', '.join(shared)} here against there)" if shared else "as it is (no scheme shared)"
    filled = {s: other[s] * ratio for s in other if s not in table}
    return table | filled, {s: f"{other[s]:.2f} ms {how} = {ms:.2f} ms" for s, ms in filled.items()}


def fit_workers(workers: int, configs: list[dict[str, Any]], device: str | None, log) -> int:
    """`workers`, or fewer on CUDA so that the runs side by side fit the GPU's free memory
    (`presets.estimate_gpu_memory`); ValueError when not even one fits."""
    from .loop import pick_device
    from .presets import estimate_gpu_memory, gpu_slots

    dev = pick_device(device)
    if dev.type != "cuda":
        return workers
    fit = gpu_slots(configs, dev)
    if fit < 1:
        need = max(estimate_gpu_memory(c) for c in configs) / 1e9
        raise ValueError(f"a run of this sweep needs about {need:.3g} GB of GPU memory, more than {dev} has free; "
                         "lower train.batch_size in the grid's [set] or free the GPU")
    if fit < workers:
        log(f"note: --workers {workers} on {dev}: only {fit} runs fit the free GPU memory at once; using {fit}")
    return min(workers, fit)


def check_options(*, workers: int = 1, ray: bool | str | None = None, pack: int | str | None = None,
                  compile: bool | str = False, sdpa_backend: str | None = None,
                  deadline: float | None = None, hardware: str | None = None, dry_run: bool = False) -> int | str:
    """The sweep's options that exclude each other, checked before anything is made (the CLI calls it before the
    store); returns the validated `pack`: an int >= 1 or "auto", None being 1 (no packing). On an H200 at the paper
    preset (dropout 0) a pack of 3 or 6 trained 0.78-0.81x as fast as its runs one after another
    (docs/training.md, "GPU benchmark"), so packing is asked for, never the default. `--deadline` and
    `--sdpa-backend` train one run after another in this process: without `--workers`, `--ray` and `--pack`.
    `--hardware` plans a window on other hardware: a preview only (`--dry-run --deadline`)."""
    many = workers > 1 or bool(ray)
    if pack is None:
        pack = 1
    if pack != "auto" and not (isinstance(pack, int) and not isinstance(pack, bool) and pack >= 1):
        raise ValueError(f"--pack {pack!r}: a number of runs >= 1 (1: no packing) or auto")
    if pack != 1 and many:
        raise ValueError("--pack trains its packs in this process; use it without --workers / --ray (or --pack 1)")
    if pack != 1 and compile:
        raise ValueError("--pack and --compile exclude each other (packed runs are not compiled); drop one")
    for option, value in (("--deadline", deadline), ("--sdpa-backend", sdpa_backend)):
        if value is not None and (many or pack != 1):
            raise ValueError(f"{option} {value}: one run after another in this process; use it without --workers, "
                             "--ray and --pack")
    if deadline is not None and not (isinstance(deadline, (int, float)) and deadline > 0):
        raise ValueError(f"--deadline {deadline!r}: seconds > 0 from now")
    if hardware is not None and not (dry_run and deadline is not None):
        raise ValueError(f"--hardware {hardware!r} previews a window on that hardware; use it with --dry-run and "
                         "--deadline (a real window plans on the hardware it runs on)")
    return pack


def shipped_hardware(shipped: RunStore | None) -> list[str]:
    """The hardware (`hardware`) the finished runs of `shipped` were trained on, sorted."""
    return sorted({h for h in (hardware(run.info) for run in finished_runs(shipped)[0]) if h}) if shipped else []


def plan_packs(jobs: list[tuple[str, dict]], store: RunStore, pack: int | str, device: str | None,
               retry_failed: bool = True) -> list[list[int]]:
    """Job indices grouped into packs, in order of each pack's first job: unfinished runs with equal
    `packed.pack_key` whose checkpoints are of the same epoch (`train_packed` needs it), at most `pack` per group
    ("auto": no limit) and on CUDA at most what the GPU's free memory holds; every other job alone."""
    from .loop import pick_device
    from .packed import pack_key
    from .presets import gpu_slots

    if pack == 1:
        return [[k] for k in range(len(jobs))]
    dev = pick_device(device)
    groups: list[list[int]] = []
    open_: dict[Any, list[int]] = {}
    for k, (_, cfg) in enumerate(jobs):
        run_id = store.run_id(cfg)
        run = _readable(store, run_id)
        key = pack_key(cfg)
        if (run is None and store.exists(run_id)) or (run is not None and (
                run.status == "finished" or (run.status == "failed" and not retry_failed))):
            key = None  # finished, failed, or unreadable (alone, `attempt` says why)
        if key is None:
            groups.append([k])
            continue
        key = (key, run.state()["epoch"] if run is not None and run.has_checkpoint() else 0)  # as train_packed
        limit = len(jobs) if pack == "auto" else pack
        if dev.type == "cuda":  # as many as the free GPU memory holds (`auto`), and never more
            limit = min(limit, max(1, gpu_slots([cfg], dev)))
        group = open_.get(key)
        if group is None or len(group) >= limit:
            group = open_[key] = []
            groups.append(group)
        group.append(k)
    return groups


def attempt_pack(members: list[tuple[str, dict]], store: RunStore, *, device: str | None = None,
                 threads: int | None = None, compile: bool | str = False, progress: bool = False,
                 fail_fast: bool = False, retry_failed: bool = True, log=None,
                 checkpoint_every: int = 1) -> list[dict[str, Any]]:
    """Train the runs of `members` ((head, config) pairs) as one pack; a record per run as `attempt` returns.
    When one of them is busy (its lock is taken), each is attempted alone instead."""
    from .packed import train_packed

    log = log or _stderr
    for head, cfg in members:
        log(f"{head}  training in a pack of {len(members)}")
    t0 = time.perf_counter()
    try:
        runs = train_packed([cfg for _, cfg in members], store, resume=True, device=device, threads=threads,
                            progress=progress, checkpoint_every=checkpoint_every)
    except KeyboardInterrupt:
        log("pack interrupted; run the sweep again to resume")
        raise
    except RunLocked:
        return [attempt(cfg, store, head=head, device=device, threads=threads, compile=compile, progress=progress,
                        fail_fast=fail_fast, retry_failed=retry_failed, log=log, checkpoint_every=checkpoint_every)
                for head, cfg in members]
    except Exception as e:
        log(f"pack of {len(members)} FAILED: {type(e).__name__}: {e}")
        if fail_fast:
            raise
        return [{"id": store.run_id(cfg), "outcome": "failed", "test_acc": None, "error": f"{type(e).__name__}: {e}"}
                for _, cfg in members]
    recs = []
    for (head, _), run in zip(members, runs):
        rec = {"id": run.id, "outcome": "resumed" if run.info.get("resumed_from_epoch") else "trained",
               "test_acc": run.final.get("test_acc"), "error": None}
        if run.status != "finished":  # pragma: no cover - only with stop hooks
            rec["outcome"] = run.status
        log(f"{head}  {rec['outcome']} (packed): test acc {rec['test_acc']:.4f} in "
            f"{fmt_time(time.perf_counter() - t0)}")
        recs.append(rec)
    return recs


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def shipped_records(ids: list[str], store: RunStore, shipped: RunStore | None) -> dict[str, dict[str, Any]]:
    """The run ids finished in the results store `shipped` and absent from `store`, as sweep records."""
    out: dict[str, dict[str, Any]] = {}
    for rid in dict.fromkeys(ids) if shipped is not None else ():
        if store.exists(rid) or not shipped.exists(rid):
            continue
        try:
            run = shipped.get(rid)
        except StoreError:  # a damaged shipped copy: train it here
            continue
        if run.status == "finished":
            out[rid] = {"id": rid, "outcome": "shipped", "test_acc": run.final.get("test_acc"), "error": None}
    return out


def _select(grid: dict[str, Any], store: RunStore, *, tiers, tags, shard, shipped: RunStore | None, log,
            engine: str) -> tuple[list[str], list[tuple[str, dict[str, Any]]], dict[str, dict[str, Any]]]:
    """The grid's points this sweep trains, logged: (every selected point's run id in grid order, the jobs as
    (progress head, config) without repeats or runs shipped already, the shipped runs' records by id)."""
    configs = expand_grid(grid, store, tiers)
    if tags is not None:
        configs = [c for c in configs if c.get("tag") in tags]
    if shard is not None:
        i, n = shard
        configs = [c for j, c in enumerate(configs) if j % n == i]
    ids = [store.run_id(c) for c in configs]
    if len(set(ids)) != len(ids):
        dup = sorted({x for x in ids if ids.count(x) > 1})
        log(f"note: {len(ids) - len(set(ids))} grid points repeat an identical config ({dup[:3]}...); run once")
    done = sum(_finished(store, r) for r in set(ids))
    gone = shipped_records(ids, store, shipped)
    log(f"sweep {grid.get('name', '')}: {len(set(ids))} runs, {done} already finished"
        + (f", {len(gone)} shipped in {shipped.root}" if shipped is not None else "") + f", root {store.root}{engine}")
    seen, jobs = set(), []
    for k, (cfg, run_id) in enumerate(zip(configs, ids), 1):
        head = f"[{k:>{len(str(len(ids)))}}/{len(ids)}] {run_id}"
        if run_id in gone and run_id not in seen:
            log(f"{head}  shipped already (test acc {gone[run_id]['test_acc']:.4f})")
        elif run_id not in seen:
            jobs.append((head, cfg))
        seen.add(run_id)
    return ids, jobs, gone


def _open_window(deadline: float, store: RunStore, configs: list[dict[str, Any]], *, clock, step_ms, compile,
                 shipped: RunStore | None, hardware: str | None, device: str | None) -> Window:
    """The deadline's `Window`, taught every config's seconds per epoch; `hardware` (a preview of another machine)
    must name one that trained a run shipped to `shipped`."""
    window = Window(deadline, store, clock=clock, step_ms=step_ms, startup_s=STARTUP_S[bool(compile)],
                    shipped=shipped, hardware=hardware or this_hardware(device))
    if hardware is not None and not window.shipped_rows():
        known = shipped_hardware(shipped)
        raise ValueError(f"--hardware {hardware!r}: no finished run in "
                         f"{shipped.root if shipped is not None else '(no --shipped store)'} was trained on it; "
                         + (f"pick one of {', '.join(map(repr, known))}" if known else "none of its runs names "
                            "its hardware (GPU runs shipped before run.json recorded the GPU's name do not)"))
    for cfg in configs:
        window.learn(cfg)
    return window


def _fits(window: Window, est: float | None, partial: bool) -> bool:
    """A run estimated to take `est` seconds (None: unknown) is started in grid order: it fits in what is left;
    one of unknown time only while time is left and a partial run may outlive the window (partial=True)."""
    if est is not None:
        return est <= window.left()
    return window.left() > 0 and partial


def _deferred(head: str, cfg: dict[str, Any], window: Window, store: RunStore, run, *, partial: bool,
              log) -> dict[str, Any]:
    """A run that did not fit the window, after the runs that did: trained (`run`) up to the deadline when it fits
    its start-up and one epoch (and partial runs may outlive the window), else recorded "deferred" for the next."""
    per, left = window.per_epoch(cfg), window.left()
    if partial and left > 0 and (per is None or window.startup(cfg) + per <= left):
        return run(head, cfg)
    est = window.estimate(cfg)
    need = "an unknown time" if est is None else f"about {fmt_time(est)}"
    log(f"{head}  left for the next window ({need} to finish, {fmt_time(max(0, left))} left)")
    return {"id": store.run_id(cfg), "outcome": "deferred", "test_acc": None, "error": None}


def _why_not(window: Window, cfg: dict[str, Any], partial: bool) -> str:
    """Why a run was left out of the window, for the log: its estimate, or that its time is unknown."""
    est = window.estimate(cfg)
    if est is not None:
        return f" (about {fmt_time(est)})"
    return "" if partial else f" (its time unknown: no --step-ms entry for {cfg['model']['scheme']!r})"


def _in_window(head: str, cfg: dict[str, Any], window: Window, run, *, clock, dry_run: bool, log) -> dict[str, Any]:
    """Train (`run`) one run that fits the window and teach the window its time per epoch (`Window.timed`); in a
    dry run, move the preview clock on by the run's estimate instead."""
    est = window.estimate(cfg)
    t0, e0 = clock(), window.epochs_done(cfg, checkpointed=True)  # a resume replays from its checkpoint
    rec = run(head, cfg)
    if dry_run and rec["outcome"] == "planned":
        clock.now += est or 0.0
        log(f"{head}  planned in the window: about {fmt_time(est or 0.0)}, {fmt_time(max(0, window.left()))} "
            "left after it")
    else:
        window.timed(cfg, clock() - t0, window.epochs_done(cfg) - e0)
    return rec


def _fan_out(jobs: list[tuple[str, dict[str, Any]]], store: RunStore, *, workers: int, ray, ray_gpus: float,
             device: str | None, progress: bool, fail_fast: bool, log, opts: dict[str, Any]) -> list[dict[str, Any]]:
    """Train `jobs` at once: as Ray tasks (`ray`) or in `workers` processes, as many as the free GPU memory holds
    (`fit_workers`)."""
    if ray:
        from .ray_engine import sweep_ray

        return sweep_ray(jobs, store, fail_fast=fail_fast, log=log, num_gpus=ray_gpus, **opts)
    from .workers import sweep_workers

    workers = fit_workers(workers, [cfg for _, cfg in jobs], device, log)
    return sweep_workers(jobs, store, workers, progress=progress, fail_fast=fail_fast, log=log, **opts)


def sweep(grid: dict[str, Any] | str | Path, store: RunStore | None = None, *, device: str | None = None,
          threads: int | None = None, compile: bool | str = False, progress: bool = True,
          dry_run: bool = False, shard: tuple[int, int] | None = None, fail_fast: bool = False,
          retry_failed: bool = True,
          tiers: list[int] | None = None, workers: int = 1, ray: str | bool | None = None, ray_gpus: float = 0.0,
          log=None, checkpoint_every: int = 1, pack: int | str | None = None,
          shipped: RunStore | None = None, deadline: float | None = None,
          clock: Callable[[], float] = time.monotonic, step_ms: dict[str, float] | None = None,
          partial: bool = True, tags: list[str] | None = None,
          sdpa_backend: str | None = None, hardware: str | None = None) -> list[dict[str, Any]]:
    """Train every run of the grid that is not finished yet. Returns one record per run, in grid order:
    {"id", "outcome": finished (already) | shipped | trained | resumed | failed | busy | planned, "test_acc",
    "error"}.

    shipped: a results store (e.g. results/repro): grid points finished there and absent from `store` are not
    trained again (outcome "shipped"): a grid resumes across sessions whose run stores did not survive.

    shard=(i, n): only the runs with index % n == i (split a sweep over processes or machines).
    tiers: only the grid points of these tiers (None: all). tags: only the points of these variants (by name).
    retry_failed: retrain runs whose last attempt failed (from their last checkpoint).
    checkpoint_every: each run commits a checkpoint every N epochs and after its last (`train`).
    On CUDA, `workers` shrinks to the runs the free GPU memory holds at once (`fit_workers`).
    pack=K: train up to K runs that differ only in their seeds as one pack in this process (`packed.train_packed`;
    runs with dropout train alone); "auto": as many as the GPU's free memory holds on CUDA, all seeds of a grid
    point on CPU; None (default): 1, no packing (packs measured slower on a GPU: `check_options`).
    workers=N: N runs at once, each in its own process with `threads` (default 1) torch threads
    (`workbench.train.workers`). ray=ADDRESS (True: local or already initialised): every run is a Ray task
    with `threads` CPUs and `ray_gpus` GPUs (a fraction lets several runs share one GPU; `workbench.train.ray_engine`).
    deadline=SECONDS: train only within that many seconds from now (`Window`; one run after another in this
    process): runs estimated not to fit are left for the next window (outcome "deferred") and then the first of
    them that fits its start-up and one epoch is started; each run checkpoints and stops at the deadline (outcome
    "interrupted").
    hardware: with `dry_run` and `deadline`, preview the window as the planner would make it on that hardware (a
    GPU's name as run.json records it, e.g. "NVIDIA H100 80GB HBM3"), from the runs shipped from it to `shipped`;
    default this machine's.
    step_ms: a benchmark's {scheme: ms per step}, for runs of configs not measured yet; clock: for tests.
    partial=False: start no run that is not expected to finish (where a checkpoint cannot outlive the window), and
    stop one as soon as its epochs left would end past the deadline (`train`'s must_finish).
    sdpa_backend: every run trains with SDPA trying this backend first (`loop.sdpa_backend_context`; one run after
    another in this process).
    Ctrl-C marks the runs in training interrupted and stops; run the sweep again to continue.
    """
    from .loop import compile_mode, sdpa_backend_context

    if int(workers) < 1:
        raise ValueError(f"workers={workers}: must be >= 1 (1 = one run after another in this process)")
    compile_mode(compile)  # a wrong mode fails before any file is written
    sdpa_backend_context(sdpa_backend)  # and a wrong SDPA backend
    if ray and workers > 1:
        raise ValueError("workers and ray exclude each other: Ray schedules runs by the cluster's CPUs")
    if ray:
        from .ray_engine import connect

        connect(None if ray is True else str(ray))  # before any file is written: a bad address leaves no trace
    store = store if store is not None else RunStore()
    log = log or _stderr
    engine = f", {workers} worker processes" if workers > 1 else (", on Ray" if ray else "")
    ids, jobs, gone = _select(grid if isinstance(grid, dict) else load_grid(grid), store, tiers=tiers, tags=tags,
                              shard=shard, shipped=shipped, log=log, engine=engine)
    t_start = time.perf_counter()
    opts = dict(device=device, threads=threads, compile=compile, retry_failed=retry_failed,
                checkpoint_every=checkpoint_every)
    parallel = not dry_run and (workers > 1 or bool(ray))
    pack = check_options(workers=workers, ray=ray, pack=pack, compile=compile, sdpa_backend=sdpa_backend,
                         deadline=deadline, hardware=hardware, dry_run=dry_run)
    if sdpa_backend is not None:
        opts["sdpa_backend"] = sdpa_backend
    window = None
    if deadline is not None:
        if dry_run:  # a preview of the window: a clock that each planned run moves on by its estimate
            clock = PreviewClock(clock())
        window = _open_window(deadline, store, [cfg for _, cfg in jobs], clock=clock, step_ms=step_ms,
                              compile=compile, shipped=shipped, hardware=hardware, device=device)
        opts |= {"deadline": window.end, "clock": clock, "must_finish": not partial}

    def run(head: str, cfg: dict[str, Any]) -> dict[str, Any]:
        return attempt(cfg, store, head=head, progress=progress, dry_run=dry_run, fail_fast=fail_fast, log=log,
                       **opts)

    results: list[dict[str, Any] | None] = [None] * len(jobs)
    deferred: list[int] = []
    for group in plan_packs(jobs, store, pack, device, retry_failed) if not (parallel or dry_run) else \
            [[k] for k in range(len(jobs))]:
        if len(group) > 1:
            recs = attempt_pack([jobs[k] for k in group], store, progress=progress, fail_fast=fail_fast, log=log,
                                **opts)
            for k, rec in zip(group, recs):
                results[k] = rec
            continue
        (k,) = group  # sequentially: everything; in parallel: the finished runs (no process needed)
        head, cfg = jobs[k]
        if window is None:
            results[k] = run(head, cfg) if not parallel or _finished(store, store.run_id(cfg)) else None
        elif _fits(window, window.estimate(cfg), partial):
            results[k] = _in_window(head, cfg, window, run, clock=clock, dry_run=dry_run, log=log)
        else:
            log(f"{head}  does not fit the {fmt_time(max(0, window.left()))} left{_why_not(window, cfg, partial)}; "
                "after the runs that fit")
            deferred.append(k)
    for k in deferred:
        results[k] = _deferred(*jobs[k], window, store, run, partial=partial, log=log)
    todo = [k for k, r in enumerate(results) if r is None]
    if todo:
        recs = _fan_out([jobs[k] for k in todo], store, workers=workers, ray=ray, ray_gpus=ray_gpus, device=device,
                        progress=progress, fail_fast=fail_fast, log=log, opts=opts)
        for k, rec in zip(todo, recs):
            results[k] = rec
    by_id = {r["id"]: r for r in results} | gone
    results = [by_id[rid] for rid in dict.fromkeys(ids)]
    counts = collections.Counter(r["outcome"] for r in results)
    log(f"sweep done in {fmt_time(time.perf_counter() - t_start)}: "
        + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return results


__all__ = ["attempt", "load_grid", "grid_points", "expand_grid", "sweep", "StoreError"]
