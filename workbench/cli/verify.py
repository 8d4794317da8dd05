"""CLI of re-checking the shipped results: `workbench recreate`, `workbench verify`.

    workbench recreate RUN_ID                              # re-train a shipped run into your store (same run id)
    workbench verify RUN_ID [RUN_ID ...] [--sample K]      # re-train, compare metrics and head ablations
    workbench verify --stale distance_bias --refresh --shipped results/repro   # re-make stale tables bit for bit
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import List, Optional

import typer

from .options import ROOT_HELP, fail, parse_shard, say_created

SHIPPED_HELP = "the shipped results store (default: $PELAB_SHIPPED, else results/repro of this checkout)"


def _shipped(path: Optional[Path]):
    from workbench.store import RunStore
    from workbench.store.stores import shipped_root

    root = shipped_root(path)
    if root is None or not Path(root).is_dir():
        fail(f"no shipped results store at {root or 'results/repro'}; pass --shipped DIR")
    return RunStore(root, readonly=True)


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
        fail(str(e))
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
    Several runs: one after another, then a line each. A CPU run trained at a lower SIMD level than this machine's
    is re-trained, and its tables re-checked, in a process with ATen held to that level (ATEN_CPU_CAPABILITY) and,
    from AVX2, OpenBLAS to that level's kernels (OPENBLAS_CORETYPE; the probes' ridge fits run on it).

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
        fail(str(e))
    if stale is not None and not wanted:
        fail(f"--stale {stale!r}: name the tables whose stale copies to select, e.g. --stale probes (or all)")
    if shard and not stale:
        fail("--shard I/N splits the runs --stale selects; add --stale")
    if epochs and refresh:
        fail("--epochs re-trains only the first epochs, whose weights no table is made from: drop --epochs or "
              "--refresh")
    if refresh and code_version().endswith("-dirty"):
        fail(f"--refresh records the code that made each table, and this tree has uncommitted changes "
              f"({code_version()}): commit or stash them first (or run it from a clean checkout)")
    src_store = _shipped(shipped)
    ids = list(dict.fromkeys(run_ids or []))
    for rid in ids:  # every named run checked before the first trains (or your store is made): a typo, a damaged
        try:         # or a GPU run costs nothing
            why = gpu_needed(src_store.get(rid).info, rid)
        except StoreError as e:
            fail(str(e))
        if why:
            fail(f"run {rid!r}: cannot re-check it here: {why}")
    if sample:
        ids += [rid for rid in _draw(src_store, sample, seed, bit_for_bit=bool(epochs)) if rid not in ids]
    if stale:
        ids += [rid for rid in _stale_ids(src_store, wanted, part) if rid not in ids]
    if not ids:
        if stale:
            typer.echo(f"no shipped run of {src_store.root} left whose {stale} tables were made before their "
                       "analysis changed and that this machine may re-train bit for bit")
            return
        fail("name a shipped run id (`workbench runs` lists them: source shipped) or draw some with --sample K")
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


_VERDICT = {True: "verified", False: "NOT verified", None: "stopped: off the shipped trajectory, not judged",
            "epochs": "its first epochs bit-identical, not judged whole",
            "statistical": "reproduced statistically (other numerics: its floats and tables are not the shipped ones)"}


def _draw(src_store, sample: int, seed: int, bit_for_bit: bool) -> list[str]:
    """`verify --sample K`: K finished shipped runs drawn at random (`seed`, said) from those this machine can
    re-train: its CPU runs, or with `bit_for_bit` (--epochs) those it may re-train bit for bit (a run of another CPU
    vendor could only say "no"); the draw and the pool it came from are printed."""
    import random

    from workbench.store import finished_runs

    finished = finished_runs(src_store)[0]
    if not finished:
        fail(f"no finished shipped run in {src_store.root} to draw from: pass a results store of shipped runs "
              "with --shipped, e.g. results/repro")
    fit, cpu, left = _here(finished)
    pool = sorted(r.id for r in (fit if bit_for_bit else cpu))
    if not pool:
        fail(f"none of the finished runs of {src_store.root} can be re-trained "
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
            unrecorded = [n for n in wrong if src.provenance_of(n) is None]
            if unrecorded:  # e.g. t2-nope-repro-paperdata-long-s43: tables made on an Intel Xeon, metrics on AMD
                many = len(unrecorded) > 1
                typer.echo(f"note: the shipped {_and(unrecorded)} table{'s record' if many else ' records'} no "
                           "maker (tables made before 2026-12-02 do not): one made on another machine (another "
                           "CPU vendor, or from a re-creation) differs in floats from this machine's on the same "
                           "weights, which this re-check cannot tell from a wrong table")
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
    from workbench.train.recreate import said_hold, simd_hold

    have = set(src.tables())
    absent = [n for n in names if n not in have]
    if absent:
        typer.echo(f"not shipped with this run, not re-checked: {', '.join(absent)}")
    names = [n for n in names if n in have]
    if not names:
        return [], "", {}
    held = simd_hold(src.info)  # trained at a lower SIMD level than this machine's: its tables re-made held too
    mine, params, made = recompute_tables(run, src, names, env=held)
    how = (f"bootstrap {params['n_boot']} on {params['max_examples']} test examples, as shipped; "
           f"{params['threads']} thread{'s' if params['threads'] > 1 else ''}"
           + (f"; {said_hold(held)}, as trained" if held else ""))
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


def register(app: typer.Typer) -> None:
    app.command("recreate")(recreate_cmd)
    app.command("verify")(verify_cmd)
