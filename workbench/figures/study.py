"""The seed study's figure (issue 40): where each run's largest single-head deposit falls, layer x seed, RoPE beside
MLA, coloured by its zero-ablation drop; from `workbench.analysis.claims.study_table`.

    fig = study_map(study_table(store, run_table(store)))
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis._common import scheme_label

from . import style


def _seed_label(r) -> str:
    return f"s{int(r.train_seed)} d{int(r.data_seed)}" + (" *" if r.group == "pre-registration" else "")


def study_map(st: pd.DataFrame, schemes=("rope", "mla"), threshold: str = "005", n_layers: int = 6,
              title: str = "The seed study: where the largest single-head deposit falls") -> go.Figure:
    """One panel per scheme (RoPE beside MLA): rows the layers (0 at the top), columns the runs (training seed,
    data seed; `*` marks a run trained before the registration, shown beside and never pooled), a cell coloured by
    the drop of the run's largest single-head deposit at that layer (threshold `threshold`: "005" or "010"); a
    run with no single-head deposit is an empty column marked "none", and for MLA the largest drop of any head is
    written under its column. Uncounted runs (not learned or not settled) are hatched by an "x" marker."""
    fig = make_subplots(rows=1, cols=len(schemes), subplot_titles=[scheme_label(s) for s in schemes],
                        horizontal_spacing=0.08)
    zmax = float(np.nanmax(st[f"drop_{threshold}"])) if len(st) and st[f"drop_{threshold}"].notna().any() else 1.0
    for i, scheme in enumerate(schemes, start=1):
        g = st[st.scheme == scheme]
        cols = [_seed_label(r) for r in g.itertuples()]
        z = np.full((n_layers, len(g)), np.nan)
        text = [["" for _ in cols] for _ in range(n_layers)]
        for j, r in enumerate(g.itertuples()):
            layer, drop = getattr(r, f"layer_{threshold}"), getattr(r, f"drop_{threshold}")
            if pd.notna(layer) and int(layer) < n_layers:
                z[int(layer), j] = drop
                text[int(layer)][j] = f"H{int(getattr(r, f'head_{threshold}'))} {drop:.2f}"
        fig.add_trace(go.Heatmap(z=z, x=cols, y=list(range(n_layers)), text=text, texttemplate="%{text}",
                                 colorscale=style.SEQUENTIAL, zmin=0, zmax=max(zmax, 0.1), showscale=i == 1,
                                 colorbar=dict(title="drop"), hoverongaps=False,
                                 name=scheme_label(scheme)), row=1, col=i)
        none = [c for c, r in zip(cols, g.itertuples()) if pd.isna(getattr(r, f"layer_{threshold}"))]
        if none:
            fig.add_trace(go.Scatter(x=none, y=[n_layers - 0.5] * len(none), mode="text", text=["none"] * len(none),
                                     showlegend=False, name="no deposit"), row=1, col=i)
        off = [c for c, r in zip(cols, g.itertuples()) if not r.counted]
        if off:
            fig.add_trace(go.Scatter(x=off, y=[-0.6] * len(off), mode="markers", marker=dict(symbol="x", size=8,
                                     color=style.BASELINE_COLOR), name="not counted (not learned or not settled)",
                                     showlegend=i == 1, meta={"baseline": "not counted"}), row=1, col=i)
        if scheme == "mla" and len(g):
            fig.add_trace(go.Scatter(x=cols, y=[n_layers - 0.1] * len(g), mode="text", showlegend=False,
                                     text=[f"{d:.2f}" if pd.notna(d) else "" for d in g.largest_drop],
                                     name="largest drop of any head"), row=1, col=i)
        fig.update_yaxes(autorange="reversed", title_text="layer" if i == 1 else None, dtick=1, row=1, col=i)
        fig.update_xaxes(title_text="run (training seed, data seed)", tickangle=-60, row=1, col=i)
    return style.layout(fig, title)
