"""Length extrapolation: accuracy and loss vs the longest test length (seed 002)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.figures import style as S


def extrapolation(df: pd.DataFrame) -> go.Figure:
    """Accuracy (left axis) and loss (right axis) vs. longest test length: 2 traces per run/scheme in the table."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    key = "run_id" if "run_id" in df.columns and df["run_id"].nunique() > 1 else None
    groups = df.groupby(key) if key else [(None, df)]
    for name, sub in groups:
        sub = sub.sort_values("max_len")
        label = f"{sub['scheme'].iloc[0]} " if "scheme" in sub.columns and key else ""
        err = None
        if "acc_lo" in sub.columns:
            err = dict(type="data", symmetric=False, array=sub["acc_hi"] - sub["accuracy"],
                       arrayminus=sub["accuracy"] - sub["acc_lo"])
        fig.add_trace(go.Scatter(x=sub["max_len"], y=sub["accuracy"], mode="lines+markers", name=f"{label}accuracy",
                                 text=sub["split"], error_y=err), secondary_y=False)
        fig.add_trace(go.Scatter(x=sub["max_len"], y=sub["loss"], mode="lines+markers", name=f"{label}loss",
                                 text=sub["split"], line=dict(dash="dot")), secondary_y=True)
    if "train_len" in df.columns:
        fig.add_vline(x=float(df["train_len"].iloc[0]), line_dash="dash", line_color="gray")
    fig.update_xaxes(title_text="longest sequence in the split (tokens; dashed: training length)")
    fig.update_yaxes(title_text="accuracy", range=[0, 1.02], secondary_y=False)
    fig.update_yaxes(title_text="loss", secondary_y=True)
    return S.layout(fig, S.title_for(df, "Length extrapolation"))


FIGURES = {
    "extrapolation": extrapolation,
}
