"""The seed study's figure (issue 40): where each run's largest single-head deposit falls, layer x seed, RoPE beside
MLA, coloured by its zero-ablation drop; from `workbench.analysis.claims.study_table`.

    fig = study_map(study_table(store, run_table(store)))
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis.claims.study import DECIDING
from workbench.analysis.common import scheme_label, tuples

from . import style


def _seed_label(r) -> str:
    return f"s{int(r.train_seed)} d{int(r.data_seed)}" + (" *" if r.group == "ladder seeds" else "")


def _cells(g: pd.DataFrame, scheme: str, threshold: str) -> tuple[list, list, list]:
    """(layer, drop, head) per run of the panel: RoPE's largest single-head deposit at `threshold`; MLA's largest
    zero-ablation drop of any head (its registered question: is any head indispensable)."""
    if scheme == "mla":
        return list(g.largest_drop_layer), list(g.largest_drop), list(g.largest_drop_head)
    return list(g[f"layer_{threshold}"]), list(g[f"drop_{threshold}"]), list(g[f"head_{threshold}"])


def study_map(st: pd.DataFrame, schemes=("rope", "mla"), threshold: str = "005", n_layers: int = 6,
              title: str = "The seed study: where each run's largest deposit (RoPE) and largest drop (MLA) fall"
              ) -> go.Figure:
    """One panel per scheme (RoPE beside MLA): rows the layers (0 at the top), columns the runs (training seed,
    data seed; `*` marks a run of the scale ladder, trained before the registration, shown beside and never pooled).
    RoPE: a cell at the layer of the run's largest single-head deposit (threshold `threshold`: "005" or "010"),
    coloured by its drop, "none" under a run without one. MLA: a cell at the layer of its largest zero-ablation drop
    of any head, coloured by the drop (the registered question is whether that drop reaches 0.05 / 0.10). An "x"
    above a column marks a run that does not count (not learned or not settled). Each panel's title names the deciding
    readout, `claims.study.DECIDING`, as the readouts table beside does: when a run agrees with the paper's claim."""
    at = f"{int(threshold) / 100:.2f}"
    fig = make_subplots(rows=1, cols=len(schemes), horizontal_spacing=0.08, subplot_titles=[
        scheme_label(s) + (f" (a run agrees: {DECIDING[s].replace('threshold', at)})" if s in DECIDING else "")
        for s in schemes])
    drops = [d for s in schemes for d in _cells(st[st.scheme == s], s, threshold)[1] if pd.notna(d)]
    zmax = max([0.1, *drops])
    for i, scheme in enumerate(schemes, start=1):
        g = st[st.scheme == scheme]
        cols = [_seed_label(r) for r in tuples(g)]
        z = np.full((n_layers, len(g)), np.nan)
        text = [["" for _ in cols] for _ in range(n_layers)]
        layers, vals, heads = _cells(g, scheme, threshold)
        for j, (layer, drop, head) in enumerate(zip(layers, vals, heads)):
            if pd.notna(layer) and int(layer) < n_layers:
                z[int(layer), j] = drop
                text[int(layer)][j] = f"H{int(head)}<br>{drop:.2f}"
        label = "largest drop of any head" if scheme == "mla" else "drop of the largest single-head deposit"
        fig.add_trace(go.Heatmap(z=z, x=cols, y=list(range(n_layers)), text=text, texttemplate="%{text}",
                                 colorscale=style.SEQUENTIAL, zmin=0, zmax=zmax, showscale=i == 1,
                                 colorbar=dict(title="drop"), hoverongaps=False, name=scheme_label(scheme),
                                 hovertemplate=f"%{{x}}<br>layer %{{y}}<br>{label} %{{z:.3f}}<extra></extra>"),
                      row=1, col=i)
        none = [c for c, layer in zip(cols, layers) if pd.isna(layer)]
        if none:
            fig.add_trace(go.Scatter(x=none, y=[n_layers - 0.2] * len(none), mode="text", text=["none"] * len(none),
                                     showlegend=False, name="no deposit"), row=1, col=i)
        off = [c for c, r in zip(cols, tuples(g)) if not r.counted]
        if off:
            fig.add_trace(go.Scatter(x=off, y=[-0.8] * len(off), mode="markers", marker=dict(symbol="x", size=8,
                                     color=style.BASELINE_COLOR), name="not counted (not learned or not settled)",
                                     showlegend=False, meta={"baseline": "not counted"}), row=1, col=i)
        fig.update_yaxes(autorange=False, title_text="layer" if i == 1 else None, tickmode="array",
                         tickvals=list(range(n_layers)),
                         range=[n_layers + 0.2, -1.2], row=1, col=i)
        fig.update_xaxes(title_text="run (training seed, data seed)", tickangle=-60, row=1, col=i)
    fig.add_annotation(text="x above a run: not counted (not learned or not settled); *: trained before the "
                            "registration, shown beside, never pooled", xref="paper", yref="paper", x=0, y=1.0,
                       yshift=26, showarrow=False, xanchor="left", yanchor="bottom", font=dict(size=11))
    return style.layout(fig, title, height=420, margin=dict(l=70, r=30, t=110, b=60))


FIGURES = {"study_map": study_map}
TABLES = {"study_map": "findings_study"}  # not a run's table: `claims.study_table` over the shipped store
ELSEWHERE = {"study_map": "`workbench compare --study-figure FILE`"}
