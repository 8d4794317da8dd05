"""Distance bias (seed 000, App. 15) and the expected RoPE score vs distance (seed 004, Fig. 8)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from workbench.figures import style as S


def distance_bias(df: pd.DataFrame) -> go.Figure:
    """Histogram of S(near) − S(far) summed over heads, one bar trace per layer (overlaid, sequential
    colours); the dashed line at 0 is no distance preference."""
    fig = go.Figure()
    n_layers = int(df["layer"].max()) + 1 if len(df) else 1
    for layer, sub in df.groupby("layer"):
        h = sub.groupby(["bin_lo", "bin_hi"])["count"].sum().reset_index()
        total = max(h["count"].sum(), 1)
        mean = sub.drop_duplicates("head")["mean_diff"].mean()
        fig.add_trace(go.Bar(x=(h["bin_lo"] + h["bin_hi"]) / 2, y=h["count"] / total, width=h["bin_hi"] - h["bin_lo"],
                             name=f"layer {layer} (mean {mean:.2f})", opacity=0.55,
                             marker_color=S.layer_color(layer, n_layers)))
    fig.add_vline(x=0, line_dash="dash", line_color="gray")
    fig.update_xaxes(title_text="logit(near key) − logit(far key)")
    fig.update_yaxes(title_text="share of pairs")
    return S.layout(fig, S.title_for(df, "Distance bias"), barmode="overlay")


def rope_expected_score(df: pd.DataFrame) -> go.Figure:
    """Per q/k mean: analytic expectation (line) and Monte Carlo mean (markers): 2 traces per mean."""
    fig = go.Figure()
    means = sorted(df["q_mean"].unique())
    for i, mu in enumerate(means):
        sub = df[df["q_mean"] == mu]
        color = S.layer_color(i, len(means))
        fig.add_trace(go.Scatter(x=sub["distance"], y=sub["expected_score"], mode="lines", name=f"mean {mu:g} (analytic)",
                                 legendgroup=f"mean {mu:g}", line=dict(color=color)))
        fig.add_trace(go.Scatter(x=sub["distance"], y=sub["mc_mean"], mode="markers", marker=dict(size=3, color=color),
                                 name=f"mean {mu:g} (Monte Carlo)", legendgroup=f"mean {mu:g}", opacity=0.6))
    fig.update_xaxes(title_text="relative distance m − n")
    fig.update_yaxes(title_text="E[q′·k′]")
    return S.layout(fig, "Expected RoPE score vs. distance (FoPE Fig. 8)")


FIGURES = {
    "distance_bias": distance_bias,
    "rope_expected_score": rope_expected_score,
}
