"""Initial angles between pre-rotation q and k per rotary plane (seed 001, sections 2.2-2.3)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.figures import style as S


def angles(df: pd.DataFrame, value: str = "share_anomalous") -> go.Figure:
    """One heatmap per layer (n_layers traces): `value` per head (rows) and rotary plane (columns)."""
    layers = sorted(df["layer"].unique())
    rows, cols = S.grid(len(layers))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"layer {l}" for l in layers])
    vmax = float(df[value].max()) if len(df) else 1.0
    for i, layer in enumerate(layers):
        sub = df[df["layer"] == layer]
        z = sub.pivot(index="head", columns="plane", values=value)
        fig.add_trace(go.Heatmap(z=z.values, x=list(z.columns), y=list(z.index), zmin=0, zmax=max(vmax, 1e-9),
                                 colorscale="Viridis", showscale=i == 0, colorbar=dict(title=value),
                                 hovertemplate="head %{y}, plane %{x}<br>%{z:.3f}<extra></extra>"),
                      row=i // cols + 1, col=i % cols + 1)
    fig.update_xaxes(title_text="rotary plane j")
    fig.update_yaxes(title_text="head")
    return S.layout(fig, S.title_for(df, f"Initial angles: {value.replace('_', ' ')}"))


FIGURES = {
    "angles": angles,
}
