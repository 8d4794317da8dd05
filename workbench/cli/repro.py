"""CLI of the shipped reproduction: `workbench ship`, `workbench compare`, `workbench recreate`, `workbench verify`.

    workbench ship --grid grids/repro.toml --tier 1 --root runs-repro --to results/repro   # analyse + copy, no weights
    workbench ship --grid grids/ladder.toml --root runs-repro --to results/repro --follow 60   # beside a sweep
    workbench compare results/repro                        # writes results/repro/COMPARISON.md from its tables
    workbench bundle results/repro                         # one-off: tables/*.parquet -> tables.parquet per run
    workbench recreate RUN_ID                              # re-train a shipped run into your store (same run id)
    workbench verify RUN_ID [RUN_ID ...] [--sample K]      # re-train, compare metrics and head ablations
    workbench check [results/repro]                        # every shipped run's files against its manifest
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import List, Optional

import typer

from .options import parse_shard, parse_tiers, say_created

PENDING_GRIDS = ("grids/repro.toml", "grids/ladder.toml", "grids/study.toml")  # `compare` lists their unfinished runs

ROOT_HELP = "your run store (default: $PELAB_RUNS or ./runs)"
SHIPPED_HELP = "the shipped results store (default: $PELAB_SHIPPED, else results/repro of this checkout)"


def _fail(msg: str) -> None:
    typer.secho(f"error: {msg}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


def _shipped(path: Optional[Path]):
    from workbench.store import RunStore
    from workbench.store.stores import shipped_root

    root = shipped_root(path)
    if root is None or not Path(root).is_dir():
        _fail(f"no shipped results store at {root or 'results/repro'}; pass --shipped DIR")
    return RunStore(root, readonly=True)


def ship_cmd(
    run_ids: List[str] = typer.Argument(None, help="run ids to ship (or --grid)"),
    grid: Optional[Path] = typer.Option(None, "--grid", exists=True, dir_okay=False,
                                        help="ship every finished run of this grid"),
    tier: Optional[str] = typer.Option(None, "--tier", help="with --grid: only these tiers, e.g. 1 or 1,2"),
    tags: Optional[str] = typer.Option(None, "--tags", help="with --grid: only these variants (by name), as "
                                       "`sweep --tags` trains them, e.g. rope,nope,mla"),
    to: Path = typer.Option(..., "--to", help="the results folder, e.g. results/repro"),
    analyze: bool = typer.Option(True, "--analyze/--no-analyze", help="run every analysis first (skips tables "
                                 "that exist)"),
    tables: Optional[str] = typer.Option(None, "--tables", help="analyse only these tables, comma-separated "
                                         "(a lean ship, e.g. ablation,deposit; default: every analysis)"),
    then_tables: Optional[str] = typer.Option(None, "--then-tables", help="after a run is shipped with --tables: "
                                              "analyse these too and ship it again, e.g. qk_means,angles (a ship "
                                              "cut off in this second step leaves the first one whole)"),
    n_boot: int = typer.Option(1000, "--n-boot", min=1, help="bootstrap resamples for the intervals"),
    max_examples: Optional[int] = typer.Option(1000, "--max-examples", min=1,
                                               help="ablation/extrapolation: a seeded sample of this many test "
                                                    "examples (the intervals account for it)"),
    root: Optional[Path] = typer.Option(None, "--root", help=ROOT_HELP),
    follow: Optional[float] = typer.Option(None, "--follow", min=1, metavar="SECONDS",
                                           help="beside a running sweep: look again every SECONDS and ship each "
                                                "run as it finishes; stops when every run is shipped or failed, "
                                                "or two looks in a row find none of them being trained"),
    while_pid: Optional[int] = typer.Option(None, "--while-pid", metavar="PID",
                                            help="with --follow: stop following once process PID (the sweep it "
                                                 "follows) has ended, after one last look (no idle looks)"),
    allow_dirty: Optional[str] = typer.Option(None, "--allow-dirty", metavar="REASON",
                                              help="ship runs trained from a tree with uncommitted changes that "
                                                   "recorded no code.diff; REASON is recorded in their run.json"),
    replace: bool = typer.Option(False, "--replace", help="overwrite a run shipped with other metrics (a "
                                 "re-training of it, e.g. on a machine of other numerics: `workbench verify`)"),
    device: str = typer.Option("cpu", "--device", help="run the head ablations here, e.g. cuda beside a GPU sweep "
                               "(seconds instead of minutes at paper scale; recorded in the table's analysed_on); "
                               "every other analysis runs on the CPU"),
) -> None:
    """Run every analysis on finished runs and copy them, without weights, into a results store."""
    from workbench.store import RunStore, StoreError
    from workbench.store.ship import check_destination

    try:
        tiers = parse_tiers(tier)
    except ValueError as e:
        _fail(str(e))
    for bad, why in ((allow_dirty is not None and not allow_dirty.strip(),
                      "--allow-dirty needs a reason, e.g. --allow-dirty 'only docs changed'"),
                     (then_tables is not None and (tables is None or not analyze),
                      "--then-tables needs --tables (the tables shipped first) and the analyses on"),
                     (tags is not None and grid is None, "--tags needs --grid GRID.toml"),
                     (tier is not None and grid is None, "--tier needs --grid GRID.toml"),
                     (tables is not None and not analyze, "--tables names the tables to analyse and ship; with "
                      "--no-analyze nothing is analysed: drop one"),
                     (while_pid is not None and follow is None, "--while-pid needs --follow SECONDS")):
        if bad:
            _fail(why)
    # never creates the store: beside a sweep (`make repro`) it may not exist yet, and its runs are then waited for
    store = RunStore(root, create=False)
    try:
        check_destination(store.root, to)
    except StoreError as e:
        _fail(str(e))
    shipped = RunStore(to, readonly=True) if Path(to).is_dir() else None  # runs shipped before this command
    if follow is None:  # a named run neither in the store nor shipped cannot finish while this command runs
        absent = [r for r in run_ids or [] if not store.exists(r) and not (shipped is not None and shipped.exists(r))]
        if absent:
            _fail(f"no run {', '.join(absent)} in {store.root}" + (f" or {to}" if shipped else "") +
                  ": check the id (`workbench runs`), pass the store it is in with --root, or --follow SECONDS "
                  "beside the sweep that trains it")
    if grid is not None:
        from workbench.train.presets import resolve_config

        from .options import grid_points_of

        try:
            points = grid_points_of(grid, tiers, tags.split(",") if tags else None)
            ids = [store.run_id(resolve_config(**p)) for p in points]  # no data I/O
        except ValueError as e:
            _fail(str(e))
        run_ids = list(dict.fromkeys(list(run_ids or []) + ids))
    if not run_ids:
        _fail("name run ids or pass --grid GRID.toml")
    opts = dict(analyze=analyze, n_boot=n_boot, max_examples=max_examples, shipped=shipped, allow_dirty=allow_dirty,
                tables=_table_list(tables), replace=replace, device=_analysis_device(device))
    if then_tables is not None:
        opts["then_tables"] = _table_list(then_tables, "--then-tables")
    counts = _ship_looks(store, list(run_ids), to, follow, while_pid, opts)
    failed = f", {counts['failed']} failed" if counts["failed"] else ""
    typer.echo(f"{counts['shipped']} shipped, {counts['unchanged']} unchanged, {counts['skipped']} skipped{failed}")
    if counts["failed"]:
        raise typer.Exit(1)


def _ship_looks(store, waiting: list[str], to: Path, follow: float | None, while_pid: int | None,
                opts: dict) -> dict[str, int]:
    """`ship`'s looks at the runs it is to ship: one (`follow` None), or one every `follow` seconds, shipping each
    run as it finishes, until none waits, process `while_pid` has ended (after one last look), or two looks in a
    row find none of them being trained or shipped by another process. Returns the count of each outcome."""
    from workbench.store.lock import lock_holder

    counts = {"shipped": 0, "unchanged": 0, "skipped": 0, "failed": 0}
    idle = 0
    while True:
        ended = while_pid is not None and not _alive(while_pid)  # before the look: it sees all the sweep finished
        outcomes = {rid: _ship_one(store, rid, to, quiet=follow is not None, **opts) for rid in waiting}
        waiting = [rid for rid, o in outcomes.items() if o == "waiting"]
        for o in outcomes.values():
            if follow is None or o != "waiting":
                counts["skipped" if o == "waiting" else o] += 1
        if follow is None or not waiting:
            return counts
        if ended:
            typer.echo(f"process {while_pid} has ended; stopped following: {len(waiting)} run(s) not finished",
                       err=True)
            counts["skipped"] += len(waiting)
            return counts
        doing = [h["doing"] for h in (lock_holder(store.root, rid) for rid in waiting) if h]
        idle = 0 if doing or any(o != "waiting" for o in outcomes.values()) else idle + 1
        if idle >= 2:
            typer.echo(f"{len(waiting)} run(s) neither finished nor being trained or shipped by another process "
                       f"after two looks; stopped following: {', '.join(waiting[:5])}"
                       f"{' ...' if len(waiting) > 5 else ''}", err=True)
            counts["skipped"] += len(waiting)
            return counts
        typer.echo(f"following: {len(waiting)} run(s) to ship, {doing.count('trained')} being trained, "
                   f"{doing.count('shipped')} being shipped by another process; next look in {follow:g} s",
                   err=True)
        _sleep(follow, while_pid)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (signal 0 checks without sending; an ended child not yet reaped, a zombie, has
    ended: /proc says so where there is one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _sleep(seconds: float, while_pid: Optional[int]) -> None:
    """Sleep `seconds`, waking early (within a second) once process `while_pid` has ended."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and (while_pid is None or _alive(while_pid)):
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))


