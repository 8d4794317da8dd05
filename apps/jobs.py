"""Long work started from the dashboard, run as Dash background callbacks (DiskcacheManager).

Each job runs in a child process, reports progress (a bar and a status line), can be cancelled, and leaves
its result in the run store; the page then re-reads the store. Three kinds of work exist:

* `analysis_work`: run `workbench.analysis.ANALYSES[name](run)` for a run that lacks the table;
* `train_work`: train a new run (the `cpu` or `smoke` preset, `TRAIN_PRESETS`; any fidelity) through
  `workbench.train`;
* `recreate_work`: re-train a shipped run (shipped without weights) into the user's store (`register_recreate`
  wires its button, shown on the live pages only while the picked run needs it).

At most `MAX_JOBS` jobs run at once on one dashboard, whichever tab or request starts them (`job_slot`: a press past
it is refused with a line that says so).
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from dash import Input, Output, State
from dash.exceptions import PreventUpdate

from apps.common import redact_paths

Progress = Callable[[float, str], None]
MAX_JOBS = 2  # jobs at once on one dashboard: its machine's share (the shared machine has 2 cores)
TRAIN_PRESETS = ("cpu", "smoke")  # what the Train panel trains (minutes a run); the larger ones: `workbench train`


@contextmanager
def job_slot(ctx):
    """Hold one of the dashboard's MAX_JOBS job slots for the `with` block: an exclusive flock on
    `<cache_dir>/job-<i>.lock`, held by the job's own process (the kernel drops it when the process ends or is
    killed by Cancel); ValueError, said in the panel, when every slot is taken."""
    import fcntl

    for i in range(MAX_JOBS):
        f = open(Path(ctx.cache_dir) / f"job-{i}.lock", "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        try:
            yield i
        finally:
            f.close()
        return
    raise ValueError(f"{MAX_JOBS} jobs are running on this dashboard already (its share of the machine): wait for "
                     "one to end, or cancel it, then press again")


def _heartbeat(progress: Progress, text: str, start: float, lo: float, hi: float, expected_s: float):
    """Creep the bar from lo towards hi while a step whose duration we cannot measure runs."""
    stop = threading.Event()

    def beat():
        while not stop.wait(0.5):
            el = time.time() - start
            frac = lo + (hi - lo) * (1 - 1 / (1 + el / max(expected_s, 1.0)))
            progress(frac, f"{text} ({el:.0f} s)")

    t = threading.Thread(target=beat, daemon=True)
    t.start()
    return stop


def _limit_threads() -> None:
    """The job runs in a forked child that inherits the server's torch thread count; $PELAB_THREADS overrides."""
    import os

    if os.environ.get("PELAB_THREADS"):
        try:
            import torch

            torch.set_num_threads(max(1, int(os.environ["PELAB_THREADS"])))
        except Exception:
            pass


def analyses_work(progress: Progress, ctx, run_ids, name: str, skip: type | tuple = ()) -> list[str]:
    """`analysis_work` of `name` on each of `run_ids` in turn, the progress bar split evenly among them ("[2/5]
    ..."): one message per run; a run whose analysis raises one of `skip` is said ("not applicable"), not raised."""
    messages = []
    for i, rid in enumerate(run_ids):
        def sub(frac, text, i=i):
            progress((i + frac) / len(run_ids), f"[{i + 1}/{len(run_ids)}] {text}")

        try:
            messages.append(analysis_work(sub, ctx, rid, name)["message"])
        except skip as e:
            messages.append(f"{rid}: not applicable: {e}")
    return messages


