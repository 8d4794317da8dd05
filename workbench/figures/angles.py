"""Initial angles between pre-rotation q and k per rotary plane (seed 001, sections 2.2-2.3), read against
what uniform random angles would give (the table's `uniform_<stat>` columns)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.figures import style as S


def _label(value: str) -> str:
    return value.replace("_", " ")


def angles(df: pd.DataFrame, value: str = "share_anomalous") -> go.Figure:
    """One heatmap per layer (n_layers traces): `value` per head (rows) and rotary plane (columns). When the
    table has `uniform_<value>`, the cells show value − uniform expectation on a diverging scale centred at 0
    (white = what uniform random angles give)."""
    if value not in df.columns:
        raise ValueError(f"value={value!r} is not a column of the angles table; use one of share_anomalous, "
                         "weighted_share_anomalous, share_affected, tau_mean, mean_cos, angle_resultant")
    ref = f"uniform_{value}"
    excess = ref in df.columns
    d = df.assign(_v=df[value] - df[ref]) if excess else df.assign(_v=df[value])
    layers = sorted(d["layer"].unique())
    rows, cols = S.grid(len(layers))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"layer {l}" for l in layers],
                        horizontal_spacing=0.08, vertical_spacing=0.14)
    vmax = float(d["_v"].abs().max()) if len(d) else 1.0
    bar = f"{_label(value)} − uniform" if excess else _label(value)
    for i, layer in enumerate(layers):
        r, c = i // cols + 1, i % cols + 1
        z = d[d["layer"] == layer].pivot(index="head", columns="plane", values="_v")
        fig.add_trace(S.heatmap(z, colorbar_title=bar, fig=fig, row=r, col=c, diverging=excess,
                                zmin=-vmax if excess else 0, zmax=max(vmax, 1e-9),
                                showscale=i == len(layers) - 1, name=f"layer {layer}",
                                hover="head %{y}, plane %{x}<br>" + bar + " %{z:.3f}<extra></extra>"), row=r, col=c)
        S.category_axes(fig, z, "rotary plane j" if r == rows else "", "head" if c == 1 else "", row=r, col=c)
    what = (f"Initial angles: {_label(value)} minus its value for uniform random angles (0 = chance)" if excess
            else f"Initial angles: {_label(value)}")
    return S.layout(fig, S.title_for(df, what), height=max(360, 300 * rows + 80))


def angles_profile(df: pd.DataFrame, value: str = "share_anomalous") -> go.Figure:
    """`value` per rotary plane (mean over heads), one line per layer (sequential colours), and the same
    statistic for uniform random angles as the baseline (n_layers + 1 traces)."""
    if value not in df.columns:
        raise ValueError(f"value={value!r} is not a column of the angles table")
    ref = f"uniform_{value}"
    n_layers = int(df["layer"].max()) + 1 if len(df) else 1
    fig = go.Figure()
    for layer, sub in df.groupby("layer"):
        m = sub.groupby("plane")[value].mean()
        fig.add_trace(go.Scatter(x=m.index, y=m.values, mode="lines+markers", name=f"layer {layer}",
                                 line=dict(color=S.layer_color(layer, n_layers))))
    if ref in df.columns:
        u = df.groupby("plane")[ref].mean()
        if u.nunique() == 1:
            S.add_baseline(fig, float(u.iloc[0]), "uniform angles", (u.index.min(), u.index.max()),
                           label=f"uniform random angles ({u.iloc[0]:.3g})")
        else:
            S.add_baseline(fig, list(u.values), "uniform angles", list(u.index), label="uniform random angles")
    S.integer_axis(fig, df["plane"], "x", title_text="rotary plane j (higher j = lower frequency)")
    fig.update_yaxes(title_text=f"{_label(value)} (mean over heads)")
    return S.layout(fig, S.title_for(df, f"Initial angles per plane: {_label(value)}"))


FIGURES = {
    "angles": angles,
    "angles_profile": angles_profile,
}
TABLES = {"angles_profile": "angles"}