def _table_list(tables: Optional[str], option: str = "--tables") -> Optional[list[str]]:
    """`--tables a,b` as a list checked against the analyses' table names (None: every analysis)."""
    if tables is None:
        return None
    from workbench.analysis import ANALYSES
    from workbench.analysis.ablation import MODES, table_name

    known = set(ANALYSES) | {table_name(m) for m in MODES} | {"deposit" + table_name(m)[len("ablation"):]
                                                              for m in MODES}
    names = [t.strip() for t in tables.split(",") if t.strip()]
    bad = [t for t in names if t not in known]
    if not names or bad:
        what = "unknown " + ", ".join(bad) if bad else "empty"
        _fail(f"{option} {tables!r}: {what}; known: {', '.join(sorted(known))}")
    return names


def _analysis_device(device: str) -> str:
    """`ship --device`, checked before anything is analysed (`loop.pick_device`: a device torch knows and this
    machine has)."""
    from workbench.train.loop import pick_device

    try:
        pick_device(device)
    except ValueError as e:
        _fail(str(e))
    return device


def _ship_one(store, rid: str, to: Path, *, analyze: bool, n_boot: int, max_examples: Optional[int],
              shipped=None, quiet: bool = False, allow_dirty: Optional[str] = None,
              tables: Optional[list[str]] = None, replace: bool = False, device: str = "cpu",
              then_tables: Optional[list[str]] = None) -> str:
    """Analyse and ship one run if it is finished: "shipped", "unchanged" (shipped already), "skipped" (failed,
    or absent from the store but in `shipped`, the read-only store at `to`), "failed" (its folder does not read, or
    shipping it was refused: a dirty tree without code.diff) or "waiting" (absent, created, running
    or interrupted: it may still finish; or held by another process that trains or ships it). A run shipped before
    with other metrics is refused before its analyses unless `replace` (`check_replacement`). `quiet` leaves out
    the per-look message of a waiting run. `then_tables`: once shipped (or found shipped) with `tables`, the run is
    analysed for these too and shipped again, so a kill in that second step leaves the first ship whole."""
    from workbench.analysis.suite import run_suite
    from workbench.store import RunLocked, StoreError
    from workbench.store.ship import check_replacement, is_shipped, ship_run

    try:
        run = store.get(rid)
    except StoreError as e:
        if store.exists(rid):  # the run is there but its files do not read (e.g. run.json `null`)
            typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
            return "failed"
        if shipped is not None and shipped.exists(rid):
            typer.echo(f"{rid}: not in {store.root}, shipped in {to}; skipped", err=True)
            return "skipped"
        if not quiet:
            typer.echo(f"{rid}: not in {store.root} ({e}); skipped", err=True)
        return "waiting"
    if run.status != "finished":
        if run.status == "failed" or not quiet:
            typer.echo(f"{rid}: {run.status}; skipped", err=True)
        return "skipped" if run.status == "failed" else "waiting"
    try:  # one process analyses and ships a run: a second `ship` beside it waits instead of repeating the work
        lock = store.lock(rid, doing="shipped").acquire()
    except RunLocked as e:
        if not quiet:
            typer.echo(f"{e}; skipped", err=True)
        return "waiting"

    def analyse(names: Optional[list[str]]) -> None:
        suite = dict(n_boot=n_boot, max_examples=max_examples, tables=names, log=lambda msg: typer.echo(msg, err=True))
        try:
            run_suite(run, device=device, **suite)
        except RuntimeError as e:  # e.g. out of GPU memory beside the sweep: the CPU still ships the run
            if device == "cpu":
                raise
            typer.secho(f"{rid}: the analysis on {device} failed ({str(e).splitlines()[0][:200]}); "
                        "again on the CPU", fg=typer.colors.YELLOW, err=True)
            run_suite(run, **suite)

    outcome = "unchanged"
    with lock:
        try:
            check_replacement(run, to, replace)  # before the analyses: a refused run is not analysed for nothing
            if analyze:
                analyse(tables)
            if is_shipped(run, to):
                typer.echo(f"{rid}: shipped already, unchanged")
            else:
                ship_run(run, to, allow_dirty=allow_dirty, replace=replace)
                typer.echo(f"{rid}: shipped to {Path(to) / rid}")
                outcome = "shipped"
            if then_tables:  # the first ship is whole: a kill from here on costs only these tables
                analyse(then_tables)
                if not is_shipped(run, to):
                    ship_run(run, to, allow_dirty=allow_dirty, replace=replace)
                    typer.echo(f"{rid}: shipped again, with {', '.join(then_tables)}")
                    outcome = "shipped"
        except StoreError as e:
            typer.secho(f"error: {e}", fg=typer.colors.RED, err=True)
            return "failed"
    return outcome


