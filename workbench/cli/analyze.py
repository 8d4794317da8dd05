"""CLI: `workbench analyze RUN_ID [RUN_ID...] --what ablation,qk-means,... | --all`."""
from __future__ import annotations

import time
from pathlib import Path
from typing import List, Optional

import typer

from .options import ROOT_HELP, existing_root, fail
# CLI name -> ANALYSES key, in the order they run (deposit right after ablation: it reads its table)
# (attribution after patching: it checks itself against patching's table; head-summary last: it joins the
# per-head tables stored before it)
NAMES = {"ablation": "ablation", "deposit": "deposit", "qk-means": "qk_means", "angles": "angles",
         "spectral": "spectral", "distance-bias": "distance_bias", "extrapolation": "extrapolation",
         "resample": "ablation_resample", "patching": "patching", "attribution": "attribution", "edges": "edges",
         "qkv": "qkv", "probes": "probes",
         "trigger-attention": "trigger_attention", "dla": "dla", "self-repair": "self_repair",
         "head-summary": "head_summary"}


def parse_what(what: Optional[str], all_: bool) -> list[str]:
    """CLI names (comma separated, '-' or '_') -> ANALYSES keys in run order; ablation brings deposit along."""
    if all_ and what:
        fail(f"--what {what} and --all contradict each other: --all runs every analysis; drop one")
    if all_:
        return list(NAMES.values())
    if not what:
        fail(f"say what to run: --what {','.join(NAMES)} (any subset) or --all")
    keys = set()
    for part in what.split(","):
        name = part.strip().replace("_", "-")
        if not name:
            continue
        if name not in NAMES:
            fail(f"unknown analysis {part.strip()!r}; choose from {', '.join(NAMES)}")
        keys.add(NAMES[name])
    if not keys:
        fail(f"--what {what!r} names no analysis: --what {','.join(NAMES)} (any subset) or --all")
    if "ablation" in keys:
        keys.add("deposit")
    return [k for k in NAMES.values() if k in keys]


def plan(keys: list[str], mode: str, has_table) -> list[str]:
    """The analyses to run on one run (`has_table`: its Run.has_table): `deposit` brings `ablation` along when the
    ablation table it reads (of --mode) is not stored, so that table gets this command's --n-boot, --max-examples
    and --seed; with --mode resample, `ablation` stores ablation_resample itself and `resample` is not run again."""
    from workbench.analysis.ablation import table_name

    if "deposit" in keys and "ablation" not in keys and not has_table(table_name(mode)):
        keys = ["ablation", *keys]
    if mode == "resample" and "ablation" in keys:
        keys = [k for k in keys if k != "ablation_resample"]
    return keys


SEED_FIELDS = ("train.seed", "model.seed", "task.seed")  # what seeds of one configuration differ in


def check_aggregate(runs: list, keys: list[str]) -> None:
    """`--aggregate` pools the ablation tables of seeds of one configuration: exit 2 (before any work) unless
    `ablation` is asked for, of two distinct runs or more, whose configs are equal but for SEED_FIELDS."""
    from workbench.store import flat_config

    if "ablation" not in keys:
        fail("--aggregate pools the runs' ablation tables: add ablation to --what")
    ids = [r.id for r in runs]
    if len(set(ids)) < 2 or len(set(ids)) < len(ids):
        fail(f"--aggregate pools the ablation tables of seeds of one configuration: give two runs or more, each "
              f"once (got {' '.join(ids)})")
    flat = [flat_config(r.config) for r in runs]  # a field added since one was stored: its default
    differ = {k: [str(f.get(k, "(absent)")) for f in flat] for k in sorted(set().union(*flat) - set(SEED_FIELDS))}
    differ = {k: v for k, v in differ.items() if len(set(v)) > 1}
    if differ:
        fail("--aggregate pools seeds of one configuration, and these runs differ in " +
              "; ".join(f"{k} ({' / '.join(dict.fromkeys(v))})" for k, v in differ.items()) +
              ": analyze them without --aggregate, or pool runs that differ in their seeds only")


def _metrics_damage(run) -> str | None:
    """Why the run's training record cannot be read (a damaged metrics.jsonl: `Run.check`), None when it can."""
    from workbench.store import StoreError

    try:
        run.check()
    except StoreError as e:
        return str(e)
    return None


