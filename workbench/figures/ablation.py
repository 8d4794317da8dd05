"""Head ablation and deposit patterns (seed 003, section 4): heatmaps, per-layer views and the paper's
per-layer distributions of delta(l, h) = metric(clean) - metric(head h of layer l ablated)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.figures import style as S

PATTERN_COLORS = {"single-head": "#d62728", "average": "#ff7f0e", "none": "#9a9a9a"}


def _metric(df: pd.DataFrame, metric: str, mode: str | None = None) -> pd.DataFrame:
    d = df[df["metric"] == metric]
    if "mode" in d.columns and d["mode"].nunique() > 1:
        d = d[d["mode"] == (mode or d["mode"].iloc[0])]
    if d.empty:
        raise ValueError(f"the ablation table has no rows for metric={metric!r}"
                         f"{'' if mode is None else f' and mode={mode!r}'}; it has metrics "
                         f"{sorted(df['metric'].unique())}")
    return d


def _values(d: pd.DataFrame, value: str) -> tuple[pd.Series, pd.Series, pd.Series, str]:
    """(y, lo, hi, axis title) for value = "delta" (clean - ablated) or "ablated" (metric with the head off)."""
    metric = d["metric"].iloc[0]
    if value == "delta":
        return d["delta"], d["ci_lo"], d["ci_hi"], f"Δ {metric} = clean − ablated"
    if value == "ablated":  # ablated = clean - delta, so its interval is [clean - hi, clean - lo]
        ablated = d["clean"] - d["delta"]
        return ablated, d["clean"] - d["ci_hi"], d["clean"] - d["ci_lo"], f"{metric}, head ablated"
    raise ValueError(f"value={value!r}: use 'ablated' (metric with the head off, clean level drawn) or 'delta'")


def _clean_level(fig, d: pd.DataFrame, value: str, x: tuple, **where) -> None:
    """The clean model's level: its metric (value='ablated') or Δ = 0 (value='delta')."""
    clean = float(d["clean"].mean()) if value == "ablated" else 0.0
    S.add_baseline(fig, clean, "clean model", x, label=f"clean model ({d['metric'].iloc[0]} {d['clean'].mean():.3f})",
                   **where)


def ablation(df: pd.DataFrame, metric: str = "accuracy", zmax: float | None = None) -> go.Figure:
    """Heatmap of Δ (layer x head) for `metric`, diverging at 0 (= the clean model), one trace per ablation
    mode present, the values that matter written in the cells; hover: the bootstrap interval. `zmax`: the
    colour scale's limit ±zmax (`shared_scale` gives one for several runs), default the table's largest |Δ|."""
    _metric(df, metric)  # ValueError naming the table's metrics when it has none named `metric`
    d = df[df["metric"] == metric]
    modes = list(d["mode"].unique()) if "mode" in d.columns else ["zero"]
    fig = make_subplots(rows=1, cols=len(modes), subplot_titles=[f"{m}-ablation" for m in modes],
                        horizontal_spacing=0.14)
    vmax = zmax if zmax is not None else float(np.nanmax(np.abs(d["delta"]))) if len(d) else 1.0
    vmax = vmax if vmax > 0 else 1.0
    for i, mode in enumerate(modes, 1):
        sub = d[d["mode"] == mode] if "mode" in d.columns else d
        z = sub.pivot(index="layer", columns="head", values="delta")
        lo = sub.pivot(index="layer", columns="head", values="ci_lo").reindex_like(z)
        hi = sub.pivot(index="layer", columns="head", values="ci_hi").reindex_like(z)
        text = [[f"[{a:.3f}, {b:.3f}]" for a, b in zip(ra, rb)] for ra, rb in zip(lo.values, hi.values)]
        fig.add_trace(S.heatmap(z, colorbar_title=f"Δ {metric}", fig=fig, row=1, col=i, diverging=True,
                                zmin=-vmax, zmax=vmax, text=text, showscale=i == len(modes), name=f"{mode}-ablation",
                                hover="layer %{y}, head %{x}<br>Δ %{z:.3f} %{text}<extra></extra>"), row=1, col=i)
        S.category_axes(fig, z, "head", "layer" if i == 1 else "", row=1, col=i)
    return S.layout(fig, S.title_for(df, f"Head ablation: Δ {metric} = clean − ablated (0 = no effect)"))