def bundle_cmd(
    results: Path = typer.Argument(..., exists=True, file_okay=False,
                                   help="a shipped results store, e.g. results/repro"),
) -> None:
    """One-off: convert a shipped store made before tables were bundled (tables/*.parquet per run) to one
    tables.parquet per run, in place, each run all or nothing (every table is checked to read back equal first).
    Running it again finishes an interrupted conversion."""
    from workbench.store import StoreError
    from workbench.store.ship import bundle_shipped

    try:
        before, after = bundle_shipped(results, log=typer.echo)
    except StoreError as e:
        _fail(str(e))
    typer.echo(f"tables: {before / 1e6:.2f} MB -> {after / 1e6:.2f} MB")


def compare_cmd(
    results: Path = typer.Argument(..., exists=True, file_okay=False, help="a results store, e.g. results/repro"),
    out: Optional[Path] = typer.Option(None, "--out", help="default: RESULTS/COMPARISON.md"),
    grid: Optional[List[Path]] = typer.Option(None, "--grid",
                                              help="the grids whose unfinished points are listed as pending "
                                                   "(repeatable; default: grids/paper.toml for a store of `paper`-"
                                                   f"preset runs, else {', '.join(PENDING_GRIDS)})"),
    readme: Optional[Path] = typer.Option(None, "--readme", exists=True, dir_okay=False,
                                          help="also fill this file's <!-- findings:start/end --> block"),
    figure: Optional[Path] = typer.Option(None, "--figure", help="also export the Table 1 figure (png/svg/pdf; "
                                          "needs chromium) and show it in the --readme block"),
    study_figure: Optional[Path] = typer.Option(None, "--study-figure", help="also export the seed study's map "
                                                "(layer x run; png/svg/pdf; needs chromium) and show it in the "
                                                "--readme block"),
    paper: Optional[Path] = typer.Option(None, "--paper", help="the paper-scale (GPU) results store for the "
                                         "'at paper scale' column (default: paper/ beside RESULTS, e.g. "
                                         "results/paper)"),
) -> None:
    """Write COMPARISON.md (Table 1, the paper's claims with verdicts, scale, provenance) from shipped tables."""
    from workbench.analysis.claims import base_claims, run_table, table1
    from workbench.report.comparison import pending_points, readme_block, replace_block, write_comparison
    from workbench.store import RunStore, atomic_write_text
    from workbench.analysis.settings import reproduction_grid
    from workbench.train.presets import LADDER

    rel = _compare_outputs(results, readme, figure, study_figure)  # every option checked before anything is written
    if paper is not None and not paper.is_dir():
        raise ValueError(f"--paper {paper}: not a folder; pass the paper-scale results store, e.g. results/paper")
    store = RunStore(results, readonly=True)
    runs = run_table(store)
    if runs.empty:
        raise ValueError(f"{results} holds no finished run to compare: pass a results store of shipped runs, e.g. "
                         "results/repro (`workbench ship` fills one)")
    judged = base_claims(store, runs, LADDER)  # once, for COMPARISON.md and the README block
    if not grid:  # results/paper's grid is the paper-scale one: the CPU grids' points would all read pending there
        grid = [Path(reproduction_grid(judged.base))] if judged.base == "paper" else [Path(g) for g in PENDING_GRIDS]
    pending = [line for g in grid if g.is_file() for line in pending_points(store, g)] or None
    path = write_comparison(store, out or results / "COMPARISON.md", pending=pending, paper_root=paper,
                            judged=judged)
    typer.echo(f"wrote {path}")
    if figure is not None or study_figure is not None:
        from workbench.figures import FIGURES
        from workbench.figures.export import write_figure

        if figure is not None:
            from workbench.report.paper_scale import with_paper_scale_table1
            from workbench.store import paper_root

            t1 = with_paper_scale_table1(table1(judged.runs), paper_root(results) if paper is None else paper)
            write_figure(FIGURES["table1"](t1), figure, width=1100, height=480)
            typer.echo(f"wrote {figure}")
        if study_figure is not None:
            write_figure(FIGURES["study_map"](judged.study), study_figure, width=1100, height=420)
            typer.echo(f"wrote {study_figure}")
    if readme is not None:
        block = readme_block(store, rel["figure"], rel["results"], judged, study_figure=rel["study_figure"])
        atomic_write_text(readme, replace_block(readme.read_text(), block))
        typer.echo(f"updated the findings block of {readme}")