def _params(*, mode, n_boot, seed, max_examples, n_pairs, ig_steps, grad_drop, measure, min_agree,
            dla_measure) -> dict[str, dict]:
    """Each analysis's keyword arguments from `analyze`'s options."""
    from workbench.analysis.ablation import table_name

    return {
        "ablation": dict(mode=mode, n_boot=n_boot, seed=seed, max_examples=max_examples),
        "deposit": dict(table=table_name(mode)),
        "qk_means": dict(seed=seed), "angles": dict(seed=seed), "spectral": dict(seed=seed),
        "distance_bias": dict(seed=seed),
        "extrapolation": dict(n_boot=n_boot, seed=seed, max_examples=max_examples),
        "ablation_resample": dict(n_boot=n_boot, seed=seed, max_examples=max_examples),
        "patching": dict(n_pairs=n_pairs, n_boot=n_boot, seed=seed),
        "attribution": dict(n_pairs=n_pairs, n_boot=n_boot, seed=seed, ig_steps=ig_steps, grad_drop=grad_drop),
        "edges": dict(n_pairs=n_pairs, n_boot=n_boot, seed=seed, ig_steps=ig_steps),
        "qkv": dict(n_pairs=n_pairs, n_boot=n_boot, seed=seed),
        "probes": dict(seed=seed), "trigger_attention": dict(n_boot=n_boot, seed=seed),
        "dla": dict(n_boot=n_boot, seed=seed, n_examples=max_examples),
        "self_repair": dict(mode=mode, n_boot=n_boot, seed=seed, measure=measure,
                            **({"n_examples": max_examples} if max_examples else {})),
        "head_summary": dict(min_agree=min_agree, dla_measure=dla_measure),
    }


def _analyze_run(console, run, keys: list[str], params: dict[str, dict]):
    """Run `keys` on one run, saving each table with it, and print a table of what each did (its title: what the
    run can show by the registered run rules) and the deposit sentence, qualified as the run is read. Returns
    (its ablation table or None, its reading, whether an analysis did not apply, whether one failed)."""
    from rich.markup import escape
    from rich.table import Table

    from workbench.analysis import ANALYSES, SUMMARIES, NotApplicable, deposit_sentence
    from workbench.analysis.claims import as_read, reading_of

    reading = reading_of(run)  # what it can show by the registered run rules (`as_read`)
    damaged = None if reading else _metrics_damage(run)
    shows = (f" ({reading['status']}: {reading['why']})" if reading else
             f" (cannot tell whether it learned: {damaged})" if damaged else "")
    if run.status != "finished":  # e.g. a run a sweep is training: its tables are of the last checkpoint
        info = run.info
        console.print(f"[yellow]note: {run.id} is {run.status} (epoch {info.get('epoch') or 0} of "
                      f"{run.config['train']['epochs']}): its tables are of that checkpoint, and are made again "
                      "from the final weights only by analysing it once it has finished[/]")
    table = Table(title=f"{run.id}{shows}", show_lines=False)
    for col in ("analysis", "rows", "time", "summary"):
        table.add_column(col, overflow="fold")
    sentence = ablation = None
    missing = failed = False
    for key in keys:
        t0 = time.perf_counter()
        try:
            df = ANALYSES[key](run, **params[key])
        except NotApplicable as e:
            table.add_row(key, "-", "-", f"[yellow]not applicable: {escape(str(e))}[/]")
            missing = True
            continue
        except Exception as e:  # report and go on with the next analysis
            table.add_row(key, "-", "-", f"[red]failed: {type(e).__name__}: {escape(str(e))}[/]")
            failed = True
            continue
        dt = time.perf_counter() - t0
        if key == "deposit":
            sentence = as_read(deposit_sentence(df), reading)
            if damaged:  # no reading: a damaged metrics.jsonl must not make the finding read as unqualified
                sentence = f"cannot tell whether the run learned ({damaged}): {sentence}"
        table.add_row(key, str(len(df)), f"{dt:.1f}s",  # the summary as text, never rich markup ("[resample]")
                      escape(sentence if key == "deposit" else SUMMARIES[key](df)))
        if key == "ablation":
            ablation = df
    console.print(table)
    if sentence:
        console.print(f"[bold]{sentence}[/]")
    return ablation, reading, missing, failed


