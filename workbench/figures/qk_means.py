"""q/k per-dimension means (seed 004, Fig. 7 and App. A.1)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.figures import style as S


def qk_means(df: pd.DataFrame) -> go.Figure:
    """Rows q and k; one line per layer and tensor (2 x n_layers traces), one colour per layer (sequential),
    q solid and k dotted; under-trained dims shaded in both panels."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=["q (pre-rotation)", "k (pre-rotation)"])
    n_layers = int(df["layer"].max()) + 1 if len(df) else 1
    for r, w in enumerate(("q", "k"), 1):
        for layer, sub in df[df["tensor"] == w].groupby("layer"):
            sub = sub.sort_values("dim")
            fig.add_trace(go.Scatter(x=sub["dim"], y=sub["mean"], mode="lines", name=f"{w} layer {layer}",
                                     legendgroup=f"layer {layer}",
                                     line=dict(color=S.layer_color(layer, n_layers), dash=S.TENSOR_DASH[w])),
                          row=r, col=1)
        fig.update_yaxes(title_text=f"mean of {w}", row=r, col=1)
    under = sorted(df.loc[df["undertrained"], "dim"].unique())
    for dim in under:
        fig.add_vrect(x0=dim - 0.5, x1=dim + 0.5, fillcolor="orange", opacity=0.15, line_width=0)
    fig.update_xaxes(title_text="dimension (shaded: frequency completes < 1 cycle in the training length)",
                     row=2, col=1)
    return S.layout(fig, S.title_for(df, "q/k per-dimension means (over tokens, averaged over heads)"))

FIGURES = {
    "qk_means": qk_means,
}