def _compare_outputs(results: Path, readme: Optional[Path], figure: Optional[Path],
                     study_figure: Optional[Path]) -> dict[str, Optional[str]]:
    """`compare`'s outputs checked before anything is written (ValueError saying what to change): each figure's
    format; with --readme, its findings block, and the results store and figures in its folder or below (the block
    links them relative to it). Returns those links {results, figure, study_figure} (None without --readme)."""
    from workbench.figures.export import export_format
    from workbench.report.comparison import replace_block

    for p in (figure, study_figure):
        if p is not None:
            export_format(p)
    if readme is None:
        return {"results": None, "figure": None, "study_figure": None}
    replace_block(readme.read_text(), "")  # ValueError when it has no findings block
    here, rel = readme.resolve().parent, {}
    for name, p in (("results", results), ("figure", figure), ("study_figure", study_figure)):
        try:
            rel[name] = None if p is None else Path(p).resolve().relative_to(here).as_posix()
        except ValueError:
            raise ValueError(f"--readme {readme}: its findings block links {p} relative to the README, so it must be "
                             f"in {here} or below; put the README above it (or write the {name.replace('_', ' ')} "
                             "there)") from None
    return rel


def recreate_cmd(
    run_id: str = typer.Argument(..., help="a shipped run id (see COMPARISON.md, or `workbench runs`: rows with "
                                           "source shipped)"),
    shipped: Optional[Path] = typer.Option(None, "--shipped", help=SHIPPED_HELP),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="default: the shipped run's thread count"),
    retrain: bool = typer.Option(False, "--retrain", help="delete your copy of the run first and train it again"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
    root: Optional[Path] = typer.Option(None, "--root", help=ROOT_HELP),
) -> None:
    """Re-train a shipped run from its config.json into your store (weights included; same run id; the shipped
    analysis tables are copied to it when every metric agrees with the shipped ones). A CPU run trained at a
    lower SIMD level than this machine's (AVX2 here on AVX-512) is re-trained with ATen's kernels held to that
    level (ATEN_CPU_CAPABILITY), as it was trained."""
    from workbench.store import RunStore, StoreError

    from workbench.train.loop import check_threads

    src_store = _shipped(shipped)
    try:
        src_store.get(run_id)  # an unknown id (or thread count) is refused before your store is made
        check_threads(threads)
    except (StoreError, ValueError) as e:
        _fail(str(e))
    own = RunStore(root)
    say_created(own)
    run = _recreate(src_store, own, run_id, threads, quiet, retrain)
    typer.echo(f"{run.id}: {run.status}, test accuracy {run.final.get('test_acc', float('nan')):.4f} in {own.root}")


def _recreate(shipped_store, own, run_id: str, threads: Optional[int], quiet: bool, retrain: bool = False,
              on_epoch=None):
    """`workbench.train.recreate.recreate` with the CLI's progress bar (its StoreError becomes `error: ...`), after
    `numerics_note` where it will train (what of the shipped run's numerics differs here: another trajectory)."""
    from workbench.train.recreate import numerics_note, recreate

    if retrain or not own.exists(run_id) or own.get(run_id).status != "finished":
        note = numerics_note(shipped_store.get(run_id).info, threads)
        if note:
            typer.echo(note, err=True)
    return recreate(shipped_store, own, run_id, threads=threads, progress=not quiet, retrain=retrain,
                    on_epoch=on_epoch, say=lambda line: typer.echo(line, err=True))


