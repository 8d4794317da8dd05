"""The paper-scale column of COMPARISON.md and the Findings page's paper-scale card: Table 1 and the claims at the
`paper` preset (the runs shipped to results/paper by `make repro-gpu`, grids/paper.toml) beside the CPU
reproduction's, or "not run yet".

    t1 = with_paper_scale_table1(table1(runs), "results/paper")    # + `paper_scale` (text per row), its numbers
    cl = with_paper_scale_claims(claims(store, runs), "results/paper")   # + column `paper_scale` (verdict)
    note = paper_scale_note("results/paper")                      # one markdown paragraph: status + command
    rows = paper_scale_table1(table1(runs), paper_root(store.root))  # paper_root: workbench.store   # the page's rows trained at paper scale
    dep = paper_scale_deposits("results/paper")                  # where each paper-scale run's deposit falls

Cells are computed from the paper store's runs with the same functions as the CPU column (`claims.run_table`,
`claims.table1`, `claims.claims`), matched on (setting, scheme, task) and on the claim's text and setting.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from workbench.analysis.common import tuples
from workbench.analysis.claims import TESTS, accuracy_text
from workbench.store import paper_store

NOT_RUN = "not run yet"
PAPER = "paper"  # the preset of the paper's own scale (grids/paper.toml)
COMMAND = "make repro-gpu TIER=1"


_RUNS: dict[tuple[str, str], tuple] = {}  # (root, its contents stamp) -> (store, run table): the last root only


def at_scale(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of a paper-scale store its cells pool: those of the `paper` preset (where there are none, the most
    common preset), the registered seed study's left out (`claims.is_study`), as the CPU column pools the base
    preset's runs only (`claims.base_claims`): a `smoke` run shipped beside them is never averaged in."""
    from workbench.analysis.claims import is_study

    presets = runs["preset"].dropna() if "preset" in runs else pd.Series([], dtype=object)
    keep = PAPER if presets.empty or (presets == PAPER).any() else str(presets.value_counts().index[0])
    return runs[(runs["preset"] == keep) & ~is_study(runs)] if len(runs) else runs


def paper_runs(root: str | Path):
    """(the read-only store at `root`, its `claims.run_table`), or (None, None) without a finished run: what every
    paper-scale cell below is computed from. The run table is read once per state of the store
    (`RunStore.contents_stamp`), not once per cell family (the Findings page and COMPARISON.md ask for four)."""
    from workbench.analysis.claims import run_table

    store = paper_store(root)
    if store is None:
        return None, None
    key = (str(store.root.resolve()), store.contents_stamp())
    if key not in _RUNS:
        _RUNS.clear()
        _RUNS[key] = (store, at_scale(run_table(store)))
    cached, runs = _RUNS[key]
    return cached, runs.copy()  # callers may add columns; the cache stays as it is


def with_paper_scale_table1(t1: pd.DataFrame, root: str | Path) -> pd.DataFrame:
    """`t1` (claims.table1 of the CPU runs) with a `paper_scale` column: the paper-preset test accuracy
    (mean and seed range, in %) of the same (setting, scheme, task), "no run" where that row was not trained at paper
    scale, NOT_RUN everywhere when `root` holds no finished run; and the numbers behind it for the Table 1 figure's
    paper-scale marks (`figures.findings.table1`): `paper_scale_mean`, `paper_scale_n_seeds` (NaN where no run),
    `paper_scale_seeds` and `paper_scale_status` (claims.table1's, "" where no run)."""
    from workbench.analysis.claims import table1

    out = t1.copy()
    store, runs = paper_runs(root)
    paper = None if store is None else table1(runs).set_index(["setting", "scheme", "task"])
    rows = [paper.loc[k] if paper is not None and k in paper.index else None
            for k in zip(out.setting, out.scheme, out.task)]
    out["paper_scale"] = NOT_RUN if paper is None else [accuracy_text(r) if r is not None else "no run" for r in rows]
    for col, none in (("mean", np.nan), ("n_seeds", np.nan), ("seeds", ""), ("status", "")):
        out[f"paper_scale_{col}"] = [none if r is None else r[col] for r in rows]
    return out


def paper_scale_deposits(root: str | Path) -> pd.DataFrame:
    """Where each paper-scale run puts its largest single-head deposit (`analysis.findings.deposit_map` of the runs
    in `root`), for the same figure as the CPU runs'; empty without a finished paper-scale run."""
    from workbench.analysis.findings import DEPOSIT_COLUMNS, deposit_map

    store, runs = paper_runs(root)
    return pd.DataFrame(columns=DEPOSIT_COLUMNS) if store is None else deposit_map(store, runs)


