"""Attention patterns of one forward pass (the explorer's view; not an analysis table): one heatmap per head
of a layer, rows = query position, columns = key position, one shared labelled colour scale from 0."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.figures import style as S


def attention_patterns(df: pd.DataFrame) -> go.Figure:
    """Table [layer, head, q_pos, k_pos, weight, q_token, k_token, ablated] of one layer -> one heatmap per head
    (n_heads traces) on a shared colour axis; ablated heads are marked in their titles."""
    heads = sorted(df["head"].unique())
    rows, cols = S.grid(len(heads), max_cols=4)
    layer = int(df["layer"].iloc[0])
    off = set(df.loc[df["ablated"], "head"]) if "ablated" in df.columns else set()
    fig = make_subplots(rows=rows, cols=cols, horizontal_spacing=0.04, vertical_spacing=0.08,
                        subplot_titles=[f"L{layer}.H{h}" + (" · ablated" if h in off else "") for h in heads])
    for i, h in enumerate(heads):
        sub = df[df["head"] == h]
        Q, K = int(sub["q_pos"].max()) + 1, int(sub["k_pos"].max()) + 1
        z = sub["weight"].to_numpy().reshape(Q, K)
        text = (sub["q_token"] + " → " + sub["k_token"]).to_numpy().reshape(Q, K)
        fig.add_trace(go.Heatmap(z=z, text=text, coloraxis="coloraxis", name=f"H{h}",
                                 hovertemplate="q %{y} → k %{x}<br>%{text}<br>weight %{z:.3f}<extra></extra>"),
                      row=i // cols + 1, col=i % cols + 1)
        S.integer_axis(fig, range(K), "x", row=i // cols + 1, col=i % cols + 1)
        S.integer_axis(fig, range(Q), "y", row=i // cols + 1, col=i % cols + 1)
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(coloraxis={"colorscale": S.SEQUENTIAL, "cmin": 0,
                                 "colorbar": {"title": {"text": "attention weight", "side": "right"}}},
                      height=280 * rows + 60)
    return S.layout(fig, "Attention pattern (rows: query position, columns: key position)",
                    margin={"l": 30, "r": 30, "t": 60, "b": 30})


FIGURES = {
    "attention_patterns": attention_patterns,
}
ELSEWHERE = {"attention_patterns": "the dashboard's Explorer page (drawn live from the model)"}