def verify_cmd(
    run_ids: Optional[List[str]] = typer.Argument(None, help="shipped run ids (or --sample K)"),
    sample: Optional[int] = typer.Option(None, "--sample", min=1,
                                         help="also verify K shipped finished runs drawn at random (--seed)"),
    seed: int = typer.Option(0, "--seed", help="the draw of --sample (printed, so another machine draws the same)"),
    shipped: Optional[Path] = typer.Option(None, "--shipped", help=SHIPPED_HELP),
    tol: float = typer.Option(1e-4, "--tol", min=0.0, help="largest accepted |difference| of any metric"),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="default: the shipped run's thread count"),
    tables: str = typer.Option("all", "--tables",
                               help="shipped analysis tables to recompute from the re-run's weights and compare: "
                                    "'all' (every table the run was shipped with), comma-separated names (e.g. "
                                    "ablation,deposit,probes,head_summary), or 'none' (the metrics only)"),
    stale: Optional[str] = typer.Option(None, "--stale", metavar="TABLES",
                                        help="also every shipped run whose TABLES (comma-separated, or 'all') were "
                                             "made before their analysis changed its numbers (reproduce.CHANGES), "
                                             "of those this machine may re-train bit for bit (trained on a CPU of "
                                             "its vendor, at a SIMD level it reaches), shortest training first"),
    shard: Optional[str] = typer.Option(None, "--shard", metavar="I/N",
                                        help="with --stale: only every N-th of them from the I-th (0-based: I = 0..N-1), for N "
                                             "processes side by side"),
    refresh: bool = typer.Option(False, "--refresh",
                                 help="where a re-training's metrics equal the shipped ones at every epoch, ship the "
                                      "tables recomputed from its weights in place of those made before their "
                                      "analysis changed (run.json `refreshed` records it); needs a committed tree. "
                                      "A re-training is stopped at its first epoch before the last that is not "
                                      "the shipped run's (it cannot refresh anything)"),
    epochs: Optional[int] = typer.Option(None, "--epochs", min=1,
                                         help="re-train only the first N epochs and compare them with the shipped "
                                              "ones bit for bit: in minutes, whether this machine reproduces the "
                                              "shipped floats (no verdict on the run, no table compared; the copy "
                                              "is left for a later verify to train on)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
    root: Optional[Path] = typer.Option(None, "--root", help=ROOT_HELP),
) -> None:
    """Re-train shipped runs (or use your re-created copies, once their weights and metrics check out), compare
    every epoch's metrics with the shipped ones, then recompute each run's shipped analysis tables from the re-run's
    weights (--tables: head ablations, deposits, patching, probes, DLA, the head summary, ...) and compare them too.
    Several runs: one after another, then a line each.

    Where the recorded numerics (torch, SIMD level, CPU vendor, BLAS / MKL / oneDNN, threads) match: verified when
    every metric agrees within --tol ("bit-identical" when equal) and every recomputed table equals the shipped one
    (at its float32 precision, or within --tol), but a table made before its analysis changed its numbers
    (workbench.analysis.reproduce.CHANGES), which is compared and said, not judged. Where they differ, the re-run is
    judged by one rule (workbench.analysis.reproduce.RULE) and its tables are compared but not judged (other
    weights). Exit 0 when every run is verified, 1 otherwise.

    --refresh: where the metrics are bit-identical, the tables made before a change of their analysis are replaced
    in the shipped store by the recomputed ones (`workbench compare` then regenerates COMPARISON.md);
    `--stale --refresh` does it for every such run this machine may re-train bit for bit, and resumes (a refreshed
    run is stale no more). With --refresh a re-training is stopped at its first epoch before the last whose metrics
    are not the shipped ones (its weights cannot be the shipped run's): said, neither verified nor refuted.

    --epochs N: only the first N epochs, each compared bit for bit, stopping at the first that differs; exit 0 when
    all N are the shipped ones (`verify --sample 5 --epochs 1`: does this machine reproduce the shipped floats?)."""
    from workbench.analysis.reproduce import recheck_names
    from workbench.store import RunStore, StoreError
    from workbench.store.runstore import code_version
    from workbench.train.recreate import gpu_needed

    try:
        names = recheck_names(tables)  # bad input is refused before anything trains
        part = parse_shard(shard) if shard else None
        wanted = recheck_names(stale) if stale else None
    except ValueError as e:
        _fail(str(e))
    if stale is not None and not wanted:
        _fail(f"--stale {stale!r}: name the tables whose stale copies to select, e.g. --stale probes (or all)")
    if shard and not stale:
        _fail("--shard I/N splits the runs --stale selects; add --stale")
    if epochs and refresh:
        _fail("--epochs re-trains only the first epochs, whose weights no table is made from: drop --epochs or "
              "--refresh")
    if refresh and code_version().endswith("-dirty"):
        _fail(f"--refresh records the code that made each table, and this tree has uncommitted changes "
              f"({code_version()}): commit or stash them first (or run it from a clean checkout)")
    src_store = _shipped(shipped)
    ids = list(dict.fromkeys(run_ids or []))
    for rid in ids:  # every named run checked before the first trains (or your store is made): a typo, a damaged
        try:         # or a GPU run costs nothing
            why = gpu_needed(src_store.get(rid).info, rid)
        except StoreError as e:
            _fail(str(e))
        if why:
            _fail(f"run {rid!r}: cannot re-check it here: {why}")
    if sample:
        ids += [rid for rid in _draw(src_store, sample, seed, bit_for_bit=bool(epochs)) if rid not in ids]
    if stale:
        ids += [rid for rid in _stale_ids(src_store, wanted, part) if rid not in ids]
    if not ids:
        if stale:
            typer.echo(f"no shipped run of {src_store.root} left whose {stale} tables were made before their "
                       "analysis changed and that this machine may re-train bit for bit")
            return
        _fail("name a shipped run id (`workbench runs` lists them: source shipped) or draw some with --sample K")
    own = RunStore(root)
    say_created(own)
    verdicts = {}
    for i, rid in enumerate(ids, 1):
        if len(ids) > 1:
            typer.echo(f"-- {rid} ({i} of {len(ids)}, {time.strftime('%H:%M:%S')})")
        try:
            verdicts[rid] = _verify_one(src_store, own, rid, tol, threads, names, quiet, refresh, epochs)
        except StoreError as e:  # e.g. your store holds a plain copy of it: said, and the next run goes on
            if len(ids) == 1:
                raise
            typer.secho(f"{rid}: NOT verified: {e}", fg=typer.colors.RED, err=True)
            verdicts[rid] = False
    if len(ids) > 1:
        first = sum(v == "epochs" for v in verdicts.values())
        stat = sum(v == "statistical" for v in verdicts.values())
        typer.echo(f"{sum(v is True for v in verdicts.values())} of {len(ids)} runs verified"
                   + (f", {stat} reproduced statistically" if stat else "")
                   + (f", {first} with their first epochs bit-identical" if first else "") + "".join(
            f"\n  {rid}: {_VERDICT[ok]}" for rid, ok in verdicts.items()))
    if not all(verdicts.values()):
        raise typer.Exit(1)


def _draw(src_store, sample: int, seed: int, bit_for_bit: bool) -> list[str]:
    """`verify --sample K`: K finished shipped runs drawn at random (`seed`, said) from those this machine can
    re-train: its CPU runs, or with `bit_for_bit` (--epochs) those it may re-train bit for bit (a run of another CPU
    vendor could only say "no"); the draw and the pool it came from are printed."""
    import random

    from workbench.store import finished_runs

    finished = finished_runs(src_store)[0]
    if not finished:
        _fail(f"no finished shipped run in {src_store.root} to draw from: pass a results store of shipped runs "
              "with --shipped, e.g. results/repro")
    fit, cpu, left = _here(finished)
    pool = sorted(r.id for r in (fit if bit_for_bit else cpu))
    if not pool:
        _fail(f"none of the finished runs of {src_store.root} can be re-trained "
              f"{'bit for bit ' if bit_for_bit else ''}on this machine (left out: {', '.join(left)})")
    drawn = random.Random(seed).sample(pool, min(sample, len(pool)))
    gpu = len(finished) - len(cpu)
    what = (f"the {len(pool)} finished runs of {src_store.root} this machine may re-train bit for bit"
            + (f" (left out: {', '.join(left)})" if left else "") if bit_for_bit else
            f"the {len(pool)} finished runs of {src_store.root} this machine can re-train"
            + (f" ({len(fit)} of them bit for bit; the others, of another CPU vendor or SIMD level, are judged "
               "by the statistical rule)" if len(fit) < len(pool) else "")
            + (f" ({gpu} trained on a GPU left out: no CUDA GPU here)" if gpu else ""))
    typer.echo(f"drawn with --seed {seed} from {what}: {', '.join(drawn)}")
    return drawn


