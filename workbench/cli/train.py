"""CLI: `workbench train`, `workbench runs`, `workbench sweep`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .options import (COMPILE_MODE_HELP, ROOT_HELP, SDPA_BACKEND_HELP, SHIPPED_HELP, existing_root, fail,
                      grid_points_of, parse_shard, parse_tiers, say_created, step_options)


def _store(root: Optional[Path], create: bool = True):
    """The run store at `root`; `train` and `sweep` create it (and say so once they ran), a dry run does not."""
    from workbench.store import RunStore

    return RunStore(root, create=create)


def _shipped_store(shipped: Optional[Path]):
    """The results store `--shipped` names, read-only (never written by a sweep); None without the option."""
    from workbench.store import RunStore

    return None if shipped is None else RunStore(shipped, readonly=True)


CONFIG_OPTIONS = ("scheme", "task", "preset", "arch", "fidelity", "seed", "set_", "tag")  # make the run's config


def train_cmd(
    ctx: typer.Context,
    run_id: Optional[str] = typer.Argument(None, metavar="RUN_ID",
                                           help="a run of your store: train it from its own config.json "
                                                "(`workbench train --resume RUN_ID` continues an unfinished one); "
                                                "config options (--scheme, --set, ...) do not apply then"),
    scheme: Optional[str] = typer.Option(None, "--scheme", "-s",
                                         help="PE scheme (see `workbench schemes`; default rope, mla with "
                                              "--fidelity authors-mla)"),
    task: str = typer.Option("trigger-distance", "--task", "-t", help="trigger-distance (t1) or trigger-count (t2)"),
    preset: str = typer.Option("cpu", "--preset", "-p", help="paper | repro | cpu | smoke"),
    arch: Optional[str] = typer.Option(None, "--arch", help="paper | encoder | decoder (default: the preset's)"),
    fidelity: str = typer.Option("pelab", "--fidelity", "-f",
                                 help="pelab (default) | authors (the core paper's transformer script) | authors-mla "
                                      "(its MLA script): sets the explicit fields listed in docs/fidelity.md"),
    seed: Optional[str] = typer.Option(None, "--seed", help="training seed (init, dropout, shuffling); several, "
                                       "e.g. 42,43,44: one run each, trained as one pack where they may be "
                                       "(no dropout; docs/training.md)"),
    set_: List[str] = typer.Option([], "--set", help="override, e.g. train.epochs=5, model.n_layers=2, "
                                   "model.scheme_kwargs.rope_heads=[1,0,0,0], task.middle_max=20"),
    tag: Optional[str] = typer.Option(None, "--tag", help="label used in the run id instead of the scheme"),
    resume: bool = typer.Option(False, "--resume", help="continue an unfinished run with the same config"),
    force: bool = typer.Option(False, "--force", help="delete a run with the same config and start over"),
    device: Optional[str] = typer.Option(None, "--device", help="cuda | cpu (default: cuda if available)"),
    compile: bool = typer.Option(False, "--compile", help="torch.compile the model (pays off on GPU)"),
    compile_mode: Optional[str] = typer.Option(None, "--compile-mode", help=COMPILE_MODE_HELP),
    sdpa_backend: Optional[str] = typer.Option(None, "--sdpa-backend", help=SDPA_BACKEND_HELP),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads, 1 to 4 x CPUs (default: "
                                          "$PELAB_THREADS or torch's); results are bit-identical only for "
                                          "equal counts"),
    checkpoint_every: int = typer.Option(1, "--checkpoint-every", help="commit a checkpoint every N epochs and "
                                         "after the last (results do not depend on it; a resume replays the rest)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the resolved config and run id; creates nothing"),
    root: Optional[Path] = typer.Option(None, "--root", help=ROOT_HELP),
) -> None:
    """Train one model, save it in the run store and print its run id (last line of stdout)."""
    from workbench.store import run_id_for
    from workbench.train import resolve_config, train
    from workbench.train.loop import check_threads, pick_device

    pick_device(device)  # bad arguments fail before the dataset is generated
    check_threads(threads)
    if resume and force:
        fail("--resume and --force contradict each other: --resume continues the stored run, --force deletes it "
              "and trains it again; pass one")
    try:
        compile, sdpa_backend = step_options(compile, compile_mode, sdpa_backend, checkpoint_every)
    except ValueError as e:
        fail(str(e))
    seeds = _seeds(seed)
    if run_id is not None:
        given = [p.opts[0] for p in ctx.command.params if p.name in CONFIG_OPTIONS  # (typer vendors click's enum)
                 and ctx.get_parameter_source(p.name).name != "DEFAULT"]
        if given:
            fail(f"RUN_ID {run_id} trains the run's own config.json: leave out {', '.join(given)}")
        from workbench.store import RunStore

        # the run must exist: its store is not created
        cfgs = [RunStore(existing_root(root), create=False).get(run_id).config]
        store = None if dry_run else _store(root)
    else:
        # a dry run reads and writes nothing; --resume continues a stored run: its store is not created
        store = None if dry_run else _store(root, create=not resume)
        cfgs = [resolve_config(preset=preset, scheme=scheme, task=task, arch=arch, seed=s, sets=set_, tag=tag,
                               store=store, fidelity=fidelity) for s in seeds]
    run_ids = [run_id_for(c) for c in cfgs]
    if resume and store is not None and not any(store.exists(r) for r in run_ids):
        fail(f"--resume: no run {', '.join(run_ids)} in {store.root} to continue; leave out --resume to start it "
              "(or check --root)")
    if dry_run:
        for cfg, run_id in zip(cfgs, run_ids):
            typer.echo(json.dumps(cfg, indent=2))
            typer.echo(run_id)
        return
    from workbench.train.packed import train_packed, unpackable

    why = next((w for w in map(unpackable, cfgs) if w), None) or \
        ("no --force / --compile / --sdpa-backend" if force or compile or sdpa_backend is not None else None)
    packable = len(cfgs) > 1 and why is None
    if len(cfgs) > 1 and not packable:
        typer.secho(f"training the {len(cfgs)} seeds one after another ({why})", err=True)
    from workbench.store import StoreError

    try:
        if packable:
            runs = train_packed(cfgs, store, resume=resume, device=device, threads=threads, progress=not quiet,
                                checkpoint_every=checkpoint_every)
        else:
            runs = [train(cfg, store, resume=resume, force=force, device=device, compile=compile, threads=threads,
                          progress=not quiet, checkpoint_every=checkpoint_every, sdpa_backend=sdpa_backend)
                    for cfg in cfgs]
    except KeyboardInterrupt:
        stored = [r for r in run_ids if store.exists(r)]
        said = (f"interrupted; continue with the same command and --resume ({', '.join(stored)})" if stored else
                "interrupted before any run was stored; run the same command again (without --resume)")
        typer.secho(said, err=True)
        raise typer.Exit(130)
    except StoreError as e:  # a stored run of these configs whose files are damaged: say the way out
        if getattr(e, "run_id", None) in run_ids and getattr(e, "file", None) and not force:
            fail(f"{e}; the same command with --force deletes run {e.run_id} and trains it again")
        raise
    for run in runs:
        final = run.final
        if final:
            typer.secho(f"{run.id} {run.status}: test acc {final.get('test_acc', float('nan')):.4f}, "
                        f"test loss {final.get('test_loss', float('nan')):.4f} ({run.path})", err=True)
    say_created(store)
    for run in runs:
        typer.echo(run.id)


def _seeds(seed: Optional[str]) -> list:
    """--seed 42 or 42,43,44 -> [42] / [42, 43, 44]; None -> [None] (the preset's seed)."""
    if seed is None:
        return [None]
    try:
        seeds = [int(s) for s in str(seed).split(",")]
    except ValueError:
        fail(f"--seed {seed!r}: an integer or a comma-separated list, e.g. 42 or 42,43,44")
    if len(set(seeds)) != len(seeds):
        fail(f"--seed {seed!r}: a seed is repeated")
    return seeds


def _check_filters(store, **given: Optional[List[str]]) -> None:
    """A filter value that names no scheme, task, arch or preset PE-Lab knows, nor one a listed run has, is a
    typo: refused with the names there are (an empty table would read as "no such runs")."""
    from synthetic_tasks import TASKS
    from workbench.model import list_schemes
    from workbench.model.config import ARCHS
    from workbench.train.presets import PRESETS

    known = {"scheme": set(list_schemes()), "task": set(TASKS), "arch": set(ARCHS), "preset": set(PRESETS)}
    listed = store.query()
    for key, values in given.items():
        names = known[key] | set(listed[key].dropna()) if key in listed else known[key]
        bad = sorted(set(values or []) - names)
        if bad:
            fail(f"--{key} {', '.join(bad)}: unknown; use one of {', '.join(sorted(names))}")


def runs_cmd(
    scheme: Optional[List[str]] = typer.Option(None, "--scheme", "-s"),
    task: Optional[List[str]] = typer.Option(None, "--task", "-t"),
    arch: Optional[List[str]] = typer.Option(None, "--arch"),
    preset: Optional[List[str]] = typer.Option(None, "--preset", "-p"),
    seed: Optional[List[int]] = typer.Option(None, "--seed"),
    status: Optional[List[str]] = typer.Option(None, "--status"),
    tag: Optional[List[str]] = typer.Option(None, "--tag"),
    as_json: bool = typer.Option(False, "--json", help="print JSON records instead of a table"),
    reindex: bool = typer.Option(False, "--reindex", help="rebuild the index from the run folders first"),
    rules: bool = typer.Option(False, "--rules", help="add what each run can show by the registered run rules "
                               "(learned, still learning, ceiling, did not learn, diverged; docs/preregistration.md): "
                               "reads each run's metrics and data, seconds for the shipped runs"),
    root: Optional[Path] = typer.Option(None, "--root", help=ROOT_HELP),
    shipped: Optional[Path] = typer.Option(None, "--shipped", help=SHIPPED_HELP),
) -> None:
    """List the runs of your store and of the shipped results (column `source`; filters repeat: --scheme rope
    --scheme nope; `--rules`: column `shows`, as the dashboard's run pickers and COMPARISON.md read each run)."""
    from workbench.store import LISTED_STATUSES, StoreSet
    from workbench.train import canonical_task

    bad = sorted(set(status or []) - set(LISTED_STATUSES))
    if bad:
        fail(f"--status {', '.join(bad)}: unknown; use one of {', '.join(LISTED_STATUSES)}")
    store = StoreSet.open(existing_root(root), shipped)
    if reindex:
        store.own.reindex()
    task = [canonical_task(t) for t in task] if task else None
    _check_filters(store, scheme=scheme, task=task, arch=arch, preset=preset)
    df = store.query(scheme=scheme or None, task=task, arch=arch or None, preset=preset or None, seed=seed or None,
                     status=status or None, tag=tag or None)
    if rules:
        from workbench.analysis.claims import index_statuses

        df["run_status"] = index_statuses(store, df) if len(df) else []
    if as_json:
        typer.echo(df.drop(columns=["config"]).to_json(orient="records", indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    where = f"{store.root}" + (f" and {store.shipped.root} (shipped, read-only)" if store.shipped else "")
    table = Table(title=f"{len(df)} runs in {where}")
    cols = ("id", "source", "scheme", "task", "arch", "preset", "seed", "status", "epoch", "test acc",
            *(("shows",) if rules else ()), "wall", "updated")
    for col in cols:
        table.add_column(col, justify="right" if col in ("seed", "epoch", "test acc", "wall") else "left")
    colors = {"finished": "green", "running": "cyan", "failed": "red", "interrupted": "yellow", "corrupt": "red",
              "incomplete": "red"}
    for r in df.itertuples():
        acc = "" if r.test_acc is None or r.test_acc != r.test_acc else f"{r.test_acc:.4f}"
        wall = "" if r.wall_time_s is None or r.wall_time_s != r.wall_time_s else f"{r.wall_time_s:.0f}s"
        epoch = "" if r.epochs is None or r.epochs != r.epochs else f"{int(r.epoch or 0)}/{int(r.epochs)}"
        seed_s = "" if r.seed is None or r.seed != r.seed else str(int(r.seed))
        st = f"[{colors.get(r.status, 'white')}]{r.status}[/]"
        shows = (r.run_status or "",) if rules else ()
        table.add_row(r.id, r.source, str(r.scheme), str(r.task), str(r.arch), str(r.preset), seed_s, st, epoch, acc,
                      *shows, wall, str(r.updated or ""))
    console = Console()
    if not console.is_terminal:  # piped / captured: do not squeeze the ids into 80 columns
        console = Console(width=200)
    console.print(table)
    shown = set(df["id"])
    for rid, why in store.damaged().items():  # status `corrupt`: why, so no damaged run passes unexplained
        if rid in shown:
            typer.secho(f"damaged: {why}", fg=typer.colors.RED, err=True)


def sweep_cmd(
    grid: Path = typer.Argument(..., exists=True, dir_okay=False, help="grid TOML (see grids/)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list what would be trained; with --deadline, which runs "
                                 "a window of that many seconds would train by the planner's estimates"),
    shard: Optional[str] = typer.Option(None, "--shard", help="I/N: only every N-th run starting at I (0-based)"),
    fail_fast: bool = typer.Option(False, "--fail-fast", help="stop at the first failing run"),
    tier: Optional[str] = typer.Option(None, "--tier", help="only these tiers of the grid, e.g. 1 or 1,2"),
    tags: Optional[str] = typer.Option(None, "--tags", help="only these variants of the grid (by name), e.g. "
                                       "rope,nope,mla: Table 1's runs of grids/paper.toml"),
    device: Optional[str] = typer.Option(None, "--device"),
    compile: bool = typer.Option(False, "--compile"),
    compile_mode: Optional[str] = typer.Option(None, "--compile-mode", help=COMPILE_MODE_HELP),
    sdpa_backend: Optional[str] = typer.Option(None, "--sdpa-backend", help=SDPA_BACKEND_HELP),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch threads per run (default with "
                                          "--workers / --ray: 1, else $PELAB_THREADS or torch's)"),
    workers: int = typer.Option(1, "--workers", "-w", help="runs trained at once, each in its own process"),
    ray: bool = typer.Option(False, "--ray", help="run every grid point as a Ray task (needs pe-lab's ray extra); "
                             "a local cluster unless --ray-address is given"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Ray cluster to join (implies --ray): "
                                              "HOST:6379 from `ray start --head`, ray://HOST:10001, or auto"),
    ray_gpus: float = typer.Option(0.0, "--ray-gpus", help="GPUs per run on Ray; a fraction (0.25) shares one GPU"),
    checkpoint_every: int = typer.Option(1, "--checkpoint-every", help="each run commits a checkpoint every N "
                                         "epochs and after its last"),
    pack: Optional[str] = typer.Option(None, "--pack", help="train up to K runs that differ only in their seed as "
                                       "one pack (no dropout); auto: as many as GPU memory holds (all seeds on "
                                       "CPU); default 1 (measured slower on a GPU: docs/training.md)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no per-epoch progress bars"),
    deadline: Optional[float] = typer.Option(None, "--deadline", help="SECONDS from now (a lent GPU's window): "
                                             "train the runs that fit, checkpoint and stop at the deadline; the "
                                             "same command resumes the rest (one run after another)"),
    partial: bool = typer.Option(True, "--partial/--no-partial", help="with --deadline: after the runs that fit, "
                                 "start one that will not finish (it checkpoints at the deadline); --no-partial "
                                 "where checkpoints do not outlive the window"),
    step_ms: Optional[List[Path]] = typer.Option(None, "--step-ms", exists=True, dir_okay=False,
                                                 help="with --deadline: a benchmark's JSON of ms per step by scheme "
                                                      "(benchmarks/gpu_step.py's step_ms.json) for runs not measured "
                                                      "yet; repeated, a later file fills the schemes the first "
                                                      "lacks, scaled by the ratio on the schemes both time"),
    shipped: Optional[Path] = typer.Option(None, "--shipped", exists=True, file_okay=False,
                                           help="a results store (e.g. results/repro): grid points finished there "
                                                "are not trained again"),
    hardware: Optional[str] = typer.Option(None, "--hardware", help="with --dry-run --deadline: preview the window "
                                           "on this GPU (its name as run.json records it, e.g. 'NVIDIA H100 80GB "
                                           "HBM3'), timed from the runs shipped from it to --shipped"),
    root: Optional[Path] = typer.Option(None, "--root", help=ROOT_HELP),
) -> None:
    """Train every run of a grid that is not finished; stop and restart any time."""
    from workbench.train import sweep

    try:
        shard_t = parse_shard(shard) if shard else None
    except ValueError as e:
        fail(str(e))
    try:
        tiers = parse_tiers(tier)
    except ValueError as e:
        fail(str(e))
    tags_l = [t.strip() for t in tags.split(",")] if tags is not None else None
    grid_points_of(grid, tiers, tags_l)  # a typo in --tier or --tags: `error: ...` before the store is made
    from workbench.train.loop import check_threads, pick_device

    pick_device(device)
    check_threads(threads)
    check_threads(workers, "--workers")  # 1 to 4 x CPUs, one process each
    try:
        compile, sdpa_backend = step_options(compile, compile_mode, sdpa_backend, checkpoint_every)
    except ValueError as e:
        fail(str(e))
    if ray_gpus < 0:
        fail(f"--ray-gpus {ray_gpus}: must be >= 0")
    pack_n = None
    if pack is not None:
        try:
            pack_n = pack if pack == "auto" else int(pack)
        except ValueError:
            fail(f"--pack {pack!r}: a number of runs (1: no packing) or auto")
    ray_arg = ray_address or ray or None
    try:
        from workbench.train.sweep import check_options, load_step_ms

        check_options(workers=workers, ray=ray_arg, pack=pack_n, compile=compile, sdpa_backend=sdpa_backend,
                      deadline=deadline, hardware=hardware, dry_run=dry_run)  # before the store is made
        steps, filled = load_step_ms(step_ms)
    except ValueError as e:
        fail(str(e))
    for line in filled:
        typer.echo(f"step ms filled: {line}")
    try:
        if ray_arg:  # Ray missing or the address unreachable: fail before the store is created
            from workbench.train.ray_engine import connect

            connect(None if ray_arg is True else ray_arg)
        store = _store(root, create=not dry_run)
        results = sweep(grid, store, device=device, compile=compile, threads=threads, progress=not quiet,
                        dry_run=dry_run, shard=shard_t, fail_fast=fail_fast, tiers=tiers, workers=workers,
                        ray=ray_arg, ray_gpus=ray_gpus, checkpoint_every=checkpoint_every, pack=pack_n,
                        shipped=_shipped_store(shipped), deadline=deadline, step_ms=steps,
                        partial=partial, tags=tags_l, sdpa_backend=sdpa_backend,
                        hardware=hardware)
    except ImportError as e:  # --ray without Ray installed
        fail(str(e))
    except ValueError as e:  # --hardware that no shipped run was trained on
        fail(str(e))
    except RuntimeError as e:  # --fail-fast with --workers / --ray: a run failed
        typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    except KeyboardInterrupt:
        typer.secho("sweep interrupted; run the same command again to continue", err=True)
        raise typer.Exit(130)
    say_created(store)
    if any(r["outcome"] == "failed" for r in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("train")(train_cmd)
    app.command("runs")(runs_cmd)
    app.command("sweep")(sweep_cmd)
