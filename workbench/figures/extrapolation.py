"""Length extrapolation: accuracy and loss vs the longest test length (seed 002), with chance and the best
length-only predictor as baselines (the table's `chance` / `length_only` columns)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis.common import task_label
from workbench.figures import style as S


def add_accuracy_baselines(fig: go.Figure, d: pd.DataFrame, x: str, row: int, col: int) -> None:
    """Chance (a horizontal line) and the length-only ceiling (per x value, mean over the runs that share it)
    of the rows `d` in panel (row, col), in percent; columns `chance`, `length_only` (fractions) when the table has
    them."""
    lo, hi = float(d[x].min()), float(d[x].max())
    if "chance" in d.columns and d["chance"].notna().any():
        for c in sorted(d["chance"].dropna().round(9).unique()):  # one line per class count, never their mean
            S.add_baseline(fig, float(c), "chance", (lo, hi), label=f"chance (1/{round(1 / c)})", row=row, col=col,
                           percent=True)
    if "length_only" in d.columns and d["length_only"].notna().any():
        lengthonly = d.groupby(x)["length_only"].mean().dropna()
        y = float(lengthonly.iloc[0]) if lengthonly.nunique() == 1 else list(lengthonly.values)
        xs = (lo, hi) if lengthonly.nunique() == 1 else list(lengthonly.index)
        S.add_baseline(fig, y, "length-only", xs, label="best length-only predictor", row=row, col=col,
                       percent=True)


def is_length_split(split: str) -> bool:
    """The splits that differ only in length (test, len1.25x, ...): drawn as one line over length. Others
    (`shifted`: the trigger pair moved beyond the training length, as long as len2x) are points of their own."""
    return split == "test" or str(split).startswith("len")


def extrapolation(df: pd.DataFrame) -> go.Figure:
    """One column per task (tasks have different lengths), accuracy (top, in %, with intervals) and loss (bottom)
    vs the longest sequence of each split: per run a line through its length splits in the scheme's colour
    (runs of one scheme in a panel in lighter shades of it, each with its own legend entry) and its other
    splits (shifted) as open diamonds not joined to the line (2 traces per run, 4 with such splits), plus
    chance and the length-only predictor per task, and a legend key for the dotted loss lines (1 trace); the dashed
    vertical line is the task's training length."""
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
        scheme_of = dt.drop_duplicates("run_id").set_index("run_id")["scheme"] if "scheme" in dt.columns else None
        for rid, sub in dt.groupby("run_id", sort=False):
            sub = sub.sort_values("max_len")
            scheme = scheme_of[rid] if scheme_of is not None else None
            name = labels.get(rid) or S.scheme_label(scheme)
            same = [r for r in dict.fromkeys(dt["run_id"]) if scheme_of is None or scheme_of[r] == scheme]
            color = S.shade(S.scheme_color(scheme), same.index(rid), len(same))
            on_line = sub["split"].map(is_length_split).to_numpy()
            for part, mode, marker in ((sub[on_line], "lines+markers", {}),
                                       (sub[~on_line], "markers", dict(symbol="diamond-open", size=10))):
                if part.empty:
                    continue
                acc = S.percent(part["accuracy"])
                err = None
                if "acc_lo" in part.columns:
                    err = dict(type="data", symmetric=False, array=S.percent(part["acc_hi"]) - acc,
                               arrayminus=acc - S.percent(part["acc_lo"]), thickness=1)
                first = mode == "lines+markers"
                for r, y, values, hover, extra in ((1, "accuracy", acc, "%{y:" + S.PCT + "} %", dict(error_y=err)),
                                                   (2, "loss", part["loss"], "%{y:.3f}", {})):
                    fig.add_trace(go.Scatter(
                        x=part["max_len"], y=values, mode=mode, name=name, legendgroup=str(rid),
                        showlegend=first and r == 1, line=dict(color=color, dash="solid" if r == 1 else "dot"),
                        marker=dict(color=color, **marker), text=part["split"],
                        hovertemplate="%{text}: longest %{x}<br>" + y + " " + hover + "<extra>" + name + "</extra>",
                        **extra), row=r, col=c)
        add_accuracy_baselines(fig, dt, "max_len", 1, c)
        if "train_len" in dt.columns and len(dt):
            for r in (1, 2):
                fig.add_vline(x=float(dt["train_len"].iloc[0]), line_dash="dash", line_color="gray", row=r, col=c)
        fig.update_xaxes(title_text="longest sequence of the split (tokens; ◇: shifted pair)", row=2, col=c)
        fig.update_yaxes(title_text="accuracy (%)" if c == 1 else "", range=S.ACCURACY_RANGE, row=1, col=c)
        fig.update_yaxes(title_text="loss" if c == 1 else "", row=2, col=c)
    if len(d):  # the legend says what the lower panels' dotted lines are
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="dotted: loss (lower panels)",
                                 legendgroup="loss key", meta={"baseline": "loss key"},
                                 line=dict(color=S.BASELINE_COLOR, dash="dot")), row=2, col=1)
    return S.layout(fig, S.title_for(df, "Length extrapolation (dashed vertical line: training length)"), height=560)


FIGURES = {
    "extrapolation": extrapolation,
}
MULTI_RUN = ("extrapolation",)  # a line a run
