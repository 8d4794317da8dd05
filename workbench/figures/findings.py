"""Figures of the reproduction's findings, from the tables of `workbench.analysis.claims`."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis._common import scheme_label, task_label

from . import style


def table1(df: pd.DataFrame) -> go.Figure:
    """The paper's Table 1 beside PE-Lab's: one panel per task; per setting, a bar per scheme with the 95 %
    interval over seeds, and the paper's number as a black diamond. Traces: one bar per (setting, scheme)
    present and one marker trace per task for the paper."""
    tasks = [t for t in ("trigger-distance", "trigger-count") if t in set(df["task"])]
    fig = make_subplots(rows=1, cols=max(1, len(tasks)), subplot_titles=[task_label(t) for t in tasks],
                        shared_yaxes=True, horizontal_spacing=0.06)
    from workbench.analysis.claims import SETTINGS

    for c, task in enumerate(tasks, 1):
        d = df[df["task"] == task]
        settings = [s for s in SETTINGS if s in set(d["setting"])]
        for scheme in ("mla", "rope", "nope"):
            s = d[d["scheme"] == scheme].set_index("setting").reindex(settings)
            if s["mean"].isna().all():
                continue
            err_hi, err_lo = (s["hi"] - s["mean"]).fillna(0), (s["mean"] - s["lo"]).fillna(0)
            fig.add_trace(go.Bar(
                x=[SETTINGS[k] for k in settings], y=100 * s["mean"], name=scheme_label(scheme),
                legendgroup=scheme, marker_color=style.scheme_color(scheme),
                error_y=dict(type="data", array=100 * err_hi, arrayminus=100 * err_lo, visible=True),
                customdata=np.stack([s["n_seeds"].fillna(0), s["seeds"].fillna("")], axis=-1),
                hovertemplate="%{x}<br>" + scheme_label(scheme) + ": %{y:.2f} % (%{customdata[0]} seeds: "
                              "%{customdata[1]})<extra></extra>"), row=1, col=c)
        paper = d.dropna(subset=["paper"]).drop_duplicates("scheme")
        if len(paper):
            fig.add_trace(go.Scatter(
                x=[SETTINGS["authors"] if s != "mla" else SETTINGS["authors-mla"] for s in paper["scheme"]],
                y=100 * paper["paper"], mode="markers", name="paper (one run)", legendgroup="paper",
                marker=dict(symbol="diamond", color="black", size=10),
                text=[scheme_label(s) for s in paper["scheme"]],
                hovertemplate="paper, %{text}: %{y:.2f} %<extra></extra>"), row=1, col=c)
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="test accuracy (%)", range=[0, 105], row=1, col=1)
    return style.layout(fig, "Table 1: the paper's test accuracy and PE-Lab's (mean and 95 % interval over seeds)",
                        height=460)


FIGURES = {"table1": table1}