def ablation_layers(df: pd.DataFrame, metric: str = "accuracy", mode: str | None = None,
                    value: str = "ablated", yrange: tuple | None = None) -> go.Figure:
    """The paper's per-layer view: `value` per head with interval bars, one line per layer (sequential
    colours), plus the clean-model level (n_layers + 1 traces); `yrange` fixes the y axis (`shared_scale`)."""
    d = _metric(df, metric, mode)
    y, lo, hi, title = _values(d, value)
    n_layers = int(d["layer"].max()) + 1
    fig = go.Figure()
    for layer in sorted(d["layer"].unique()):
        m = (d["layer"] == layer).to_numpy()
        order = np.argsort(d["head"].to_numpy()[m])
        hx, hy = d["head"].to_numpy()[m][order], y.to_numpy()[m][order]
        fig.add_trace(go.Scatter(x=hx, y=hy, mode="lines+markers", name=f"layer {layer}",
                                 line=dict(color=S.layer_color(layer, n_layers)),
                                 error_y=dict(type="data", symmetric=False, array=hi.to_numpy()[m][order] - hy,
                                              arrayminus=hy - lo.to_numpy()[m][order], thickness=1)))
    _clean_level(fig, d, value, (d["head"].min() - 0.3, d["head"].max() + 0.3))
    S.integer_axis(fig, d["head"], "x", title_text="head")
    fig.update_yaxes(title_text=title, range=list(yrange) if yrange is not None else None)
    return S.layout(fig, S.title_for(df, f"Head ablation by layer ({metric})"))


def ablation_violins(df: pd.DataFrame, metric: str = "accuracy", mode: str | None = None,
                     value: str = "delta", yrange: tuple | None = None) -> go.Figure:
    """The paper's presentation (seed 003, Figs. 4 and 8): per layer, the distribution over heads of `value`
    as a violin with every head drawn as a point, plus the clean-model level (n_layers + 1 traces); `yrange`
    fixes the y axis (`shared_scale`)."""
    d = _metric(df, metric, mode)
    y, _, _, title = _values(d, value)
    n_layers = int(d["layer"].max()) + 1
    fig = go.Figure()
    for layer in sorted(d["layer"].unique()):
        m = (d["layer"] == layer).to_numpy()
        fig.add_trace(go.Violin(x=np.full(m.sum(), layer), y=y.to_numpy()[m], name=f"layer {layer}",
                                text=[f"head {h}" for h in d["head"].to_numpy()[m]], points="all", pointpos=0,
                                jitter=0.3, box_visible=True, meanline_visible=True, spanmode="hard",
                                line_color=S.layer_color(layer, n_layers), showlegend=False,
                                hovertemplate="layer %{x}, %{text}: %{y:.3f}<extra></extra>"))
    _clean_level(fig, d, value, (d["layer"].min() - 0.5, d["layer"].max() + 0.5))
    S.integer_axis(fig, d["layer"], "x", title_text="layer")
    fig.update_yaxes(title_text=title, range=list(yrange) if yrange is not None else None)
    return S.layout(fig, S.title_for(df, f"Head ablation: distribution over heads per layer ({metric})"))


def shared_scale(tables: list, metric: str = "accuracy", mode: str | None = None,
                 view: str = "ablation_layers") -> dict:
    """Keyword arguments that draw several runs' ablation figures on one scale (one colour, one height = one
    effect size): {"ablation": {"zmax": largest |Δ| of all}, view: {"yrange": the span of all values and
    intervals (and the clean levels), padded 5 %}, "deposit": {"yrange": 0 and the span of all Δ intervals}}
    for the per-layer `view` (its default `value`)."""
    import inspect

    tables = [t for t in tables if t is not None and len(t)]
    if not tables:
        return {"ablation": {}, view: {}, "deposit": {}}
    d = pd.concat([t[t["metric"] == metric] for t in tables], ignore_index=True)
    zmax = float(np.nanmax(np.abs(d["delta"]))) if len(d) else 1.0
    dep = {"yrange": (min(0.0, float(np.nanmin(d["ci_lo"]))), float(np.nanmax(d["ci_hi"])) * 1.08)} if len(d) else {}
    value = inspect.signature(FIGURES[view]).parameters["value"].default
    spans = []
    for t in tables:
        try:
            m = _metric(t, metric, mode)
        except ValueError:
            continue
        y, lo, hi, _ = _values(m, value)
        spans += [np.nanmin(lo), np.nanmax(hi), np.nanmin(y), np.nanmax(y),
                  float(m["clean"].mean()) if value == "ablated" else 0.0]
    if not spans:
        return {"ablation": {"zmax": zmax}, view: {}, "deposit": dep}
    lo, hi = float(np.nanmin(spans)), float(np.nanmax(spans))
    pad = 0.05 * (hi - lo if hi > lo else 1.0)
    return {"ablation": {"zmax": zmax}, view: {"yrange": (lo - pad, hi + pad)}, "deposit": dep}


