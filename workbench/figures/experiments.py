"""Experiments over sets of runs: partial RoPE, RoPE vs RoPE+sinusoidal, MLA vs RoPE vs NoPE,
convergence (seed 003, sections 4-5)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis._common import scheme_label, task_label
from workbench.figures import style as S


def partial_rope(df: pd.DataFrame) -> go.Figure:
    """Per task: heatmaps of test accuracy and of the deepest deposit layer over (k heads x RoPE layer),
    means over seeds: 2 traces per task."""
    tasks = list(df["task"].unique())
    fig = make_subplots(rows=len(tasks), cols=2, subplot_titles=[
        t for task in tasks for t in (f"{task_label(task)}: test accuracy", f"{task_label(task)}: deepest deposit layer")])
    for r, task in enumerate(tasks, 1):
        sub = df[df["task"] == task].copy()
        sub["layer_label"] = sub["layer"].map(lambda l: "every" if l == -1 else ("mixed" if l == -2 else str(l)))
        for c, (col, scale) in enumerate((("test_acc", "Viridis"), ("deepest_deposit_layer", "Cividis")), 1):
            z = sub.groupby(["layer_label", "k"])[col].mean().unstack("k")
            fig.add_trace(go.Heatmap(z=z.values, x=[str(k) for k in z.columns], y=list(z.index), colorscale=scale,
                                     showscale=False, hovertemplate="layer %{y}, k %{x}: %{z:.3f}<extra></extra>"),
                          row=r, col=c)
    fig.update_xaxes(title_text="k (heads with RoPE)")
    fig.update_yaxes(title_text="RoPE layer")
    return S.layout(fig, "Partial RoPE")


def rope_vs_rope_sinusoidal(df: pd.DataFrame) -> go.Figure:
    """Top-head delta per layer, mean over seeds, one line per scheme (and task if several)."""
    fig = go.Figure()
    for (scheme, task), sub in df.groupby(["scheme", "task"]):
        m = sub.groupby("layer")["top_delta"].mean()
        single = sub.groupby("layer")["pattern"].agg(lambda p: (p == "single-head").mean())
        fig.add_trace(go.Scatter(x=m.index, y=m.values, mode="lines+markers",
                                 name=f"{scheme_label(scheme)} {task_label(task)}",
                                 text=[f"single-head in {s:.0%} of seeds" for s in single.values]))
    fig.update_xaxes(title_text="layer", dtick=1)
    fig.update_yaxes(title_text="delta of the top head")
    return S.layout(fig, "RoPE vs RoPE+sinusoidal: where the deposit sits")


def mla_rope_nope(df: pd.DataFrame) -> go.Figure:
    """Grouped bars: PE-Lab test accuracy (mean over seeds) and the paper's Table 1 (2 traces)."""
    g = df.groupby(["scheme", "task"]).agg(test_acc=("test_acc", "mean"), paper=("paper_test_acc", "first"),
                                            single=("n_single_deposits", "mean")).reset_index()
    x = [f"{scheme_label(s)}, {task_label(t)}" for s, t in zip(g["scheme"], g["task"])]
    fig = go.Figure([go.Bar(x=x, y=g["test_acc"], name="PE-Lab", text=[f"{s:.1f} single deposits" for s in g["single"]]),
                     go.Bar(x=x, y=g["paper"], name="paper (Table 1)")])
    fig.update_yaxes(title_text="test accuracy", range=[0, 1.02])
    return S.layout(fig, "MLA vs RoPE vs NoPE", barmode="group")


def convergence(df: pd.DataFrame, metric: str = "accuracy") -> go.Figure:
    """Per task a panel; per label (scheme, or scheme + kwargs / tag) two lines (train dashed, test solid),
    mean over seeds: 2 x n_labels traces per task."""
    d = df[df["metric"] == metric]
    tasks = list(d["task"].unique())
    fig = make_subplots(rows=1, cols=max(len(tasks), 1), subplot_titles=[task_label(t) for t in tasks])
    for c, task in enumerate(tasks, 1):
        key = "label" if "label" in d.columns else "scheme"
        for (label, split), sub in d[d["task"] == task].groupby([key, "split"]):
            m = sub.groupby("epoch")["value"].mean()
            name = scheme_label(label) if key == "scheme" else label
            fig.add_trace(go.Scatter(x=m.index, y=m.values, mode="lines", name=f"{name} {split}",
                                     legendgroup=label, line=dict(dash="dash" if split == "train" else "solid")),
                          row=1, col=c)
        fig.update_xaxes(title_text="epoch", row=1, col=c)
    fig.update_yaxes(title_text=metric)
    return S.layout(fig, f"Convergence ({metric})")


FIGURES = {
    "partial_rope": partial_rope,
    "rope_vs_rope_sinusoidal": rope_vs_rope_sinusoidal,
    "mla_rope_nope": mla_rope_nope,
    "convergence": convergence,
}