_VERDICT = {True: "verified", False: "NOT verified", None: "stopped: off the shipped trajectory, not judged",
            "epochs": "its first epochs bit-identical, not judged whole",
            "statistical": "reproduced statistically (other numerics: its floats and tables are not the shipped ones)"}


def _here(runs) -> tuple[list, list, list[str]]:
    """(the runs this machine may re-train bit for bit: CPU runs of its vendor at a SIMD level it reaches, the CPU
    runs, what was left out of the first and why: "2 trained on a GPU", "164 on another CPU vendor", ...)."""
    from workbench.train.recreate import gpu_needed, simd_beyond, vendor_differs

    gpu = [r for r in runs if gpu_needed(r.info, r.id)]
    cpu = [r for r in runs if r not in gpu]
    vendor = [r for r in cpu if vendor_differs(r.info)]
    simd = [r for r in cpu if r not in vendor and simd_beyond(r.info)]
    fit = [r for r in cpu if r not in vendor and r not in simd]
    left = [f"{len(gpu)} trained on a GPU"] * bool(gpu) + [f"{len(vendor)} on another CPU vendor"] * bool(vendor) + [
        f"{len(simd)} at a SIMD level above this machine's"] * bool(simd)
    return fit, cpu, left


def _stale_ids(src_store, tables: list[str], part: Optional[tuple[int, int]]) -> list[str]:
    """`--stale TABLES`: the finished shipped runs with one of `tables` made before its analysis changed
    (`stale_tables`) that this machine may re-train bit for bit (a CPU run, trained on a CPU of this machine's
    vendor at a SIMD level it reaches), shortest recorded training first; every N-th from the I-th with `part`
    (I, N). Says how many, and how many were left out and why."""
    from workbench.analysis.reproduce import stale_tables
    from workbench.store import finished_runs

    runs = [r for r in finished_runs(src_store)[0] if set(stale_tables(r)) & set(tables)]
    fit, _, left = _here(runs)
    fit = sorted(fit, key=lambda r: (float(r.info.get("wall_time_s") or 0), r.id))
    ids = [r.id for r in fit][part[0]::part[1]] if part else [r.id for r in fit]
    which = "a table" if len(tables) > 1 else f"a {tables[0]} table"
    typer.echo(f"{len(runs)} shipped runs of {src_store.root} hold {which} made before its analysis changed; "
               f"{len(fit)} may be re-trained here bit for bit" + (f", {len(ids)} of them in shard {part[0]}/{part[1]}"
                                                                  if part else "")
               + (f" (left out: {', '.join(left)})" if left else ""))
    return ids


def _verify_one(src_store, own, run_id: str, tol: float, threads: Optional[int], names: list[str],
                quiet: bool, refresh: bool = False, epochs: Optional[int] = None) -> bool | str | None:
    """`workbench verify` of one shipped run (see verify_cmd); prints what it compared and its verdict line, and
    returns whether it is verified (True; "statistical": reproduced by the stated rule on other numerics).
    `refresh`: where the metrics are bit-identical, the recomputed tables replace those made before their analysis
    changed, in the shipped store (`store.ship.refresh_tables`); a re-training
    that leaves the shipped trajectory before its last epoch is stopped there (`stop_at_first_difference`), None.
    `epochs`: only the first N epochs, bit for bit, no table and no verdict (`_first_epochs`)."""
    from workbench.analysis.reproduce import RULE, rerun_verdict
    from workbench.store.run import numerics_differences, recorded_numerics, same_training
    from workbench.train.recreate import (first_difference, last_epoch, metric_differences, said_difference,
                                          simd_hold, stop_at_first_difference)

    src = src_store.get(run_id)  # a damaged shipped run is refused here, naming the file
    retrain, before = False, None
    if own.exists(run_id):
        mine = own.get(run_id)
        if mine.status == "finished" and mine.has_weights and "shipped" not in mine.info:
            problems = mine.trust_problems()
            if problems:  # never trust what was not checked: train it again instead
                typer.secho(f"{run_id}: your copy in {own.root} does not check out ({'; '.join(problems)}); "
                            "re-training it", fg=typer.colors.YELLOW, err=True)
                retrain = True
            else:
                before = mine.info.get("finished")
    shipped_rows = src.metric_rows()  # read once: the epoch checks and the comparison below
    last = last_epoch(shipped_rows)
    if epochs:  # N at or past the run's epochs: all of them, bit for bit, still no table and no verdict
        return _first_epochs(src_store, own, src, shipped_rows, epochs, threads, quiet, retrain)
    check = stop_at_first_difference(shipped_rows) if refresh else None
    copy = own.get(run_id) if check and own.exists(run_id) and not retrain else None
    if copy is not None and copy.status not in ("finished", "running"):  # not trained on once off the trajectory
        off = first_difference(shipped_rows, [r for r in copy.metric_rows() if int(r["epoch"]) < last])
        if off:
            return _not_refreshable(run_id, own, f"{said_difference(off, last)}: your copy left the shipped run's "
                                                 "trajectory there, its weights cannot be the shipped ones")
    run = _recreate(src_store, own, run_id, threads, quiet, retrain, on_epoch=check)
    if check and run.status == "interrupted":
        return _not_refreshable(run_id, own, str(run.info.get("error") or "stopped"))
    problems = run.trust_problems()
    if problems:  # cannot happen for a training just made; a safeguard, never "verified" unchecked
        typer.secho(f"{run_id}: NOT verified: the re-run's files do not check out: {'; '.join(problems)}",
                    fg=typer.colors.RED, err=True)
        return False
    how = f"your re-training of {before} in {own.root}" if before else "a re-training just now"
    identical = same_training(shipped_rows, run.metric_rows())  # every shipped field of every epoch, timings aside
    diff = metric_differences(shipped_rows, run.metric_rows())
    worst = max(diff.values()) if diff else math.inf
    for key, d in diff.items():
        typer.echo(f"{key}: max |shipped - re-run| = {d:.3g}")
    differs = numerics_differences(recorded_numerics(src.info), recorded_numerics(run.info))
    unrecorded = [key for key, (was, _) in differs.items() if was is None]
    for key, (was, now) in differs.items():
        if was is not None:
            typer.echo(f"numerics differ: {key}: shipped {was!r}, re-run {now!r}")
    if unrecorded:  # not a difference shown: the shipped run predates the record (identical floats say they matched)
        typer.echo(f"numerics the shipped run did not record (trained before run.json recorded them): "
                   f"{', '.join(f'{k} (re-run {differs[k][1]!r})' for k in unrecorded)}")
    if before and "cpu_capability" in differs and simd_hold(src.info):
        typer.echo(f"(your copy was trained at {differs['cpu_capability'][1]}: `workbench recreate {run_id} --retrain` "
                   "re-trains it with ATen held to the shipped run's level, where its floats can be the shipped ones)")
    if worst <= tol:
        agree = "bit-identical" if identical else f"within {tol}"
        wrong, said, stale = _recheck_tables(src, run, names, tol, judged=True)
        if wrong:
            typer.secho(f"{run_id}: NOT verified: the metrics agree ({agree}), but the shipped {_and(wrong)} "
                        f"table{'s are' if len(wrong) > 1 else ' is'} not what the re-trained weights give ({how})",
                        fg=typer.colors.RED, err=True)
            return False
        typer.echo(f"{run_id}: verified ({agree}; {how}{said})")
        if refresh:
            _refresh(src_store, src, run, stale, bit_identical=identical)
        return True
    if not differs:
        typer.secho(f"{run_id}: NOT verified: the recorded numerics match, yet the largest difference is "
                    f"{worst:.3g} > {tol} ({how})", fg=typer.colors.RED, err=True)
        return False
    verdict = rerun_verdict(src_store, src, run)
    typer.echo(f"the numerics differ ({', '.join(differs)}), so the floats cannot be bit-identical; rule: {RULE}")
    if verdict["ok"]:
        _recheck_tables(src, run, names, tol, judged=False)
        if refresh:
            typer.echo(f"{run_id}: not refreshed: the re-training ran on other numerics, so its weights are not the "
                       "shipped run's")
        typer.echo(f"{run_id}: reproduced statistically: {verdict['why']} ({how})")
        return "statistical"
    typer.secho(f"{run_id}: NOT verified: {verdict['why']} ({how})", fg=typer.colors.RED, err=True)
    return False


