"""Toeplitz structure of the attention logits and its spectrum (seed 003, section 3, App. B)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.figures import style as S


SCALE_SPREAD = 10.0  # layers whose profiles differ in size by more than this factor are drawn each on its own scale


def spectral(df: pd.DataFrame) -> go.Figure:
    """Left: explained variance of the Toeplitz part (heatmap layer x head, 1 trace, colour bar beside the
    panel). Right: the relative-offset profile averaged over heads, one line per layer (n_layers traces),
    centred on its mean over offsets (a constant added to every logit of a query does not change its
    softmax); when the layers' sizes differ by more than SCALE_SPREAD, each is divided by its largest |value|
    (given in the legend), so one layer's millions do not flatten the others. A note says when the logits
    are beyond style.SANE_LOGIT."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.42, 0.58], horizontal_spacing=0.16,
                        subplot_titles=["Toeplitz share of logit variance",
                                        "relative-offset profile (mean over heads)"])
    per_head = df.drop_duplicates(["layer", "head"])
    z = per_head.pivot(index="layer", columns="head", values="explained_var")
    fig.add_trace(S.heatmap(z, colorbar_title="R²", fig=fig, row=1, col=1, zmin=0, zmax=1, name="Toeplitz R²",
                            hover="layer %{y}, head %{x}<br>explained %{z:.3f}<extra></extra>"), row=1, col=1)
    S.category_axes(fig, z, "head", "layer", row=1, col=1)
    n_layers = int(df["layer"].max()) + 1 if len(df) else 1
    profiles = {layer: sub.groupby("offset")["mean_logit"].mean() for layer, sub in df.groupby("layer")}
    profiles = {layer: p - p.mean() for layer, p in profiles.items()}
    size = {layer: float(np.abs(p).max()) for layer, p in profiles.items()}
    sizes = np.array([v for v in size.values() if v > 0])
    scaled = sizes.size > 1 and sizes.max() > SCALE_SPREAD * sizes.min()
    for layer, prof in profiles.items():
        k = size[layer] if scaled and size[layer] > 0 else 1.0
        fig.add_trace(go.Scatter(x=prof.index, y=prof.values / k, mode="lines",
                                 line=dict(color=S.layer_color(layer, n_layers)),
                                 name=f"layer {layer}" + (f" (× {S.num(k)})" if scaled else ""), customdata=prof.values,
                                 hovertemplate=f"layer {layer}, offset %{{x}}: %{{customdata:.4g}}<extra></extra>"),
                      row=1, col=2)
    fig.update_xaxes(title_text="offset k − q", row=1, col=2)
    fig.update_yaxes(title_text="mean logit − its mean" + (" (÷ the layer's scale)" if scaled else ""), row=1, col=2)
    S.range_note(fig, df["mean_logit"], S.SANE_LOGIT, "attention logits")
    return S.layout(fig, S.title_for(df, "Toeplitz structure of the attention logits"))


def spectral_eigen(df: pd.DataFrame) -> go.Figure:
    """Eigenvalue range of the Toeplitz part per head, one bar trace per layer (sequential colours), on a log
    axis (ranges span orders of magnitude across heads; a zero range is left out) whose range holds every bar; a bar
    more than 10x the median is labelled with its value. A note says when the logits are beyond style.SANE_LOGIT."""
    per_head = df.drop_duplicates(["layer", "head"])
    n_layers = int(per_head["layer"].max()) + 1 if len(per_head) else 1
    fig = go.Figure()
    vals = S.log_safe(per_head["eig_range"])
    vals = vals[np.isfinite(vals)]
    tall = 10 * float(np.median(vals)) if vals.size else np.inf  # a bar this far above the others gets its value
    for layer, sub in per_head.groupby("layer"):
        y = S.log_safe(sub["eig_range"])
        fig.add_trace(go.Bar(x=sub["head"], y=y, name=f"layer {layer}",
                             text=[S.num(v) if np.isfinite(v) and v > tall else "" for v in y],
                             textposition="outside", cliponaxis=False, constraintext="none", textangle=0,
                             textfont=dict(size=10),
                             marker_color=S.layer_color(layer, n_layers),
                             customdata=np.stack([sub["eig_min"], sub["eig_max"], sub["cond"]], -1),
                             hovertemplate="head %{x}: [%{customdata[0]:.3g}, %{customdata[1]:.3g}], "
                                           "cond %{customdata[2]:.3g}<extra></extra>"))
    S.integer_axis(fig, per_head["head"], "x", title_text="head")
    fig.update_yaxes(title_text="eigenvalue range of (T + Tᵀ)/2", type="log")
    if vals.size:  # every bar ends inside the axis, with room above the tallest for its value
        lo, hi = np.log10(vals.min()) - 0.1, np.log10(vals.max()) + 0.35
        # over a few decades plotly labels every digit (1, 2, ..., 9, 10), and 9 runs into 10: only 1, 2 and 5
        fig.update_yaxes(range=[lo, hi], **({"dtick": "D2"} if hi - lo <= 4 else {}))
    if "mean_logit" in df.columns:
        S.range_note(fig, df["mean_logit"], S.SANE_LOGIT, "attention logits")
    return S.layout(fig, S.title_for(df, "Spectrum of the Toeplitz part"), barmode="group")


def hadamard_check(df: pd.DataFrame) -> go.Figure:
    """Eigenvalue range of T∘E vs T, one scatter trace per modulation kind, plus the diagonal (kinds + 1)."""
    fig = go.Figure()
    for kind, sub in df.groupby("kind"):
        fig.add_trace(go.Scatter(x=sub["range_T"], y=sub["range_H"], mode="markers", name=kind,
                                 text=[f"n={n}" for n in sub["n"]]))
    top = float(max(df["range_T"].max(), df["range_H"].max())) if len(df) else 1.0
    S.add_baseline(fig, [0, top], "no contraction", [0, top], label="no contraction (y = x)")
    fig.update_xaxes(title_text="eigenvalue range of T (additive)")
    fig.update_yaxes(title_text="eigenvalue range of T ∘ E (multiplicative)")
    return S.layout(fig, "Hadamard product with a Toeplitz modulation (Lemma B.1 check)")


FIGURES = {
    "spectral": spectral,
    "spectral_eigen": spectral_eigen,
    "hadamard_check": hadamard_check,
}
TABLES = {"spectral_eigen": "spectral"}