def paper_scale_table1(t1: pd.DataFrame, root: str | Path) -> pd.DataFrame:
    """Table 1's rows trained at paper scale (the runs in `root`), for the Findings page: the paper's accuracy, the
    CPU reproduction's mean of the same (setting, scheme, task) in `t1` (`cpu_mean`; NaN where none), the
    paper-scale mean with its seeds' range (or one run's Wilson interval), its seeds and what its runs can show
    (`claims.table1`'s `status`). Empty without a finished paper-scale run."""
    from workbench.analysis.claims import table1

    cols = ["setting", "scheme", "task", "paper", "cpu_mean", "mean", "lo", "hi", "n_seeds", "status", "runs"]
    store, runs = paper_runs(root)
    if store is None:
        return pd.DataFrame(columns=cols)
    out = table1(runs)
    cpu = t1.set_index(["setting", "scheme", "task"])["mean"]
    out["cpu_mean"] = [cpu.get(k, np.nan) for k in zip(out.setting, out.scheme, out.task)]
    return out[cols]


def cell_phrase(r) -> str:
    """One row of `paper_scale_table1` in a phrase: scheme, task and setting, the mean in % with what its seeds can
    show (`status`, which counts them), beside the paper's number and the CPU reproduction's mean."""
    from workbench.analysis.common import scheme_label, task_label
    from workbench.analysis.settings import SETTINGS

    r = r._asdict() if hasattr(r, "_asdict") else dict(r)  # an itertuples row or a Series (whose .mean is a method)
    cpu = "no CPU run" if pd.isna(r["cpu_mean"]) else f"CPU repro {100 * r['cpu_mean']:.2f} %"
    where = f"{scheme_label(r['scheme'])} {task_label(r['task'])} ({SETTINGS.get(r['setting'], r['setting'])})"
    return f"{where} {100 * r['mean']:.2f} % ({r['status']}; the paper {100 * r['paper']:.2f} %, {cpu})"


def paper_scale_sentence(rows: pd.DataFrame) -> str:
    """`paper_scale_table1`'s rows (not empty) as one sentence: how many GPU runs, what differs, each cell's
    `cell_phrase`; the README block, the report and the Findings page say it alike."""
    n = len(set().union(*rows["runs"]))
    return (f"At the paper's own scale ({n} GPU run{'s' if n != 1 else ''} in results/paper, the `paper` preset: the "
            "paper's model and data with the authors' settings, fewer seeds; a run still learning cannot settle a "
            "claim): " + "; ".join(cell_phrase(r) for r in tuples(rows)) + ".")


def paper_scale_lines(t1: pd.DataFrame, root: str | Path) -> list[str]:
    """The README block's paragraph on the paper's own scale (`paper_scale_sentence`), or nothing without a
    finished paper-scale run (COMPARISON.md's column says "not run yet" and how)."""
    rows = paper_scale_table1(t1, root)
    return [] if rows.empty else [paper_scale_sentence(rows), ""]


def paper_scale_cell(r) -> str:
    """One claim row at paper scale as a cell: its verdict, "(few runs)" under the registered minimum, and its
    evidence (a verdict alone, e.g. "mixed" from four seeds, would not say how little it rests on)."""
    few = " (few runs)" if getattr(r, "few_runs", False) and r.verdict in TESTS else ""
    return f"{r.verdict}{few}: {r.evidence}" if r.evidence else f"{r.verdict}{few}"


def with_paper_scale_claims(cl: pd.DataFrame, root: str | Path) -> pd.DataFrame:
    """`cl` (claims.claims of the CPU store) with a `paper_scale` column: the same claim in the same setting at
    paper scale (`paper_scale_cell`; "–" where the paper store has no such claim row), NOT_RUN when there are no
    runs."""
    from workbench.analysis.claims import claims

    out = cl.copy()
    store, runs = paper_runs(root)
    if store is None:
        out["paper_scale"] = NOT_RUN
        return out
    cells = {(r.claim, r.setting): paper_scale_cell(r) for r in tuples(claims(store, runs))}
    out["paper_scale"] = [cells.get(k, "–") for k in zip(out.claim, out.setting)]
    return out


def paper_scale_note(root: str | Path | None, label: str | None = None) -> str:
    """A paragraph for COMPARISON.md: how many paper-scale runs the column rests on, or how to produce them;
    `label` names the folder in the text (default: `root` as given); "" without a `root` (`paper_root`: the store
    judged is the paper-scale one)."""
    if root is None:
        return ""
    store = paper_store(root)
    label = label or Path(root).as_posix()
    if store is None:
        return (f"Paper scale (`paper` preset: 6 layers, d_model 256, 16 heads, 100 / 150 epochs): {NOT_RUN}. "
                f"On a machine with a CUDA GPU, `{COMMAND}` trains tier 1 of grids/paper.toml (72 runs), ships it "
                f"to {label} and fills this column; its cost is in docs/training.md "
                "(\"The paper-scale reproduction\").\n")
    runs = store.query(status="finished")
    hours = float(np.nansum(runs["wall_time_s"].to_numpy(dtype=float))) / 3600 if "wall_time_s" in runs else np.nan
    plural = "" if len(runs) == 1 else "s"
    return (f"Paper scale: {len(runs)} finished `paper`-preset run{plural} in {label} "
            f"({hours:.1f} GPU-hours of training, sum of the runs' wall times).\n")