def _first_epochs(src_store, own, src, shipped: list[dict], epochs: int, threads: Optional[int], quiet: bool,
                  retrain: bool) -> str | None:
    """`verify --epochs N` of one run (`shipped`: its metric rows): its first N epochs from your copy where it has
    them (or already left the shipped trajectory), else re-trained (`stop_at_first_difference(..., upto=N)`, left to
    resume), each compared with the shipped one; "epochs" when all are bit-identical, None (not judged) at the first
    that is not."""
    from workbench.store.run import machine_identity, numerics_differences, recorded_numerics
    from workbench.train.recreate import (first_difference, last_epoch, numerics_here, said_difference,
                                          stop_at_first_difference)

    last = last_epoch(shipped)
    epochs = min(epochs, last)
    copy = own.get(src.id) if own.exists(src.id) and not retrain else None
    if copy is not None and "shipped" not in copy.info:  # a copy trained elsewhere says nothing of this machine
        # its recorded numerics against those a re-training here runs at (the shipped level held), and its CPU
        other = {k: was for k, (was, _) in numerics_differences(recorded_numerics(copy.info),
                                                                 numerics_here(src.info, threads)).items()}
        cpu = (copy.info.get("machine") or {}).get("cpu")
        if cpu != machine_identity()["cpu"]:
            other["cpu"] = cpu
        if other or copy.metrics_changed():
            typer.secho(f"{src.id}: your copy in {own.root} was not trained on this machine as it is now ("
                        + (", ".join(f"{k} {v}" for k, v in other.items()) or "its metrics changed after training")
                        + f"), so its epochs say nothing of this machine's floats; `workbench recreate {src.id} "
                        "--retrain` trains it here first", fg=typer.colors.YELLOW, err=True)
            return None
    plain = copy is not None and "shipped" in copy.info  # a copy of the shipped folder: `_recreate` refuses it
    rows = copy.metric_rows()[:epochs] if copy is not None and copy.status != "running" and not plain else []
    how = f"your copy in {own.root}"
    if len(rows) < epochs and first_difference(shipped, rows) is None:
        run = _recreate(src_store, own, src.id, threads, quiet, retrain,
                        on_epoch=stop_at_first_difference(shipped, epochs))
        rows, how = run.metric_rows()[:epochs], f"re-trained just now into {own.root}"
    off = first_difference(shipped, rows)
    if off:
        took = src.info.get("cpu_time_s") or src.info.get("wall_time_s")
        cost = f" (a whole re-training: {float(took) / 60:.0f} CPU-min when shipped)" if took else ""
        typer.secho(f"{src.id}: {said_difference(off, last)} ({how}): this machine's numerics are not the "
                    f"ones it was trained with, so it cannot re-train it bit for bit; `workbench verify {src.id} "
                    f"--root {own.root}` without --epochs trains it on{cost} and judges it by the statistical rule "
                    "(at best: reproduced statistically, its floats and tables not the shipped ones)",
                    fg=typer.colors.YELLOW, err=True)
        return None
    first = "its first epoch" if len(rows) == 1 else f"its first {len(rows)} epochs"
    typer.echo(f"{src.id}: {first} of {last} {'is' if len(rows) == 1 else 'are'} the shipped run's bit for "
               f"bit ({how}): this machine reproduces its floats so far; not judged whole (`workbench verify "
               f"{src.id} --root {own.root}` trains it on from there and judges it)")
    return "epochs"


def _not_refreshable(run_id: str, own, why: str) -> None:
    """`verify --refresh` of a re-training stopped at its first epoch that is not the shipped run's (`why`): said,
    neither verified nor refuted (None), and how to have it judged."""
    typer.secho(f"{run_id}: not refreshed and not judged: {why} (this machine's numerics are not the ones it was "
                f"trained with); `workbench verify {run_id} --root {own.root}` without --refresh trains it on from "
                "there and judges it by the statistical rule", fg=typer.colors.YELLOW, err=True)
    return None