def analysis_work(progress: Progress, ctx, run_id: str | None, name: str, params: dict | None = None) -> dict:
    """Compute analysis `name` for one run of the app's stores (`ctx`: its AppContext) and store its table."""
    from apps.common import analyses

    if not run_id:
        raise ValueError("pick a run first")
    _limit_threads()
    fn = analyses().get(name)
    if fn is None:
        raise ValueError(f"no analysis {name!r} in workbench.analysis.ANALYSES")
    progress(0.05, f"loading run {run_id}")
    run = ctx.stores().get(run_id)  # StoreError "unknown run" for anything but a run of the stores
    if run.store.readonly:
        from apps.common import gpu_needed

        why = gpu_needed(run)
        raise ValueError(f"{run_id} is a shipped (read-only) run: its tables cannot be added here; " + (
            why or f"press Re-create this run (or run `workbench recreate {run_id}`) to get it into your store"))
    before = run.table_stamps()
    start = time.time()
    stop = _heartbeat(progress, f"running {name} on {run_id}", start, 0.1, 0.95, expected_s=20)
    try:
        df = fn(run, **(params or {}))
    finally:
        stop.set()
    if df is not None and run.table_stamps() == before:  # the analysis did not store it itself
        run.save_table(name, df)
    progress(1.0, "done")
    return {"run_id": run_id, "table": name, "message": f"{name} for {run_id}: {len(df)} rows stored "
                                                       f"({time.time() - start:.1f} s)"}


def train_work(progress: Progress, ctx, scheme: str, task: str, preset: str, seed: Any = 42,
               arch: str = "paper", fidelity: str | None = "pelab") -> dict:
    """Train one run at a small preset (`workbench.train`) and fidelity (`presets.FIDELITIES`); the run and its
    metrics land in the user's store."""
    from workbench.train.loop import train
    from workbench.train.presets import FIDELITIES, resolve_config

    if not scheme or not task or not preset:
        raise ValueError("pick a scheme, a task and a preset first")
    for name, value in (("scheme", scheme), ("task", task), ("preset", preset), ("architecture", arch)):
        if value is not None and not isinstance(value, str):  # a client sent a list or a number
            raise ValueError(f"pick one {name} from the list")
    if preset == "paper":
        raise ValueError("the paper preset needs a GPU (about two days on 2 CPU cores); "
                         "run `workbench train --preset paper` on a GPU machine instead")
    if preset not in TRAIN_PRESETS:
        from workbench.train.presets import PRESETS

        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset[:40]!r}: the Train panel trains {' and '.join(TRAIN_PRESETS)}")
        raise ValueError(f"the Train panel trains the {' and '.join(TRAIN_PRESETS)} presets (minutes a run); "
                         f"{preset!r} takes longer: run `workbench train --preset {preset}` instead")
    fidelity = fidelity or "pelab"
    if not isinstance(fidelity, str) or fidelity not in FIDELITIES:
        raise ValueError(f"fidelity {str(fidelity)[:40]!r} is unknown; pick one of {', '.join(FIDELITIES)}")
    _limit_threads()
    store = ctx.stores().own
    progress(0.02, f"preparing data for {scheme} / {task} / {preset} / {fidelity}")
    if isinstance(seed, float) and seed.is_integer():
        seed = int(seed)  # a Dash number input sends 42.0
    cfg = resolve_config(preset=preset, scheme=scheme, task=task, arch=arch or None,
                         seed=seed if seed not in (None, "") else None, store=store, fidelity=fidelity)
    start = time.time()
    run = _with_epoch_progress(progress, int(cfg["train"]["epochs"]),
                               lambda on_epoch: train(cfg, store, progress=False, on_epoch=on_epoch))
    return {"run_id": run.id, "message": f"trained {run.id} ({run.status}){_acc(run)} in {time.time() - start:.0f} s"}


