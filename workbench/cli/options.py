"""Options every command shares: `--root` names the run store everywhere (old names stay as hidden aliases)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def fail(message: str, code: int = 2) -> None:
    """Print `error: message` to stderr and exit with `code` (2: bad input)."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


ROOT_HELP = "run store root (default: $PELAB_RUNS or ./runs)"
SHIPPED_HELP = ("read-only store of shipped results shown next to yours (default: $PELAB_SHIPPED, else results/repro "
                "when it exists)")


def root_option() -> Optional[Path]:
    return typer.Option(None, "--root", help=ROOT_HELP)


def alias_option(name: str) -> Optional[Path]:
    """A hidden old name of --root (e.g. `--store`, `--runs`)."""
    return typer.Option(None, name, hidden=True)


def pick_root(root: Optional[Path], alias: Optional[Path], alias_name: str) -> Optional[Path]:
    if root is not None and alias is not None and Path(root) != Path(alias):
        raise ValueError(f"--root {root} and {alias_name} {alias} name different stores; use --root only")
    return root if root is not None else alias


def existing_root(root: Optional[Path], option: str = "--root") -> Optional[Path]:
    """`root` when it is an existing folder, or None (the default ./runs, which may not exist yet: reading it
    creates nothing); a mistyped --root or $PELAB_RUNS is refused (ValueError, `error: ...`, exit 2). Only `train`,
    `sweep`, `recreate` and `verify` create a run store; every other command opens one with `create=False`."""
    import os

    if root is None and os.environ.get("PELAB_RUNS"):
        root, option = Path(os.environ["PELAB_RUNS"]), "$PELAB_RUNS"
        if not root.is_dir():
            raise ValueError(f"{option}={root}: no run store there (not a folder); fix or unset $PELAB_RUNS, or "
                             "train into it first (`workbench train ...` creates it)")
        return root
    if root is not None and not Path(root).is_dir():
        raise ValueError(f"{option} {root}: no run store there (not a folder); pass an existing store, or train "
                         "into it first (`workbench train --root ...`)")
    return root


def say_created(store) -> None:
    """Tell the user when a command made a new run store (train, sweep, recreate, verify)."""
    if getattr(store, "created", False):
        typer.secho(f"created the run store {store.root}", err=True)


def parse_shard(text: str) -> tuple[int, int]:
    """`--shard I/N` as (I, N) with 0 <= I < N (0-based, as a Slurm array's task id): the I-th of N processes
    side by side. ValueError saying what to write otherwise."""
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        i, n = -1, 0
    if not 0 <= i < n:
        raise ValueError(f"--shard {text!r}: write I/N with 0 <= I < N, e.g. 0/2 and 1/2 for two processes")
    return i, n


def parse_tiers(tier: Optional[str]) -> Optional[list[int]]:
    """`--tier 1` / `1,2` -> [1] / [1, 2]; None (no option) -> None (every tier). ValueError for anything else,
    `--tier ''` (an unset $TIER in a script) included: never read as "every tier"."""
    if tier is None:
        return None
    try:
        return [int(t) for t in tier.split(",")]
    except ValueError:
        raise ValueError(f"--tier {tier!r}: expected tier numbers, e.g. 1 or 1,2") from None


COMPILE_MODE_HELP = ("torch.compile's mode (implies --compile): default, reduce-overhead (CUDA graphs), max-autotune, "
                     "max-autotune-no-cudagraphs; run.json `compiled` records it")


SDPA_BACKEND_HELP = ("the SDPA backend tried first for the whole run (the others only where it cannot run a "
                     "call): flash_attention, efficient_attention, cudnn_attention, math, or triton (PE-Lab's "
                     "kernel for <= 128 unmasked positions; needs the triton package) (default: PyTorch's order); "
                     "the same attention with other kernels and rounding; run.json `sdpa_backend`")


def sdpa_backend_arg(name: Optional[str]) -> Optional[str]:
    """--sdpa-backend, checked (ValueError naming the backends) before anything is made."""
    from workbench.train.loop import sdpa_backend_context

    sdpa_backend_context(name)
    return name


def compile_arg(compile: bool, mode: Optional[str]) -> bool | str:
    """--compile / --compile-mode as `train`'s `compile`: the mode when given (ValueError on an unknown one), else
    the flag."""
    if mode is None:
        return compile
    from workbench.train.loop import compile_mode

    return compile_mode(mode)


def step_options(compile: bool, mode: Optional[str], sdpa_backend: Optional[str], checkpoint_every: int):
    """(compile, sdpa_backend) of `train` and `sweep`, each checked before anything is made (ValueError saying what
    to pass)."""
    if checkpoint_every < 1:
        raise ValueError(f"--checkpoint-every {checkpoint_every}: must be >= 1 (1: every epoch)")
    return compile_arg(compile, mode), sdpa_backend_arg(sdpa_backend)


def grid_points_of(grid: Path, tiers: Optional[list[int]], tags: Optional[list[str]] = None) -> list[dict]:
    """The grid's points in `tiers` (of the variants named `tags`, when given); ValueError (`error: ...`, exit 2)
    for a tag the grid lacks or when there are none: a sweep or ship of nothing is a mistake (a typo in --tier or
    --tags), not "0 runs" and exit 0."""
    from workbench.train.sweep import grid_points, load_grid

    g = load_grid(grid)
    points = grid_points(g, tiers)
    if tags is not None:
        known = {p["tag"] for p in points if p["tag"]}
        if not g.get("variants"):
            raise ValueError(f"{grid}: --tags selects [[variants]] by name, and this grid has none (its schemes run "
                             "untagged): leave out --tags")
        if set(tags) - known:
            raise ValueError(f"{grid}: no variant(s) {', '.join(map(repr, sorted(set(tags) - known)))}"
                             f"{f' in tier(s) {tiers}' if tiers else ''}; its variants: {', '.join(sorted(known))}")
        points = [p for p in points if p["tag"] in tags]
    if not points:
        have = sorted({g.get("tier", 1)} | {v.get("tier", g.get("tier", 1)) for v in g.get("variants", [])})
        raise ValueError(f"{grid}: no grid points" + (f" in tier(s) {tiers}; the grid's tiers are {have}" if tiers
                                                      else "; it names no schemes or variants"))
    return points