def deposit(df: pd.DataFrame, yrange: tuple | None = None) -> go.Figure:
    """Top-head delta per layer as bars coloured by pattern (one trace per pattern present, with intervals;
    the top head named under its layer), and the concentration C_l (line, right axis), with its uniform level
    1/H (patterns + 2 traces). Both axes put 0 at the same height, so 1/H reads against either. `yrange`: the
    left axis's range (`shared_scale`), default the table's intervals and 0."""
    d = df.sort_values("layer")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for pattern, sub in d.groupby("pattern", sort=False):
        fig.add_trace(go.Bar(x=sub["layer"], y=sub["top_delta"], name=f"top head: {pattern}",
                             marker_color=PATTERN_COLORS.get(pattern, "#9a9a9a"), customdata=sub["top_head"],
                             hovertemplate="layer %{x}, top head %{customdata}: Δ %{y:.3f}<extra></extra>",
                             error_y=dict(type="data", symmetric=False, array=sub["top_hi"] - sub["top_delta"],
                                          arrayminus=sub["top_delta"] - sub["top_lo"])), secondary_y=False)
    fig.add_trace(go.Scatter(x=d["layer"], y=d["concentration"], mode="lines+markers", name="concentration C_l",
                             line=dict(color="#333333")), secondary_y=True)
    if "n_heads" in d.columns and len(d):
        S.add_baseline(fig, 1.0 / float(d["n_heads"].iloc[0]), "uniform heads", (d["layer"].min() - 0.5,
                       d["layer"].max() + 0.5), label=f"C_l if all heads equal (1/H = {1 / d['n_heads'].iloc[0]:.3g})",
                       row=1, col=1, secondary_y=True)
    layers = [int(v) for v in d["layer"]]
    fig.update_xaxes(title_text="layer (its top head)", tickmode="array", tickvals=layers,
                     ticktext=[f"{l}<br>h{int(h)}" for l, h in zip(layers, d["top_head"])])
    if yrange is not None:
        left_lo, left_hi = min(0.0, float(yrange[0])), max(float(yrange[1]), 1e-9)
    else:
        left_lo = min(0.0, float(np.nanmin(d["top_lo"]))) if len(d) else 0.0
        left_hi = max(float(np.nanmax(d["top_hi"])) if len(d) else 1.0, 1e-9) * 1.08
    zero = -left_lo / (left_hi - left_lo)          # height of 0 on the left axis, as a share of the panel
    right_hi = 1.05
    right_lo = -zero * right_hi / (1 - zero)       # the right axis puts its 0 at the same height
    fig.update_yaxes(title_text="Δ of the top head", range=[left_lo, left_hi], secondary_y=False)
    fig.update_yaxes(title_text="C_l", range=[right_lo, right_hi], tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1.0],
                     secondary_y=True, showgrid=False)
    fig.update_layout(legend=dict(x=1.1, xanchor="left", y=1, yanchor="top"))  # right of the right axis title
    return S.layout(fig, S.title_for(df, "Deposit pattern"), barmode="group")


FIGURES = {
    "ablation": ablation,
    "ablation_mean": ablation,
    "ablation_resample": ablation,
    "ablation_layers": ablation_layers,
    "ablation_violins": ablation_violins,
    "deposit": deposit,
}
TABLES = {"ablation_layers": "ablation", "ablation_violins": "ablation"}
