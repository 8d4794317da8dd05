"""Figures of the reproduction's findings, from the tables of `workbench.analysis.claims`."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis._common import scheme_label, task_label

from . import style


SCHEMES = ("mla", "rope", "nope")
BAR_WIDTH = 0.26  # three bars per setting, side by side at x = setting index + offset


def table1(df: pd.DataFrame) -> go.Figure:
    """The paper's Table 1 beside PE-Lab's: one panel per task; per setting, a bar per scheme with the 95 %
    interval over seeds, and on every bar the paper's number for that scheme as a black diamond (the paper ran
    one setting; the diamond is the target each setting is compared with). Traces: one bar trace per scheme
    present and one marker trace per task for the paper."""
    from workbench.analysis.claims import SETTINGS

    tasks = [t for t in ("trigger-distance", "trigger-count") if t in set(df["task"])]
    fig = make_subplots(rows=1, cols=max(1, len(tasks)), subplot_titles=[task_label(t) for t in tasks],
                        shared_yaxes=True, horizontal_spacing=0.06)
    for c, task in enumerate(tasks, 1):
        d = df[df["task"] == task]
        settings = [s for s in SETTINGS if s in set(d["setting"])]
        px, py, pt = [], [], []
        for k, scheme in enumerate(SCHEMES):
            s = d[d["scheme"] == scheme].set_index("setting").reindex(settings)
            if s["mean"].isna().all():
                continue
            x = np.arange(len(settings)) + (k - 1) * BAR_WIDTH
            err_hi, err_lo = (s["hi"] - s["mean"]).fillna(0), (s["mean"] - s["lo"]).fillna(0)
            fig.add_trace(go.Bar(
                x=x, y=100 * s["mean"], width=BAR_WIDTH, name=scheme_label(scheme), legendgroup=scheme,
                marker_color=style.scheme_color(scheme),
                error_y=dict(type="data", array=100 * err_hi, arrayminus=100 * err_lo, visible=True),
                customdata=np.stack([[SETTINGS[k] for k in settings], s["n_seeds"].fillna(0), s["seeds"].fillna("")],
                                    axis=-1),
                hovertemplate="%{customdata[0]}<br>" + scheme_label(scheme) + ": %{y:.2f} % (%{customdata[1]} "
                              "seeds: %{customdata[2]})<extra></extra>"), row=1, col=c)
            have = s["mean"].notna().to_numpy() & s["paper"].notna().to_numpy()
            px += list(x[have])
            py += list(100 * s["paper"].to_numpy()[have])
            pt += [scheme_label(scheme)] * int(have.sum())
        if px:
            fig.add_trace(go.Scatter(x=px, y=py, mode="markers", name="paper (one run)", legendgroup="paper",
                                     marker=dict(symbol="diamond", color="black", size=10), text=pt,
                                     hovertemplate="paper, %{text}: %{y:.2f} %<extra></extra>"), row=1, col=c)
        fig.update_xaxes(tickvals=list(range(len(settings))), ticktext=[SETTINGS[k] for k in settings],
                         range=[-0.5, len(settings) - 0.5], row=1, col=c)
    fig.update_yaxes(title_text="test accuracy (%)", range=[0, 105], row=1, col=1)
    return style.layout(fig, "Table 1: the paper's test accuracy (diamonds) and PE-Lab's (bars: mean and 95 % "
                             "interval over seeds)", height=460)


FIGURES = {"table1": table1}