def analyze_cmd(
    run_ids: List[str] = typer.Argument(..., help="one or more run ids (see `workbench runs`)"),
    what: Optional[str] = typer.Option(None, "--what", "-w",
                                       help=f"comma-separated subset of: {', '.join(NAMES)}"),
    all_: bool = typer.Option(False, "--all", help="every analysis (those a run cannot support are skipped)"),
    mode: str = typer.Option("zero", "--mode", help="ablation, self-repair: zero | mean | resample"),
    n_boot: int = typer.Option(1000, "--n-boot", min=1, help="bootstrap resamples for the intervals"),
    max_examples: Optional[int] = typer.Option(None, "--max-examples", min=1,
                                               help="ablation, extrapolation, dla: evaluate on at most this many "
                                                    "test examples (default: all; self-repair: 1000)"),
    seed: int = typer.Option(0, "--seed", min=0, help="seed of the sampling and the bootstrap"),
    n_pairs: int = typer.Option(256, "--n-pairs", min=2,
                                help="patching, attribution, edges, qkv: counterfactual pairs"),
    ig_steps: int = typer.Option(0, "--ig-steps", min=0, help="attribution, edges: average the gradient over this "
                                 "many points on the inputs' path from clean to counterfactual (AtP-IG / EAP-IG); "
                                 "0: the clean run's gradient (AtP / EAP)"),
    measure: str = typer.Option("runner_up", "--measure", help="self-repair: what is split, runner_up (the label's "
                                "logit minus the clean run's runner-up class's) | margin (minus the mean logit)"),
    grad_drop: bool = typer.Option(False, "--grad-drop", help="attribution: also the GradDrop score of every site "
                                   "(Kramár et al. 2024: |AtP| with each layer's gradient dropped in turn, averaged; "
                                   "L more backward passes)"),
    min_agree: int = typer.Option(2, "--min-agree", min=1,
                                  help="head-summary: methods that must agree on a deposit head"),
    dla_measure: str = typer.Option("runner_up", "--dla-measure", help="head-summary: the margin the dla vote reads, "
                                    "runner_up (the label's direct effect minus the runner-up class's) | mean (minus "
                                    "its mean over classes, as before 2026-11-28)"),
    aggregate: bool = typer.Option(False, "--aggregate", help="also pool the ablation tables of the given runs "
                                   "(seeds of one configuration: configs equal but for their seeds) and print the "
                                   "deposit sentence of the mean"),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: $PELAB_THREADS or torch's)"),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda"),
    root: Optional[Path] = typer.Option(None, "--root", help=ROOT_HELP),
) -> None:
    """Run analyses on stored runs, save each table with the run, and print a short summary.

    Exit status: 0 when everything asked for ran; 1 when an analysis failed; 3 when an analysis named in --what
    does not apply to a run. With --all, analyses a run cannot support are noted and skipped."""
    import torch
    from rich.console import Console

    from workbench.analysis import aggregate_seeds, deposit_sentence
    from workbench.analysis.claims import COUNTS
    from workbench.analysis import deposit as deposit_mod
    from workbench.analysis.ablation import MODES
    from workbench.analysis.head_summary import DLA_MEASURES
    from workbench.analysis.self_repair import MEASURES
    from workbench.store import RunStore

    from workbench.train.loop import check_threads, pick_device

    keys = parse_what(what, all_)
    for flag, value, allowed in (("--mode", mode, MODES), ("--measure", measure, MEASURES),
                                 ("--dla-measure", dla_measure, tuple(DLA_MEASURES))):
        if value not in allowed:
            fail(f"{flag} {value!r}: use {', '.join(allowed[:-1])} or {allowed[-1]}")
    device = str(pick_device(device))
    n_threads = check_threads(threads)
    if n_threads:
        torch.set_num_threads(n_threads)
    store = RunStore(existing_root(root), create=False)  # a mistyped --root is refused, never created
    runs = [store.get(run_id) for run_id in run_ids]  # every id resolved inside the store before any work
    if aggregate:
        check_aggregate(runs, keys)
    console = Console(width=160)
    params = _params(mode=mode, n_boot=n_boot, seed=seed, max_examples=max_examples, n_pairs=n_pairs,
                     ig_steps=ig_steps, grad_drop=grad_drop, measure=measure, min_agree=min_agree,
                     dla_measure=dla_measure)
    not_applicable = failed = False
    ablations, uncounted = [], []
    for run in runs:
        if device != "cpu":
            load = run.load_model
            run.load_model = lambda device_=device, load=load: load(device_)
        ablation, reading, missing, broke = _analyze_run(console, run, plan(keys, mode, run.has_table), params)
        not_applicable = not_applicable or (missing and not all_)
        failed = failed or broke
        if ablation is not None:
            ablations.append(ablation)
            if reading and reading["status"] not in COUNTS:
                uncounted.append(f"{run.id} {reading['status']}")
    if aggregate and len(ablations) > 1:
        agg = aggregate_seeds(ablations)
        dep = deposit_mod.compute(agg)
        note = (f" ({len(uncounted)} of them the registered run rules do not count: {'; '.join(uncounted)})"
                if uncounted else "")
        console.print(f"[bold]mean over {len(ablations)} runs{note}:[/] {deposit_sentence(dep)}")
    elif aggregate:
        typer.secho(f"no mean over runs: {len(ablations)} of the {len(runs)} runs' ablation tables computed, two "
                    "needed (see the tables above)", fg=typer.colors.YELLOW, err=True)
    if failed:
        raise typer.Exit(1)
    if not_applicable:
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze_cmd)
