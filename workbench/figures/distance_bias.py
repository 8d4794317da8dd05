"""Distance bias (seed 000, App. 15) and the expected RoPE score vs distance (seed 004, Fig. 8)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.figures import style as S


def distance_bias(df: pd.DataFrame) -> go.Figure:
    """Histogram of S(near) − S(far) summed over heads, one bar trace per layer (overlaid, sequential
    colours; the legend gives each layer's mean); the dashed line at 0 is no distance preference. The x axis
    spans the central 99 % of the pairs (a few extreme heads would otherwise stretch it, all mass in one bin),
    and a note says when the differences are beyond style.SANE_LOGIT. A table of several runs gets one panel
    per run (the layers' legend entries shared)."""
    rids = list(dict.fromkeys(df["run_id"])) if "run_id" in df.columns else [None]
    labels = S.run_labels(df) if len(rids) > 1 else {}
    fig = make_subplots(rows=1, cols=len(rids), shared_yaxes=True, horizontal_spacing=0.06,
                        subplot_titles=[labels.get(r, "") for r in rids] if len(rids) > 1 else None)
    n_layers = int(df["layer"].max()) + 1 if len(df) else 1
    for c, rid in enumerate(rids, 1):
        d = df if rid is None else df[df["run_id"] == rid]
        for layer, sub in d.groupby("layer"):
            h = sub.groupby(["bin_lo", "bin_hi"])["count"].sum().reset_index()
            total = max(h["count"].sum(), 1)
            mean = sub.drop_duplicates("head")["mean_diff"].mean()
            fig.add_trace(go.Bar(x=(h["bin_lo"] + h["bin_hi"]) / 2, y=h["count"] / total,
                                 width=h["bin_hi"] - h["bin_lo"], opacity=0.55, legendgroup=f"layer {layer}",
                                 name=f"layer {layer}" + ("" if len(rids) > 1 else f" (mean {S.num(mean)})"),
                                 marker_color=S.layer_color(layer, n_layers),
                                 hovertemplate=f"layer {layer}, mean {S.num(mean)}<br>"
                                               "%{x:.3g}: %{y:.3f}<extra></extra>"),
                          row=1, col=c)
        h = d.groupby(["bin_lo", "bin_hi"])["count"].sum().reset_index()
        if len(h) and h["count"].sum() > 0:
            lo, hi = S.robust_range(h["bin_lo"], h["count"], 0.99)
            _, top = S.robust_range(h["bin_hi"], h["count"], 0.99)
            lo, hi = min(lo, 0.0), max(top, hi, 0.0)
            pad = 0.05 * (hi - lo if hi > lo else 1.0)
            fig.update_xaxes(range=[lo - pad, hi + pad], row=1, col=c)
        fig.add_vline(x=0, line_dash="dash", line_color="gray", row=1, col=c)
        fig.update_xaxes(title_text="logit(near) − logit(far)", ticklabelstandoff=6, row=1, col=c)
    fig.update_yaxes(title_text="share of pairs", ticklabelstandoff=6, row=1, col=1)  # the corner's labels apart
    S.range_note(fig, df["mean_diff"], S.SANE_LOGIT, "logit differences")
    title = S.title_for(df, "Distance bias (dashed: no preference)")
    coarse = coarse_bins(df)
    if coarse:
        title += f"<br><sup>{coarse}</sup>"
    return S.layout(fig, title, barmode="overlay")


COARSE_SHARE = 0.9  # a layer with this share of its pairs in one bin is not resolved by the bins


def coarse_bins(df: pd.DataFrame) -> str | None:
    """A note when the shared bins cannot show the distributions: in most layers (of a run) COARSE_SHARE of the
    pairs sit in one bin, because the differences of a few heads span far more (tables computed before
    `analysis.distance_bias.shared_edges` left extreme heads out of the edges); None otherwise."""
    if not len(df):
        return None
    runs = df.groupby("run_id") if "run_id" in df.columns else [(None, df)]
    for _, d in runs:
        per_layer = d.groupby(["layer", "bin_lo"])["count"].sum()
        top = per_layer.groupby("layer").max() / per_layer.groupby("layer").sum().clip(lower=1)
        if (top >= COARSE_SHARE).mean() > 0.5:
            used = d[d["count"] > 0]
            span = used.groupby(["layer", "head"]).agg(lo=("bin_lo", "min"), hi=("bin_hi", "max"))
            l, h = (span["hi"] - span["lo"]).idxmax()
            width = float((d["bin_hi"] - d["bin_lo"]).median())
            return (f"bins {S.num(width)} wide, set by head L{l}.H{h} ({S.num(span.loc[(l, h), 'lo'])} to "
                    f"{S.num(span.loc[(l, h), 'hi'])}): most pairs fall in one bin; the per-head share reads them")
    return None


def distance_bias_share(df: pd.DataFrame) -> go.Figure:
    """Per layer and head, the share of sampled pairs whose nearer key scores higher (`share_positive`), minus 0.5
    (no preference), on a diverging scale centred at 0: unit-free, so it reads whatever the logits' scale, where the
    histogram's shared bins cannot (one extreme head stretches them). One heatmap per run (panels side by side)."""
    rids = list(dict.fromkeys(df["run_id"])) if "run_id" in df.columns else [None]
    labels = S.run_labels(df) if len(rids) > 1 else {}
    fig = make_subplots(rows=1, cols=len(rids), horizontal_spacing=0.12,
                        subplot_titles=[labels.get(r, "") for r in rids] if len(rids) > 1 else None)
    for c, rid in enumerate(rids, 1):
        d = (df if rid is None else df[df["run_id"] == rid]).drop_duplicates(["layer", "head"])
        z = d.pivot(index="layer", columns="head", values="share_positive") - 0.5
        fig.add_trace(S.heatmap(z, colorbar_title="share near > far − 0.5", fig=fig, row=1, col=c, diverging=True,
                                zmin=-0.5, zmax=0.5, fmt=".2f", showscale=c == len(rids), name=labels.get(rid, "share"),
                                hover="layer %{y}, head %{x}: %{z:+.2f}<extra></extra>"), row=1, col=c)
        S.category_axes(fig, z, "head", "layer" if c == 1 else "", row=1, col=c)
    return S.layout(fig, S.title_for(df, "Distance preference per head: share of pairs with the nearer key scoring "
                                         "higher, − 0.5 (red: nearer preferred)"), height=360)


def rope_expected_score(df: pd.DataFrame) -> go.Figure:
    """Per q/k mean: analytic expectation (line) and Monte Carlo mean (markers): 2 traces per mean."""
    fig = go.Figure()
    means = sorted(df["q_mean"].unique())
    for i, mu in enumerate(means):
        sub = df[df["q_mean"] == mu]
        color = S.layer_color(i, len(means))
        fig.add_trace(go.Scatter(x=sub["distance"], y=sub["expected_score"], mode="lines",
                                 name=f"mean {mu:g} (analytic)",
                                 legendgroup=f"mean {mu:g}", line=dict(color=color)))
        fig.add_trace(go.Scatter(x=sub["distance"], y=sub["mc_mean"], mode="markers", marker=dict(size=3, color=color),
                                 name=f"mean {mu:g} (Monte Carlo)", legendgroup=f"mean {mu:g}", opacity=0.6))
    fig.update_xaxes(title_text="relative distance m − n")
    fig.update_yaxes(title_text="E[q′·k′]")
    return S.layout(fig, "Expected RoPE score vs. distance (FoPE Fig. 8)")


FIGURES = {
    "distance_bias": distance_bias,
    "distance_bias_share": distance_bias_share,
    "rope_expected_score": rope_expected_score,
}
TABLES = {"distance_bias_share": "distance_bias"}
MULTI_RUN = ("distance_bias", "distance_bias_share")  # a panel a run
