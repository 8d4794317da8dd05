"""Deposit statistics (docs/paper.md §5), computed from an ablation table alone.

Per layer l and metric, with importance_h = delta_h for accuracy (= -delta_h for loss, so that positive
always means "the head matters"):

    concentration C_l = max_h importance_h / sum_h max(importance_h, 0)   (1: one head carries it all; 1/H: uniform;
                                                                          NaN when no head has a positive delta)
    single-head deposit: top >= min_delta, top >= ratio * second, and the paired bootstrap interval of
                         (top - second) lies above 0 (the ablation table's layer_gap_lo > 0)
    average deposit:     sum_h importance_h >= min_sum and no single-head deposit

The thresholds are parameters (defaults 0.05, 3, 0.05 as in the spec).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .common import NotApplicable, exact, scheme_label, tag, task_label

SHOWN_COLUMNS = ["layer", "pattern", "concentration", "top_head", "top_delta", "top_lo", "top_hi", "second_head",
                 "second_delta", "gap", "gap_lo", "gap_hi", "sum_delta"]  # what the report and the Ablation page show


def shown_table(stats: pd.DataFrame) -> pd.DataFrame:
    """The deposit table as shown (the report, the dashboard's Ablation page): SHOWN_COLUMNS, those present."""
    return stats[[c for c in SHOWN_COLUMNS if c in stats.columns]]


def compute(ablation: pd.DataFrame, metric: str = "accuracy", min_delta: float = 0.05, ratio: float = 3.0,
            min_sum: float = 0.05) -> pd.DataFrame:
    """One row per (layer, mode) of the ablation table for `metric` (see docs/analyses.md)."""
    if ablation is None or len(ablation) == 0:
        raise NotApplicable("deposit statistics need a head-ablation table; run the `ablation` analysis first")
    need = {"layer", "head", "metric", "delta"}
    missing = need - set(ablation.columns)
    if missing:
        raise ValueError(f"not an ablation table: columns {sorted(missing)} are missing")
    df = ablation[ablation["metric"] == metric]
    if df.empty:
        raise ValueError(f"the ablation table has no rows for metric={metric!r}; "
                         f"it has {sorted(ablation['metric'].unique())}")
    sign = 1.0 if metric == "accuracy" else -1.0
    if "mode" not in df.columns:
        df = df.assign(mode="zero")
    rows = []
    for (layer, mode), sub in df.groupby(["layer", "mode"], sort=True):
        sub = sub.assign(_imp=sign * sub["delta"]).sort_values(["_imp", "head"], ascending=[False, True])
        imp = sub["_imp"].to_numpy()
        top = sub.iloc[0]
        second = sub.iloc[1] if len(sub) > 1 else None
        second_imp = float(imp[1]) if len(imp) > 1 else 0.0
        pos_sum = float(np.clip(imp, 0, None).sum())
        conc = float(imp[0] / pos_sum) if pos_sum > 0 else float("nan")
        gap = float(imp[0] - second_imp)
        gap_lo = float(top.get("layer_gap_lo", np.nan))
        gap_hi = float(top.get("layer_gap_hi", np.nan))
        # the table's gap is for another top/second pair (should not happen); compared at the float32 precision
        # tables are shipped in (store.bundle): top, second and gap each rounded there differ by a few 1e-8
        if "layer_gap" in sub.columns and not np.isnan(top["layer_gap"]) \
                and not np.isclose(top["layer_gap"], gap, rtol=1e-6, atol=1e-6):
            gap_lo = gap_hi = float("nan")
        lo, hi = sign * top.get("ci_lo", np.nan), sign * top.get("ci_hi", np.nan)
        # thresholds read as written (>=) on the counts the drops stand for (`exact`), float64 or shipped float32
        single = bool(exact(imp[0]) >= min_delta and exact(imp[0] - ratio * second_imp) >= 0 and gap_lo > 0)
        total = float(imp.sum())
        average = bool(exact(total) >= min_sum and not single)
        rows.append({
            "layer": int(layer), "metric": metric, "mode": mode, "n_heads": len(sub),
            "concentration": conc,
            "top_head": int(top["head"]), "top_delta": float(imp[0]),
            "top_lo": float(min(lo, hi)), "top_hi": float(max(lo, hi)),
            "second_head": None if second is None else int(second["head"]), "second_delta": second_imp,
            "gap": gap, "gap_lo": gap_lo, "gap_hi": gap_hi,
            "sum_delta": total, "sum_pos_delta": pos_sum,
            "single_head_deposit": single, "average_deposit": average,
            "pattern": "single-head" if single else ("average" if average else "none"),
            "min_delta": min_delta, "ratio": ratio, "min_sum": min_sum,
        })
    out = pd.DataFrame(rows)
    for key in ("task", "scheme", "run_id"):
        if key in ablation.columns and ablation[key].nunique(dropna=False) == 1:
            out.insert(0, key, ablation[key].iloc[0])
    return out


def run(run, table: str = "ablation", compute_missing: bool = True, **params) -> pd.DataFrame:
    """Deposit table of a run from its stored ablation table (computing that first if it is missing), stored as
    `deposit` for the zero-ablation table `ablation`, and `deposit_<mode>` for `ablation_<mode>`."""
    if table in _tables(run):
        abl = run.load_table(table)
    elif compute_missing:
        from . import ablation as _ablation

        mode = next((m for m in _ablation.MODES if _ablation.table_name(m) == table), None)
        if mode is None:
            raise ValueError(f"table={table!r} is not an ablation table: use one of "
                             f"{[_ablation.table_name(m) for m in _ablation.MODES]}")
        from . import ANALYSES

        abl = ANALYSES["ablation"](run, mode=mode)  # the missing table in its own mode, with its own parameters
    else:
        raise NotApplicable(f"run {run.id} has no {table!r} table; run `workbench analyze {run.id} --what ablation`")
    df = compute(abl, **params)
    df = tag(df, run)
    run.save_table("deposit" + table[len("ablation"):] if table.startswith("ablation") else "deposit", df)
    return df


def _tables(run) -> list[str]:
    try:
        return list(run.tables())
    except Exception:
        return []


def _fmt(x: float) -> str:
    return f"{x:.2f}"


def deposit_sentence(deposit: pd.DataFrame, scheme: str | None = None, task: str | None = None,
                     mode: str | None = None) -> str:
    """One sentence, e.g. "RoPE, Task 1: single-head deposit at layer 1, head 7, delta 0.41 [0.39, 0.43]".

    Layers and heads are 0-based (as in the hook names). Several deposits are joined with "; "; a table
    without any gives "... : no deposit"."""
    if scheme is None and "scheme" in deposit.columns and len(deposit):
        scheme = deposit["scheme"].iloc[0]
    if task is None and "task" in deposit.columns and len(deposit):
        task = deposit["task"].iloc[0]
    prefix = ", ".join(p for p in (scheme_label(scheme), task_label(task)) if p)
    df = deposit if mode is None else deposit[deposit["mode"] == mode]
    df = df.sort_values("layer")
    parts = []
    single = df[df["single_head_deposit"]]
    for _, r in single.iterrows():
        parts.append(f"single-head deposit at layer {int(r.layer)}, head {int(r.top_head)}, "
                     f"delta {_fmt(r.top_delta)} [{_fmt(r.top_lo)}, {_fmt(r.top_hi)}]")
    avg = df[df["average_deposit"]]
    if len(avg):
        layers = ", ".join(str(int(l)) for l in avg["layer"])
        sums = ", ".join(_fmt(s) for s in avg["sum_delta"])
        word = "layer" if len(avg) == 1 else "layers"
        parts.append(f"average deposit at {word} {layers} (summed delta {sums})")
    body = "; ".join(parts) if parts else "no deposit"
    return f"{prefix}: {body}" if prefix else body
