"""Long work started from the dashboard, run as Dash background callbacks (DiskcacheManager).

Each job runs in a child process, reports progress (a bar and a status line), can be cancelled, and leaves
its result in the run store; the page then re-reads the store. Two kinds of work exist:

* `analysis_work`: run `workbench.analysis.ANALYSES[name](run)` for a run that lacks the table;
* `train_work`: train a new run (CPU or smoke preset) through `workbench.train`.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from dash import Input, Output, State
from dash.exceptions import PreventUpdate

from apps.common import redact_paths

Progress = Callable[[float, str], None]


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


def _table_stamps(run) -> dict:
    d = run.path / "tables"
    return {p.name: p.stat().st_mtime_ns for p in d.glob("*.parquet")} if d.is_dir() else {}


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
        raise ValueError(f"{run_id} is a shipped (read-only) run: its tables cannot be added here; run "
                         "`workbench recreate` to get it into your store")
    before = _table_stamps(run)
    start = time.time()
    stop = _heartbeat(progress, f"running {name} on {run_id}", start, 0.1, 0.95, expected_s=20)
    try:
        df = fn(run, **(params or {}))
    finally:
        stop.set()
    if df is not None and _table_stamps(run) == before:  # the analysis did not store it itself
        run.save_table(name, df)
    progress(1.0, "done")
    return {"run_id": run_id, "table": name, "message": f"{name} for {run_id}: {len(df)} rows stored "
                                                       f"({time.time() - start:.1f} s)"}


def train_work(progress: Progress, ctx, scheme: str, task: str, preset: str, seed: Any = 42,
               arch: str = "paper") -> dict:
    """Train one run at a small preset (`workbench.train`); the run and its metrics land in the user's store."""
    from workbench.train.loop import train
    from workbench.train.presets import resolve_config

    if not scheme or not task or not preset:
        raise ValueError("pick a scheme, a task and a preset first")
    if preset == "paper":
        raise ValueError("the paper preset needs a GPU (about two days on 2 CPU cores); "
                         "run `workbench train --preset paper` on a GPU machine instead")
    _limit_threads()
    store = ctx.stores().own
    progress(0.02, f"preparing data for {scheme} / {task} / {preset}")
    if isinstance(seed, float) and seed.is_integer():
        seed = int(seed)  # a Dash number input sends 42.0
    cfg = resolve_config(preset=preset, scheme=scheme, task=task, arch=arch or None,
                         seed=seed if seed not in (None, "") else None, store=store)
    epochs = int(cfg["train"]["epochs"])
    start = time.time()
    state = {"done": 0, "t_epoch": start, "last": ""}

    def beat(stop: threading.Event) -> None:  # creep inside an epoch, so the bar moves
        while not stop.wait(0.5):
            el = time.time() - state["t_epoch"]
            inside = 1 - 1 / (1 + el / 10.0)
            progress(0.05 + 0.9 * (state["done"] + 0.9 * inside) / epochs,
                     f"epoch {state['done'] + 1}/{epochs}{state['last']} ({time.time() - start:.0f} s)")

    def on_epoch(run, row: dict) -> None:
        state["done"], state["t_epoch"] = int(row.get("epoch", state["done"] + 1)), time.time()
        acc = row.get("test_acc")
        state["last"] = f", test acc {acc:.3f} after epoch {state['done']}" if isinstance(acc, float) else ""
        progress(0.05 + 0.9 * state["done"] / epochs, f"epoch {state['done']}/{epochs} done{state['last']}")

    stop = threading.Event()
    threading.Thread(target=beat, args=(stop,), daemon=True).start()
    try:
        run = train(cfg, store, progress=False, on_epoch=on_epoch)
    finally:
        stop.set()
    progress(1.0, "done")
    acc = run.final.get("test_acc")
    acc_s = f", test accuracy {acc:.3f}" if isinstance(acc, (int, float)) else ""
    return {"run_id": run.id, "message": f"trained {run.id} ({run.status}){acc_s} in {time.time() - start:.0f} s"}


def register_job(app, prefix: str, states: list[State], work: Callable[..., dict]) -> None:
    """Wire the job panel `apps.common.job_panel(prefix)` to `work(progress, ctx, *state_values)`, where `ctx` is
    the app's `AppContext` captured here (server-side; the forked job inherits it).

    The result lands in `{prefix}-job-result` (a dcc.Store: {"ok", "run_id", "table", "message", "t"}), which
    pages use as an Input to re-read the store."""
    ctx = app.server.config["PELAB"]

    @app.callback(
        Output(f"{prefix}-job-result", "data"),
        Output(f"{prefix}-job-message", "children"),
        Input(f"{prefix}-job-run", "n_clicks"),
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
    def _job(set_progress, n_clicks, *values):
        if not n_clicks:
            raise PreventUpdate

        def progress(frac: float, text: str) -> None:
            set_progress((str(int(round(100 * max(0.0, min(1.0, frac))))), "100", text))

        try:
            out = work(progress, ctx, *values)
        except Exception as e:  # shown as a line in the panel, never a stack trace or a server path
            msg = redact_paths(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
            return {"ok": False, "error": msg, "t": time.time()}, f"✕ failed: {msg}"
        return {"ok": True, "t": time.time(), **out}, f"✓ {out.get('message', 'done')}"