def recreate_work(progress: Progress, ctx, run_id: Any) -> dict:
    """Re-train a shipped run (no weights shipped) into the user's store under the same id
    (`workbench.train.recreate`, as `workbench recreate RUN_ID`); the pages then read the own store's copy."""
    from apps.common import needs_recreate
    from workbench.train.recreate import numerics_note, recreate

    stores = ctx.stores()
    if stores.shipped is None:
        raise ValueError("this dashboard has no shipped results store; start it with `workbench app --shipped DIR`")
    if not isinstance(run_id, str) or not run_id:
        raise ValueError("pick a shipped run first")
    src = stores.shipped.get(run_id)  # StoreError for anything that is not a run folder of the shipped store
    if not needs_recreate(stores, run_id):
        raise ValueError(f"{run_id} is already in your store with its weights; nothing to re-create")
    _limit_threads()
    progress(0.02, f"re-creating {run_id} from its config (the shipped run took "
                   f"{float(src.info.get('wall_time_s') or 0):.0f} s to train)")
    note = numerics_note(src.info)  # other numerics here: another trajectory, said with the result
    said: list[str] = []  # its agreement line ("RUN_ID: ..."): the finished copy's metrics against the shipped ones

    def say(line: str) -> None:
        said.append(line)
        progress(0.04, line)

    start = time.time()
    run = _with_epoch_progress(progress, int(src.config["train"]["epochs"]),
                               lambda on_epoch: recreate(stores.shipped, stores.own, run_id, on_epoch=on_epoch,
                                                         say=say))
    agreement = [line for line in said if line.startswith(f"{run_id}: ")]  # `recreate.agreement_line`
    compared = agreement[-1].removeprefix(f"{run_id}: ") if agreement and run.status == "finished" else None
    tail = [s[0].upper() + s[1:] for s in (note, compared) if s]
    return {"run_id": run.id, "message": f"re-created {run.id} in your store ({run.status}){_acc(run)} in "
                                         f"{time.time() - start:.0f} s" + "".join(f". {s}" for s in tail)}


def _acc(run) -> str:
    from workbench.figures.style import pct

    acc = run.final.get("test_acc")
    return f", test accuracy {pct(acc)}" if isinstance(acc, (int, float)) else ""


def _with_epoch_progress(progress: Progress, epochs: int, fit: Callable[[Callable], Any]):
    """Run `fit(on_epoch)` (a `train` call) with the bar at the epochs done and the last test accuracy, creeping
    inside an epoch so it moves; the bar ends at 1."""
    from workbench.figures.style import pct

    start = time.time()
    state = {"done": 0, "t_epoch": start, "last": ""}

    def beat(stop: threading.Event) -> None:
        while not stop.wait(0.5):
            el = time.time() - state["t_epoch"]
            inside = 1 - 1 / (1 + el / 10.0)
            progress(0.05 + 0.9 * (state["done"] + 0.9 * inside) / epochs,
                     f"epoch {state['done'] + 1}/{epochs}{state['last']} ({time.time() - start:.0f} s)")

    def on_epoch(run, row: dict) -> None:
        state["done"], state["t_epoch"] = int(row.get("epoch", state["done"] + 1)), time.time()
        acc = row.get("test_acc")
        state["last"] = f", test acc {pct(acc)} after epoch {state['done']}" if isinstance(acc, float) else ""
        progress(0.05 + 0.9 * state["done"] / epochs, f"epoch {state['done']}/{epochs} done{state['last']}")

    stop = threading.Event()
    threading.Thread(target=beat, args=(stop,), daemon=True).start()
    try:
        out = fit(on_epoch)
    finally:
        stop.set()
    progress(1.0, "done")
    return out