def _refresh(src_store, src, run, stale: dict, bit_identical: bool) -> None:
    """`verify --refresh` of one verified run: the recomputed tables `stale` ({name: (table, provenance)}) replace
    the shipped ones (`store.ship.refresh_tables`, with `reproduce.refresh_record`), only where the re-training's
    metrics equal the shipped ones at every epoch (its weights are then the shipped run's)."""
    from workbench.analysis.reproduce import refresh_record
    from workbench.store.ship import refresh_tables

    if not stale:
        typer.echo(f"{src.id}: nothing to refresh (no re-checked table was made before its analysis changed)")
        return
    if not bit_identical:
        typer.echo(f"{src.id}: not refreshed: its metrics agree within --tol, not bit for bit, so its weights may "
                   "not be the shipped run's")
        return
    names = list(stale)
    threads = int(stale[names[0]][1]["numerics"]["threads"])
    record = refresh_record(src, run, names, threads)
    refresh_tables(src_store.root, src.id, {n: t for n, (t, _) in stale.items()},
                   {n: p for n, (_, p) in stale.items()}, record)
    typer.echo(f"{src.id}: refreshed {_and(names)} in {src_store.root} (made before {', '.join(record['changes'])}); "
               "`workbench compare` regenerates COMPARISON.md from them")


def _recheck_tables(src, run, names: list[str], tol: float, judged: bool) -> tuple[list[str], str, dict]:
    """Recompute the shipped tables `names` from `run`'s weights (`reproduce.recompute_tables`, in memory) and print
    how each compares with the shipped one (a deposit table with its sentence too); `judged`: the weights are the
    shipped run's (its metrics agree), so a table must agree (equal at float32, or within `tol`), unless it was made
    before its analysis changed (`reproduce.made_before`: compared and said). Returns (the tables that do not agree
    when judged, the clause the verdict line adds, {name: (recomputed table, its provenance)} of those made before
    their analysis changed)."""
    from workbench.analysis import deposit_sentence
    from workbench.analysis.reproduce import as_shipped, made_before, recompute_tables, said_changes, table_agreement

    have = set(src.tables())
    absent = [n for n in names if n not in have]
    if absent:
        typer.echo(f"not shipped with this run, not re-checked: {', '.join(absent)}")
    names = [n for n in names if n in have]
    if not names:
        return [], "", {}
    mine, params, made = recompute_tables(run, src, names)
    how = (f"bootstrap {params['n_boot']} on {params['max_examples']} test examples, as shipped; "
           f"{params['threads']} thread{'s' if params['threads'] > 1 else ''}")
    wrong, equal, older, stale = [], [], [], {}
    for n in names:
        if n not in mine:
            typer.echo(f"{n}: not applicable to the re-run; not re-checked")
            continue
        shipped_table = src.load_table(n)
        a = table_agreement(shipped_table, mine[n])
        ok = a["equal"] or a["max_abs"] <= tol
        change = made_before(n, src)
        if change:
            stale[n] = (mine[n], made[n])
        if not judged:
            verdict = "not judged: the weights differ with the numerics"
        elif change and not ok:
            verdict = f"not judged: made before {said_changes(n, change)}"
        else:
            verdict = "agrees" if ok else "DIFFERS"
        typer.echo(f"{n}: recomputed from the re-run's weights ({how}): {a['why']}; {verdict}")
        if n.startswith("deposit"):
            was, now = deposit_sentence(shipped_table), deposit_sentence(as_shipped(mine[n]))
            typer.echo(f"  {'the same sentence' if was == now else 'shipped'}: {was}"
                       + ("" if was == now else f"\n  recomputed: {now}"))
        (equal if ok else older if change else wrong).append(n)
    said = ""
    if equal and not wrong:
        which = _and(equal) if len(equal) <= 3 else f"{len(equal)} re-checked"
        said = (f"; its {which} table{'s' if len(equal) > 1 else ''} recomputed from its weights "
                f"agree{'' if len(equal) > 1 else 's'} with the shipped one{'s' if len(equal) > 1 else ''}"
                + (f" ({_and(older)} made by an earlier analysis: compared, not judged)" if older else ""))
    return (wrong if judged else []), said, stale


def _and(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def check_cmd(
    results: Path = typer.Argument(Path("results/repro"), help="a shipped results store"),
    write_missing: bool = typer.Option(False, "--write-missing", help="write a manifest for each run that has none "
                                       "(runs shipped before manifests), recording its files as they are now"),
) -> None:
    """Check every shipped run's files against its manifest.json (sha256 of each shipped file). Exit 1 naming each
    run whose files changed since it was shipped (or that has no manifest), 0 when all match."""
    from workbench.store.manifest import check_store

    if not results.is_dir():
        _fail(f"{results}: not a folder; pass a shipped results store, e.g. results/repro")
    bad, ids = check_store(results, write_missing=write_missing)
    if not ids and not bad:
        inner = sorted(p for p in results.iterdir() if p.is_dir() and check_store(p)[1])
        _fail(f"no shipped run in {results}" + (f"; did you mean {' or '.join(map(str, inner))}?" if inner else
                                                  ": pass a shipped results store, e.g. results/repro"))
    for rid, problems in bad.items():
        for p in problems:
            typer.secho(f"{rid}: {p}", fg=typer.colors.RED, err=True)
    if bad:
        typer.secho(f"{len(bad)} of {len(ids)} shipped runs in {results} differ from their manifest; restore them "
                    f"from where they came (for the project's own results: `git checkout -- {results}`) or ship "
                    "them again", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    typer.echo(f"{len(ids)} shipped runs in {results}: every file matches its manifest")


def register(app: typer.Typer) -> None:
    app.command("ship")(ship_cmd)
    app.command("compare")(compare_cmd)
    app.command("bundle")(bundle_cmd)
    app.command("recreate")(recreate_cmd)
    app.command("verify")(verify_cmd)
    app.command("check")(check_cmd)
