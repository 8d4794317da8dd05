"""CLI of the shipped reproduction: `workbench ship`, `workbench compare`, `workbench bundle`, `workbench check`
(re-training a shipped run to re-check it: `cli.verify`).

    workbench ship --grid grids/repro.toml --tier 1 --root runs-repro --to results/repro   # analyse + copy, no weights
    workbench ship --grid grids/ladder.toml --root runs-repro --to results/repro --follow 60   # beside a sweep
    workbench compare results/repro                        # writes results/repro/COMPARISON.md from its tables
    workbench bundle results/repro                         # one-off: tables/*.parquet -> tables.parquet per run
    workbench check [results/repro]                        # every shipped run's files against its manifest
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import List, Optional

import typer

from .options import ROOT_HELP, fail, parse_tiers

PENDING_GRIDS = ("grids/repro.toml", "grids/ladder.toml", "grids/study.toml")  # `compare` lists their unfinished runs

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
        fail(str(e))
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
            fail(why)
    # never creates the store: beside a sweep (`make repro`) it may not exist yet, and its runs are then waited for
    store = RunStore(root, create=False)
    try:
        check_destination(store.root, to)
    except StoreError as e:
        fail(str(e))
    shipped = RunStore(to, readonly=True) if Path(to).is_dir() else None  # runs shipped before this command
    if follow is None:  # a named run neither in the store nor shipped cannot finish while this command runs
        absent = [r for r in run_ids or [] if not store.exists(r) and not (shipped is not None and shipped.exists(r))]
        if absent:
            fail(f"no run {', '.join(absent)} in {store.root}" + (f" or {to}" if shipped else "") +
                  ": check the id (`workbench runs`), pass the store it is in with --root, or --follow SECONDS "
                  "beside the sweep that trains it")
    if grid is not None:
        from workbench.train.presets import resolve_config

        from .options import grid_points_of

        try:
            points = grid_points_of(grid, tiers, tags.split(",") if tags else None)
            ids = [store.run_id(resolve_config(**p)) for p in points]  # no data I/O
        except ValueError as e:
            fail(str(e))
        run_ids = list(dict.fromkeys(list(run_ids or []) + ids))
    if not run_ids:
        fail("name run ids or pass --grid GRID.toml")
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
        fail(f"{option} {tables!r}: {what}; known: {', '.join(sorted(known))}")
    return names


def _analysis_device(device: str) -> str:
    """`ship --device`, checked before anything is analysed (`loop.pick_device`: a device torch knows and this
    machine has)."""
    from workbench.train.loop import pick_device

    try:
        pick_device(device)
    except ValueError as e:
        fail(str(e))
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
        fail(str(e))
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
    pending = [line for g in grid if g.is_file() for line in pending_points(store, g, runs)] or None
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


def check_cmd(
    results: Path = typer.Argument(Path("results/repro"), help="a shipped results store"),
    write_missing: bool = typer.Option(False, "--write-missing", help="write a manifest for each run that has none "
                                       "(runs shipped before manifests), recording its files as they are now"),
) -> None:
    """Check every shipped run's files against its manifest.json (sha256 of each shipped file). Exit 1 naming each
    run whose files changed since it was shipped (or that has no manifest), 0 when all match."""
    from workbench.store.manifest import check_store

    if not results.is_dir():
        fail(f"{results}: not a folder; pass a shipped results store, e.g. results/repro")
    bad, ids = check_store(results, write_missing=write_missing)
    if not ids and not bad:
        inner = sorted(p for p in results.iterdir() if p.is_dir() and check_store(p)[1])
        fail(f"no shipped run in {results}" + (f"; did you mean {' or '.join(map(str, inner))}?" if inner else
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
    app.command("check")(check_cmd)
