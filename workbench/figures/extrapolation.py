"""Length extrapolation: accuracy and loss vs the longest test length (seed 002), with chance and the best
length-only predictor as baselines (the table's `chance` / `length_only` columns)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis._common import task_label
from workbench.figures import style as S


def add_accuracy_baselines(fig: go.Figure, d: pd.DataFrame, x: str, row: int, col: int) -> None:
    """Chance (a horizontal line) and the length-only ceiling (per x value, mean over the runs that share it)
    of the rows `d` in panel (row, col); columns `chance`, `length_only` when the table has them."""
    lo, hi = float(d[x].min()), float(d[x].max())
    if "chance" in d.columns and d["chance"].notna().any():
        c = float(d["chance"].mean())
        S.add_baseline(fig, c, "chance", (lo, hi), label=f"chance (1/{round(1 / c)})", row=row, col=col)
    if "length_only" in d.columns and d["length_only"].notna().any():
        lengthonly = d.groupby(x)["length_only"].mean().dropna()
        y = float(lengthonly.iloc[0]) if lengthonly.nunique() == 1 else list(lengthonly.values)
        xs = (lo, hi) if lengthonly.nunique() == 1 else list(lengthonly.index)
        S.add_baseline(fig, y, "length-only", xs, label="best length-only predictor", row=row, col=col)


def extrapolation(df: pd.DataFrame) -> go.Figure:
    """One column per task (tasks have different lengths), accuracy (top, with intervals) and loss (bottom)
    vs the longest sequence of each split: 2 traces per run in the scheme's colour, plus chance and the
    length-only predictor per task; the dashed vertical line is the task's training length."""
    d = df.copy()
    if "run_id" not in d.columns:
        d["run_id"] = "run"
    if "task" not in d.columns:
        d["task"] = None
    labels = S.run_labels(d) if d["run_id"].nunique() > 1 else {}
    tasks = S.tasks_of(d)
    fig = make_subplots(rows=2, cols=len(tasks), shared_xaxes="columns", vertical_spacing=0.1,
                        horizontal_spacing=0.1, row_heights=[0.62, 0.38],
                        subplot_titles=[task_label(t) or "accuracy" for t in tasks] + [""] * len(tasks))
    for c, task in enumerate(tasks, 1):
        dt = d[d["task"].isna()] if task is None else d[d["task"] == task]
        for rid, sub in dt.groupby("run_id", sort=False):
            sub = sub.sort_values("max_len")
            scheme = sub["scheme"].iloc[0] if "scheme" in sub.columns else None
            name = labels.get(rid) or S.scheme_label(scheme)
            color = S.scheme_color(scheme)
            err = None
            if "acc_lo" in sub.columns:
                err = dict(type="data", symmetric=False, array=sub["acc_hi"] - sub["accuracy"],
                           arrayminus=sub["accuracy"] - sub["acc_lo"], thickness=1)
            fig.add_trace(go.Scatter(x=sub["max_len"], y=sub["accuracy"], mode="lines+markers", name=name,
                                     legendgroup=str(rid), line=dict(color=color), text=sub["split"], error_y=err,
                                     hovertemplate="%{text}: longest %{x}<br>accuracy %{y:.3f}<extra>" + name
                                                   + "</extra>"), row=1, col=c)
            fig.add_trace(go.Scatter(x=sub["max_len"], y=sub["loss"], mode="lines+markers", name=name,
                                     legendgroup=str(rid), showlegend=False, line=dict(color=color, dash="dot"),
                                     text=sub["split"], hovertemplate="%{text}: longest %{x}<br>loss %{y:.3f}<extra>"
                                                                      + name + "</extra>"), row=2, col=c)
        add_accuracy_baselines(fig, dt, "max_len", 1, c)
        if "train_len" in dt.columns and len(dt):
            for r in (1, 2):
                fig.add_vline(x=float(dt["train_len"].iloc[0]), line_dash="dash", line_color="gray", row=r, col=c)
        fig.update_xaxes(title_text="longest sequence of the split (tokens)", row=2, col=c)
        fig.update_yaxes(title_text="accuracy" if c == 1 else "", range=[0, 1.02], row=1, col=c)
        fig.update_yaxes(title_text="loss" if c == 1 else "", row=2, col=c)
    return S.layout(fig, S.title_for(df, "Length extrapolation (dashed vertical line: training length)"), height=560)


FIGURES = {
    "extrapolation": extrapolation,
}
