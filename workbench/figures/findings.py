"""Figures of the reproduction's findings, from the tables of `workbench.analysis.claims`."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis._common import scheme_label, task_label

from . import style


SCHEMES = ("mla", "rope", "nope")
BAR_WIDTH = 0.26  # up to three bars per setting, side by side and centred on the setting's label
ONE_SEED_PATTERN = "/"  # a bar of one seed (no interval) is hatched
MARK_MERGE = 0.02  # a length-only level within 2 points of chance is not drawn apart from it (Task 2)


def _wrap(label: str, width: int = 12) -> str:
    """A tick label broken into lines of about `width` characters (so no panel needs rotated labels)."""
    lines, cur = [], ""
    for word in label.split():
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}".strip()
    return "<br>".join(lines + [cur])


def _level_marks(fig, d: pd.DataFrame, settings: list, column: str, kind: str, label: str, col: int) -> None:
    """A short grey segment per setting across its group of bars at the level `column` (chance, length-only),
    one legend trace flagged meta.baseline = kind; nothing when the table lacks the column."""
    if column not in d.columns:
        return
    lv = d.groupby("setting")[column].mean()
    xs, ys = [], []
    for i, s in enumerate(settings):
        if s in lv.index and np.isfinite(lv[s]):
            xs += [i - 0.45, i + 0.45, None]
            ys += [100 * lv[s], 100 * lv[s], None]
    if xs:
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=label, legendgroup=kind, meta={"baseline": kind},
                                 line=dict(color=style.BASELINE_COLOR, dash=style.BASELINE_DASH.get(kind, "dot"),
                                           width=1.5),
                                 hovertemplate=f"{label}: %{{y:.1f}} %<extra></extra>"), row=1, col=col)


def table1(df: pd.DataFrame) -> go.Figure:
    """The paper's Table 1 beside PE-Lab's: one panel per task; per setting, a bar per scheme present, centred
    on the setting's label, with the seeds' range as whiskers (claims.table1's lo / hi; a bar of one seed is hatched:
    no range), and
    on every bar the paper's number for that scheme as a black diamond (the paper ran one setting; the diamond is
    the target each setting is compared with). When the table has `chance` / `length_only` columns (per
    setting and task, from `claims.table1`), each setting's levels are grey marks across its bars
    (length-only only where it is more than MARK_MERGE above chance). Traces: one bar trace per scheme
    present, one marker trace per task for the paper, one per baseline present, and the one-seed legend key."""
    from workbench.analysis.claims import SETTINGS

    tasks = [t for t in ("trigger-distance", "trigger-count") if t in set(df["task"])]
    fig = make_subplots(rows=1, cols=max(1, len(tasks)), subplot_titles=[task_label(t) for t in tasks],
                        shared_yaxes=True, horizontal_spacing=0.06)
    one_seed = False
    for c, task in enumerate(tasks, 1):
        d = df[df["task"] == task]
        settings = [s for s in SETTINGS if s in set(d["setting"])]
        present = {s: [k for k in SCHEMES if ((d["setting"] == s) & (d["scheme"] == k) & d["mean"].notna()).any()]
                   for s in settings}
        px, py, pt = [], [], []
        for scheme in SCHEMES:
            s = d[d["scheme"] == scheme].set_index("setting").reindex(settings)
            if s["mean"].isna().all():
                continue
            have = s["mean"].notna().to_numpy()
            x = np.array([i + (present[st].index(scheme) - (len(present[st]) - 1) / 2) * BAR_WIDTH
                          if scheme in present[st] else np.nan for i, st in enumerate(settings)])
            err_hi, err_lo = s["hi"] - s["mean"], s["mean"] - s["lo"]  # NaN (one seed): no bar drawn
            n = s["n_seeds"].fillna(0).astype(int).to_numpy()
            one_seed |= bool(((n == 1) & have).any())
            fig.add_trace(go.Bar(
                x=x[have], y=100 * s["mean"][have], width=BAR_WIDTH, name=scheme_label(scheme), legendgroup=scheme,
                marker=dict(color=style.scheme_color(scheme),
                            pattern=dict(shape=[ONE_SEED_PATTERN if k == 1 else "" for k in n[have]],
                                         fillmode="overlay", fgcolor="white")),
                error_y=dict(type="data", array=100 * err_hi[have], arrayminus=100 * err_lo[have], visible=True),
                customdata=np.stack([[SETTINGS[k] for k in np.array(settings)[have]], n[have],
                                     s["seeds"].fillna("")[have]], axis=-1),
                hovertemplate="%{customdata[0]}<br>" + scheme_label(scheme) + ": %{y:.2f} % (%{customdata[1]} "
                              "seeds: %{customdata[2]})<extra></extra>"), row=1, col=c)
            ok = have & s["paper"].notna().to_numpy()
            px += list(x[ok])
            py += list(100 * s["paper"].to_numpy()[ok])
            pt += [scheme_label(scheme)] * int(ok.sum())
        _level_marks(fig, d, settings, "chance", "chance", "chance", c)  # drawn over the bars
        if {"chance", "length_only"} <= set(d.columns):  # where length-only is chance (Task 2), one mark says both
            d = d.assign(length_only=d["length_only"].where((d["length_only"] - d["chance"]).abs() > MARK_MERGE))
        _level_marks(fig, d, settings, "length_only", "length-only", "best length-only predictor", c)
        if px:
            fig.add_trace(go.Scatter(x=px, y=py, mode="markers", name="paper (one run)", legendgroup="paper",
                                     marker=dict(symbol="diamond", color="black", size=10), text=pt,
                                     hovertemplate="paper, %{text}: %{y:.2f} %<extra></extra>"), row=1, col=c)
        fig.update_xaxes(tickvals=list(range(len(settings))), ticktext=[_wrap(SETTINGS[k]) for k in settings],
                         tickangle=0, range=[-0.5, len(settings) - 0.5], row=1, col=c)
    if one_seed:  # the legend key of the hatching
        fig.add_trace(go.Bar(x=[None], y=[None], name="hatched: one seed (no interval)", legendgroup="one seed",
                             marker=dict(color="#bbbbbb", pattern=dict(shape=ONE_SEED_PATTERN, fgcolor="white"))),
                      row=1, col=1)
    fig.update_yaxes(title_text="test accuracy (%)", range=[0, 105], row=1, col=1)
    return style.layout(fig, "Table 1: the paper's test accuracy (diamonds) and PE-Lab's (bars: mean over seeds, "
                             "whiskers: the seeds' range)", height=480)


FIGURES = {"table1": table1}
