"""Experiments over sets of runs: partial RoPE, RoPE vs RoPE+sinusoidal, MLA vs RoPE vs NoPE,
convergence (seed 003, sections 4-5). Tasks always get their own panels (their labels and lengths differ)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis._common import scheme_label, task_label
from workbench.figures import style as S
from workbench.figures.extrapolation import add_accuracy_baselines


def _layer_label(l: int) -> str:
    return "every" if l == -1 else ("mixed" if l == -2 else str(int(l)))


def partial_rope(df: pd.DataFrame) -> go.Figure:
    """Per task: heatmaps of test accuracy and of the deepest deposit layer over (k heads x RoPE layer),
    means over seeds, values in the cells and a labelled colour bar beside each panel: 2 traces per task."""
    tasks = S.tasks_of(df)
    fig = make_subplots(rows=len(tasks), cols=2, horizontal_spacing=0.2, vertical_spacing=0.22 / max(len(tasks), 1),
                        subplot_titles=[t for task in tasks for t in (f"{task_label(task)}: test accuracy",
                                                                      f"{task_label(task)}: deepest deposit layer")])
    for r, task in enumerate(tasks, 1):
        sub = df[df["task"] == task].copy()
        sub["layer_label"] = sub["layer"].map(_layer_label)
        panels = (("test_acc", "test accuracy", ".3f", (0, 1)),
                  ("deepest_deposit_layer", "layer (mean over seeds)", ".1f", (None, None)))
        for c, (col, bar, fmt, lim) in enumerate(panels, 1):
            z = sub.groupby(["layer_label", "k"])[col].mean().unstack("k")
            z.columns = [int(k) for k in z.columns]
            fig.add_trace(S.heatmap(z, colorbar_title=bar, fig=fig, row=r, col=c, zmin=lim[0], zmax=lim[1], fmt=fmt,
                                    colorscale="Viridis" if c == 1 else "Cividis", name=f"{task_label(task)} {bar}",
                                    hover="RoPE layer %{y}, k %{x}: %{z:" + fmt + "}<extra></extra>"), row=r, col=c)
            S.category_axes(fig, z, "k (heads with RoPE)", "RoPE layer" if c == 1 else "", row=r, col=c,
                            reverse_y=False)
    return S.layout(fig, "Partial RoPE (blank cell: no deposit)", height=max(380, 330 * len(tasks) + 60))


def rope_vs_rope_sinusoidal(df: pd.DataFrame) -> go.Figure:
    """Per task a panel; top-head delta per layer, mean over seeds, one line per scheme in its colour (hover:
    share of seeds with a single-head deposit)."""
    tasks = S.tasks_of(df)
    fig = make_subplots(rows=1, cols=max(len(tasks), 1), subplot_titles=[task_label(t) for t in tasks])
    for c, task in enumerate(tasks, 1):
        for scheme, sub in df[df["task"] == task].groupby("scheme"):
            m = sub.groupby("layer")["top_delta"].mean()
            single = sub.groupby("layer")["pattern"].agg(lambda p: (p == "single-head").mean())
            fig.add_trace(go.Scatter(x=m.index, y=m.values, mode="lines+markers", name=scheme_label(scheme),
                                     legendgroup=scheme, line=dict(color=S.scheme_color(scheme)),
                                     text=[f"single-head in {s:.0%} of seeds" for s in single.values]), row=1, col=c)
        S.integer_axis(fig, df["layer"], "x", row=1, col=c, title_text="layer")
        fig.update_yaxes(title_text="Δ of the top head" if c == 1 else "", row=1, col=c)
    return S.layout(fig, "RoPE vs RoPE+sinusoidal: where the deposit sits")


def mla_rope_nope(df: pd.DataFrame) -> go.Figure:
    """Grouped bars per (scheme, task): PE-Lab test accuracy (mean over seeds, the scheme's colour) and the
    paper's Table 1 (same colour, hatched): 2 traces."""
    g = df.groupby(["task", "scheme"]).agg(test_acc=("test_acc", "mean"), paper=("paper_test_acc", "first"),
                                            single=("n_single_deposits", "mean")).reset_index()
    order = {t: i for i, t in enumerate(S.tasks_of(g))}
    g = g.sort_values(["task", "scheme"], key=lambda c: c.map(order) if c.name == "task" else
                      c.map({"mla": 0, "rope": 1, "nope": 2}).fillna(3), ignore_index=True)  # the paper's order
    x = [f"{scheme_label(s)}, {task_label(t)}" for s, t in zip(g["scheme"], g["task"])]
    colors = [S.scheme_color(s) for s in g["scheme"]]
    fig = go.Figure([go.Bar(x=x, y=g["test_acc"], name="PE-Lab", marker_color=colors,
                            text=[f"{a:.3f}" for a in g["test_acc"]], textposition="outside",
                            customdata=g["single"], hovertemplate="%{x}: %{y:.3f}<br>%{customdata:.1f} single "
                                                                  "deposits<extra>PE-Lab</extra>"),
                     go.Bar(x=x, y=g["paper"], name="paper (Table 1)", marker=dict(color=colors, opacity=0.45,
                                                                                    pattern_shape="/"),
                            text=[f"{a:.3f}" for a in g["paper"]], textposition="outside")])
    fig.update_yaxes(title_text="test accuracy", range=[0, 1.1])
    return S.layout(fig, "MLA vs RoPE vs NoPE", barmode="group")


def _label_colors(d: pd.DataFrame, key: str) -> dict:
    """Colour per label: its scheme's colour; the plain scheme keeps it, other labels of the scheme (tags, kwargs)
    get lighter shades of it."""
    schemes = d.groupby(key)["scheme"].first() if "scheme" in d.columns else pd.Series({l: l for l in d[key].unique()})
    out = {}
    for scheme, labels in schemes.groupby(schemes):
        base = S.scheme_color(scheme)
        for i, label in enumerate(sorted(labels.index, key=lambda l: (l != scheme, str(l)))):  # the plain scheme first
            out[label] = S.shade(base, i, len(labels))
    return out


def convergence(df: pd.DataFrame, metric: str = "accuracy") -> go.Figure:
    """Per task a panel; per label (scheme, or scheme + kwargs / tag) two lines (train dashed, test solid) in
    the scheme's colour, mean over seeds, one legend entry per label: 2 x n_labels traces per task, plus chance
    and the best length-only predictor (test split) when metric = accuracy and the table carries them."""
    d = df[df["metric"] == metric]
    tasks = S.tasks_of(d)
    key = "label" if "label" in d.columns else "scheme"
    colors = _label_colors(d, key)
    fig = make_subplots(rows=1, cols=max(len(tasks), 1), subplot_titles=[task_label(t) for t in tasks],
                        horizontal_spacing=0.08)
    for c, task in enumerate(tasks, 1):
        dt = d[d["task"] == task]
        for (label, split), sub in dt.groupby([key, "split"]):
            m = sub.groupby("epoch")["value"].mean()
            name = scheme_label(label) if key == "scheme" else _pretty(label)
            test = split == "test"  # one legend entry per label (its test line); the train line joins its group
            fig.add_trace(go.Scatter(x=m.index, y=m.values, mode="lines+markers",
                                     name=name if test else f"{name} ({split})",
                                     legendgroup=label, showlegend=None if test else False, marker=dict(size=4),
                                     line=dict(color=colors[label], dash=S.SPLIT_DASH.get(split, "solid")),
                                     hovertemplate=f"{name}, {split}: " + "epoch %{x}, %{y:.3f}<extra></extra>"),
                          row=1, col=c)
        if metric == "accuracy":
            add_accuracy_baselines(fig, dt[dt["split"] == "test"], "epoch", 1, c)
        S.integer_axis(fig, dt["epoch"], "x", row=1, col=c, title_text="epoch")
        fig.update_yaxes(title_text=metric if c == 1 else "", row=1, col=c,
                         **({"range": [0, 1.02]} if metric == "accuracy" else {}))
    return S.layout(fig, f"Training curves ({metric}; train dashed, test solid; mean over seeds)")


def _pretty(label: str) -> str:
    """A convergence label `scheme {kwargs}` with the scheme's display name."""
    head, _, rest = str(label).partition(" ")
    return f"{scheme_label(head)} {rest}".strip() if head in S.SCHEME_COLORS else str(label)


FIGURES = {
    "partial_rope": partial_rope,
    "rope_vs_rope_sinusoidal": rope_vs_rope_sinusoidal,
    "mla_rope_nope": mla_rope_nope,
    "convergence": convergence,
}
