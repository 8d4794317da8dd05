"""Options every command shares: `--root` names the run store everywhere (old names stay as hidden aliases)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

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
    """`root` when it is None (the default store) or an existing folder; a reading command (runs, report) never
    creates a store at a mistyped path (ValueError, `error: ...`)."""
    if root is not None and not Path(root).is_dir():
        raise ValueError(f"{option} {root}: no run store there (not a folder); pass an existing store, or train "
                         "into it first (`workbench train --root ...`)")
    return root


def grid_points_of(grid: Path, tiers: Optional[list[int]]) -> list[dict]:
    """The grid's points in `tiers`; ValueError (`error: ...`, exit 2) when there are none: a sweep or ship of
    nothing is a mistake (a typo in --tier), not "0 runs" and exit 0."""
    from workbench.train.sweep import grid_points, load_grid

    g = load_grid(grid)
    points = grid_points(g, tiers)
    if not points:
        have = sorted({g.get("tier", 1)} | {v.get("tier", g.get("tier", 1)) for v in g.get("variants", [])})
        raise ValueError(f"{grid}: no grid points" + (f" in tier(s) {tiers}; the grid's tiers are {have}" if tiers
                                                      else "; it names no schemes or variants"))
    return points
