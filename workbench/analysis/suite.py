"""Every analysis on one run, each table stored with the run: what a reproduction ships per run.

    run_suite(run)      ablation in every mode (+ its deposit table), then every other analysis of ANALYSES

Tables: `ablation` / `deposit` (zero), `ablation_mean` / `deposit_mean`, `ablation_resample` / `deposit_resample`
when the resample mode exists, and one table per other analysis. Analyses a run cannot support
(`NotApplicable`) are recorded as such and skipped; with `skip_existing` a table already stored is kept.
"""
from __future__ import annotations

import inspect
import time
from typing import Callable, Iterable

from . import ablation
from .common import NotApplicable


def _accepted(fn: Callable, offered: dict) -> dict:
    """The entries of `offered` that `fn` names as parameters."""
    params = inspect.signature(fn).parameters
    return {k: v for k, v in offered.items() if k in params}


def run_suite(run, n_boot: int = 1000, max_examples: int | None = None, seed: int = 0, skip_existing: bool = True,
              log: Callable[[str], None] = lambda msg: None, tables: Iterable[str] | None = None,
              device: str = "cpu", params: dict[str, dict] | None = None) -> dict[str, str]:
    """Run every analysis on `run` (only the `tables` named, when given); returns {table: "ran in Xs" | "kept" |
    "not applicable: ..." }. The head ablations run on `device` (one forward a head: 153 s for a paper-scale run
    on 8 CPU threads of the H100 machine); every other analysis on the CPU. `params`: {table: keyword arguments}
    for the analyses after the ablations, over the shared `seed`, `n_boot`, `max_examples` (e.g. a head summary's
    thresholds, as `workbench verify` reads them from a shipped one)."""
    from . import ANALYSES, COMPUTE

    done: dict[str, str] = {}
    have = set(run.tables())

    def step(table: str, fn: Callable[[], object]) -> None:
        if tables is not None and table not in tables:
            return
        if skip_existing and table in have:
            done[table] = "kept"
            return
        t0 = time.perf_counter()
        try:
            fn()
            done[table] = f"ran in {time.perf_counter() - t0:.1f}s"
        except NotApplicable as e:
            done[table] = f"not applicable: {e}"
        log(f"{run.id} {table}: {done[table]}")

    for mode in ablation.MODES:
        name = ablation.table_name(mode)
        step(name, lambda mode=mode: ANALYSES["ablation"](run, mode=mode, n_boot=n_boot, seed=seed,
                                                          max_examples=max_examples, device=device))
        dep_name = "deposit" + name[len("ablation"):]
        step(dep_name, lambda name=name: ANALYSES["deposit"](run, table=name))
    for key, fn in ANALYSES.items():
        if key.startswith(("ablation", "deposit")):  # every mode ran above
            continue
        kw = _accepted(COMPUTE.get(key, fn), {"seed": seed, "n_boot": n_boot, "max_examples": max_examples})
        kw.update((params or {}).get(key, {}))
        step(key, lambda fn=fn, kw=kw: fn(run, **kw))
    return done