def register_job(app, prefix: str, states: list[State], work: Callable[..., dict],
                 runs_from: str | None = None) -> None:
    """Wire the job panel `apps.common.job_panel(prefix)` to `work(progress, ctx, *state_values)`, where `ctx` is
    the app's `AppContext` captured here (server-side; the forked job inherits it). With `runs_from` (the id of the
    page's run dropdown) the panel shows only while a picked run is of your own store (`common.any_own_run`): a
    shipped run's press could only end in a refusal.

    The result lands in `{prefix}-job-result` (a dcc.Store: {"ok", "run_id", "table", "message", "t"}), which
    pages use as an Input to re-read the store."""
    ctx = app.server.config["PELAB"]
    if runs_from is not None:
        @app.callback(Output(f"{prefix}-job-panel", "style"), Input(runs_from, "value"),
                      Input(f"{prefix}-recreate-job-result", "data"))
        def _own_only(run_ids, _recreated):
            from apps.common import any_own_run

            return {} if any_own_run(ctx.stores(), run_ids) else {"display": "none"}

    @app.callback(
        Output(f"{prefix}-job-result", "data"),
        Output(f"{prefix}-job-message", "children"),
        Input(f"{prefix}-job-run", "n_clicks"),
        State(f"{prefix}-job-run", "id"),  # in the job's cache key: two panels' presses never share a result
        *states,
        background=True,
        running=[
            (Output(f"{prefix}-job-run", "disabled"), True, False),
            (Output(f"{prefix}-job-cancel", "disabled"), False, True),
            (Output(f"{prefix}-job-box", "style"), {"display": "inline-flex"}, {"display": "none"}),
        ],
        cancel=[Input(f"{prefix}-job-cancel", "n_clicks")],
        progress=[Output(f"{prefix}-job-progress", "value"), Output(f"{prefix}-job-progress", "max"),
                  Output(f"{prefix}-job-status", "children")],
        progress_default=["0", "100", ""],
        interval=500,
        prevent_initial_call=True,
    )
    def _job(set_progress, n_clicks, _panel, *values):
        if not n_clicks:
            raise PreventUpdate

        def progress(frac: float, text: str) -> None:
            set_progress((str(int(round(100 * max(0.0, min(1.0, frac))))), "100", text))

        try:
            with job_slot(ctx):
                out = work(progress, ctx, *values)
        except Exception as e:  # shown as a line in the panel, never a stack trace or a server path
            msg = redact_paths(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
            return {"ok": False, "error": msg, "t": time.time()}, f"✕ failed: {msg}"
        return {"ok": True, "t": time.time(), **out}, f"✓ {out.get('message', 'done')}"


def register_recreate(app, prefix: str, run_input: str, wanted: Callable[..., bool] | None = None,
                      extra: tuple[str, ...] = ()) -> None:
    """Wire `apps.common.recreate_panel(prefix)` to the page's run dropdown `run_input` (one id or a list): shown
    for the first picked run that `needs_recreate` (and, with `wanted(run, *values of the extra dropdown ids)`,
    that the page needs the weights for: pages that compute from the weights only through a Run button show it
    only while the run lacks their table); its id goes to `recreate_work` (checked there against the shipped
    store again). After the job the page's callbacks (Input `{prefix}-recreate-job-result`) re-read the store."""
    from apps import common as C
    from workbench.store import lock_holder

    register_job(app, f"{prefix}-recreate", [State(f"{prefix}-recreate-target", "data")], recreate_work)

    def needed(stores, rid: str, values) -> bool:
        if not C.needs_recreate(stores, rid):
            return False
        try:
            run = stores.get(rid)
            if C.gpu_needed(run):  # trained on a GPU and none here: the page's hint says so, no button that fails
                return False
            return wanted is None or bool(wanted(run, *values))
        except Exception:  # a hostile extra value: no button
            return False

    @app.callback(Output(f"{prefix}-recreate-box", "style"), Output(f"{prefix}-recreate-note", "children"),
                  Output(f"{prefix}-recreate-done", "children"), Output(f"{prefix}-recreate-target", "data"),
                  Input(run_input, "value"), Input(f"{prefix}-recreate-job-result", "data"),
                  *[Input(e, "value") for e in extra])
    def show(value, _job, *values):
        stores = C.stores()
        ids = [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)][:50]
        target = next((r for r in ids if needed(stores, r, values)), None)
        copies = [r for r in ids if C.shipped_copy(stores, r)]
        done = (f"{', '.join(copies)}: your re-created copy of the shipped run (weights in your store)"
                if copies else "")
        if target is None:
            return {"display": "none"}, "", done, None
        holder = lock_holder(stores.own.root, target)
        if holder is not None:  # a job (another tab, a CLI) is re-creating it now: a second one would be refused
            epoch = stores.own.get(target).info.get("epoch", 0) if stores.own.exists(target) else 0
            note = C.hint(f"{target} is being re-created in your store right now (pid {holder.get('pid', '?')}, "
                          f"epoch {epoch} done); this page uses it once that job ends.", kind="info")
            return {"display": "block"}, note, done, target
        secs = float(stores.shipped.get(target).info.get("wall_time_s") or 0)
        note = C.hint(f"{target} is a shipped run without weights: its results are here. Re-creating it "
                      f"re-trains it deterministically into your store (about {max(1, round(secs / 60))} min of "
                      f"training when it was shipped); or run `workbench recreate {target}`.", kind="info")
        return {"display": "block"}, note, done, target
