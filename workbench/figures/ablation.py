"""Head ablation and deposit patterns (seed 003, section 4): heatmaps and per-layer views of
delta(l, h) = metric(clean) - metric(ablated)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.figures import style as S


def ablation(df: pd.DataFrame, metric: str = "accuracy") -> go.Figure:
    """Heatmap of delta (layer x head) for `metric`, one trace per ablation mode present. Hover: interval."""
    d = df[df["metric"] == metric]
    modes = list(d["mode"].unique()) if "mode" in d.columns else ["zero"]
    fig = make_subplots(rows=1, cols=len(modes), subplot_titles=[f"{m}-ablation" for m in modes])
    vmax = float(np.nanmax(np.abs(d["delta"]))) if len(d) else 1.0
    for i, mode in enumerate(modes, 1):
        sub = d[d["mode"] == mode] if "mode" in d.columns else d
        z = sub.pivot(index="layer", columns="head", values="delta")
        lo = sub.pivot(index="layer", columns="head", values="ci_lo").reindex_like(z)
        hi = sub.pivot(index="layer", columns="head", values="ci_hi").reindex_like(z)
        text = [[f"[{a:.3f}, {b:.3f}]" for a, b in zip(ra, rb)] for ra, rb in zip(lo.values, hi.values)]
        fig.add_trace(go.Heatmap(z=z.values, x=list(z.columns), y=list(z.index), text=text, zmid=0,
                                 zmin=-vmax, zmax=vmax, colorscale="RdBu_r", colorbar=dict(title="delta"),
                                 hovertemplate="layer %{y}, head %{x}<br>delta %{z:.3f} %{text}<extra></extra>",
                                 showscale=i == 1), row=1, col=i)
        fig.update_xaxes(title_text="head", row=1, col=i)
        fig.update_yaxes(title_text="layer", autorange="reversed", row=1, col=i)
    return S.layout(fig, S.title_for(df, f"Head ablation: {metric}(clean) − {metric}(ablated)"))


def ablation_layers(df: pd.DataFrame, metric: str = "accuracy", mode: str | None = None) -> go.Figure:
    """The paper's per-layer view: delta vs head with interval bars, one trace per layer."""
    d = df[df["metric"] == metric]
    if mode is not None or ("mode" in d.columns and d["mode"].nunique() > 1):
        d = d[d["mode"] == (mode or d["mode"].iloc[0])]
    fig = go.Figure()
    for layer, sub in d.groupby("layer"):
        sub = sub.sort_values("head")
        fig.add_trace(go.Scatter(x=sub["head"], y=sub["delta"], mode="lines+markers", name=f"layer {layer}",
                                 error_y=dict(type="data", symmetric=False, array=sub["ci_hi"] - sub["delta"],
                                              arrayminus=sub["delta"] - sub["ci_lo"])))
    fig.update_xaxes(title_text="head")
    fig.update_yaxes(title_text=f"delta {metric}")
    return S.layout(fig, S.title_for(df, f"Head ablation by layer ({metric})"))


def deposit(df: pd.DataFrame) -> go.Figure:
    """Two traces: top-head delta per layer (bars coloured by pattern, with its interval) and the
    concentration C_l (line, right axis)."""
    d = df.sort_values("layer")
    colors = d["pattern"].map({"single-head": "#d62728", "average": "#ff7f0e", "none": "#7f7f7f"})
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=d["layer"], y=d["top_delta"], marker_color=colors, name="top-head delta",
                         text=[f"h{h} {p}" for h, p in zip(d["top_head"], d["pattern"])],
                         error_y=dict(type="data", symmetric=False, array=d["top_hi"] - d["top_delta"],
                                      arrayminus=d["top_delta"] - d["top_lo"])), secondary_y=False)
    fig.add_trace(go.Scatter(x=d["layer"], y=d["concentration"], mode="lines+markers", name="concentration C_l"),
                  secondary_y=True)
    fig.update_xaxes(title_text="layer", dtick=1)
    fig.update_yaxes(title_text="delta of the top head", secondary_y=False)
    fig.update_yaxes(title_text="C_l", range=[0, 1.05], secondary_y=True)
    return S.layout(fig, S.title_for(df, "Deposit pattern"))


FIGURES = {
    "ablation": ablation,
    "ablation_mean": ablation,
    "ablation_layers": ablation_layers,
    "deposit": deposit,
}
