"""Figures: one function per analysis table, `DataFrame -> plotly.graph_objects.Figure`, built from the table
alone (no run, no model). The dashboard, the reports and the notebooks all call these.

    from workbench.figures import FIGURES
    fig = FIGURES["ablation"](run.load_table("ablation"))

Table schemas: docs/analyses.md. Trace counts are part of the contract (tests check them) and are given in
each docstring.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis._common import scheme_label, task_label


def _title(df: pd.DataFrame, what: str) -> str:
    bits = []
    if "scheme" in df.columns and df["scheme"].nunique() == 1:
        bits.append(scheme_label(df["scheme"].iloc[0]))
    if "task" in df.columns and df["task"].nunique() == 1:
        bits.append(task_label(df["task"].iloc[0]))
    return f"{what} — {', '.join(b for b in bits if b)}" if bits else what


def _layout(fig: go.Figure, title: str, **kw) -> go.Figure:
    fig.update_layout(title=title, template="plotly_white", margin=dict(l=60, r=20, t=60, b=50), **kw)
    return fig


def _grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = min(n, max_cols)
    return math.ceil(n / cols), cols


# ---- ablation and deposit --------------------------------------------------------------------
def ablation(df: pd.DataFrame, metric: str = "accuracy") -> go.Figure:
    """Heatmap of delta (layer x head) for `metric`, one trace per ablation mode present. Hover: interval."""
    d = df[df["metric"] == metric]
    modes = list(d["mode"].unique()) if "mode" in d.columns else ["zero"]
    fig = make_subplots(rows=1, cols=len(modes), subplot_titles=[f"{m}-ablation" for m in modes])
    vmax = float(np.nanmax(np.abs(d["delta"]))) if len(d) else 1.0
    for i, mode in enumerate(modes, 1):
        sub = d[d["mode"] == mode] if "mode" in d.columns else d
        z = sub.pivot(index="layer", columns="head", values="delta")
        lo = sub.pivot(index="layer", columns="head", values="ci_lo").reindex_like(z)
        hi = sub.pivot(index="layer", columns="head", values="ci_hi").reindex_like(z)
        text = [[f"[{a:.3f}, {b:.3f}]" for a, b in zip(ra, rb)] for ra, rb in zip(lo.values, hi.values)]
        fig.add_trace(go.Heatmap(z=z.values, x=list(z.columns), y=list(z.index), text=text, zmid=0,
                                 zmin=-vmax, zmax=vmax, colorscale="RdBu_r", colorbar=dict(title="delta"),
                                 hovertemplate="layer %{y}, head %{x}<br>delta %{z:.3f} %{text}<extra></extra>",
                                 showscale=i == 1), row=1, col=i)
        fig.update_xaxes(title_text="head", row=1, col=i)
        fig.update_yaxes(title_text="layer", autorange="reversed", row=1, col=i)
    return _layout(fig, _title(df, f"Head ablation: {metric}(clean) − {metric}(ablated)"))


def ablation_layers(df: pd.DataFrame, metric: str = "accuracy", mode: str | None = None) -> go.Figure:
    """The paper's per-layer view: delta vs head with interval bars, one trace per layer."""
    d = df[df["metric"] == metric]
    if mode is not None or ("mode" in d.columns and d["mode"].nunique() > 1):
        d = d[d["mode"] == (mode or d["mode"].iloc[0])]
    fig = go.Figure()
    for layer, sub in d.groupby("layer"):
        sub = sub.sort_values("head")
        fig.add_trace(go.Scatter(x=sub["head"], y=sub["delta"], mode="lines+markers", name=f"layer {layer}",
                                 error_y=dict(type="data", symmetric=False, array=sub["ci_hi"] - sub["delta"],
                                              arrayminus=sub["delta"] - sub["ci_lo"])))
    fig.update_xaxes(title_text="head")
    fig.update_yaxes(title_text=f"delta {metric}")
    return _layout(fig, _title(df, f"Head ablation by layer ({metric})"))


def deposit(df: pd.DataFrame) -> go.Figure:
    """Two traces: top-head delta per layer (bars coloured by pattern, with its interval) and the
    concentration C_l (line, right axis)."""
    d = df.sort_values("layer")
    colors = d["pattern"].map({"single-head": "#d62728", "average": "#ff7f0e", "none": "#7f7f7f"})
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=d["layer"], y=d["top_delta"], marker_color=colors, name="top-head delta",
                         text=[f"h{h} {p}" for h, p in zip(d["top_head"], d["pattern"])],
                         error_y=dict(type="data", symmetric=False, array=d["top_hi"] - d["top_delta"],
                                      arrayminus=d["top_delta"] - d["top_lo"])), secondary_y=False)
    fig.add_trace(go.Scatter(x=d["layer"], y=d["concentration"], mode="lines+markers", name="concentration C_l"),
                  secondary_y=True)
    fig.update_xaxes(title_text="layer", dtick=1)
    fig.update_yaxes(title_text="delta of the top head", secondary_y=False)
    fig.update_yaxes(title_text="C_l", range=[0, 1.05], secondary_y=True)
    return _layout(fig, _title(df, "Deposit pattern"))


# ---- q/k means and angles --------------------------------------------------------------------
def qk_means(df: pd.DataFrame) -> go.Figure:
    """Rows q and k; one line per layer and tensor (2 x n_layers traces); under-trained dims shaded."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=["q (pre-rotation)", "k (pre-rotation)"])
    for r, w in enumerate(("q", "k"), 1):
        for layer, sub in df[df["tensor"] == w].groupby("layer"):
            sub = sub.sort_values("dim")
            fig.add_trace(go.Scatter(x=sub["dim"], y=sub["mean"], mode="lines", name=f"{w} layer {layer}",
                                     legendgroup=f"layer {layer}"), row=r, col=1)
    under = sorted(df.loc[df["undertrained"], "dim"].unique())
    for dim in under:
        fig.add_vrect(x0=dim - 0.5, x1=dim + 0.5, fillcolor="orange", opacity=0.15, line_width=0)
    fig.update_xaxes(title_text="dimension (shaded: frequency completes < 1 cycle in the training length)",
                     row=2, col=1)
    fig.update_yaxes(title_text="mean over tokens, averaged over heads")
    return _layout(fig, _title(df, "q/k per-dimension means"))


def angles(df: pd.DataFrame, value: str = "share_anomalous") -> go.Figure:
    """One heatmap per layer (n_layers traces): `value` per head (rows) and rotary plane (columns)."""
    layers = sorted(df["layer"].unique())
    rows, cols = _grid(len(layers))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[f"layer {l}" for l in layers])
    vmax = float(df[value].max()) if len(df) else 1.0
    for i, layer in enumerate(layers):
        sub = df[df["layer"] == layer]
        z = sub.pivot(index="head", columns="plane", values=value)
        fig.add_trace(go.Heatmap(z=z.values, x=list(z.columns), y=list(z.index), zmin=0, zmax=max(vmax, 1e-9),
                                 colorscale="Viridis", showscale=i == 0, colorbar=dict(title=value),
                                 hovertemplate="head %{y}, plane %{x}<br>%{z:.3f}<extra></extra>"),
                      row=i // cols + 1, col=i % cols + 1)
    fig.update_xaxes(title_text="rotary plane j")
    fig.update_yaxes(title_text="head")
    return _layout(fig, _title(df, f"Initial angles: {value.replace('_', ' ')}"))


# ---- spectral --------------------------------------------------------------------------------
def spectral(df: pd.DataFrame) -> go.Figure:
    """Left: explained variance of the Toeplitz part (heatmap layer x head, 1 trace). Right: the
    relative-offset profile averaged over heads, one line per layer (n_layers traces)."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.4, 0.6],
                        subplot_titles=["Toeplitz share of logit variance", "relative-offset profile (mean over heads)"])
    per_head = df.drop_duplicates(["layer", "head"])
    z = per_head.pivot(index="layer", columns="head", values="explained_var")
    fig.add_trace(go.Heatmap(z=z.values, x=list(z.columns), y=list(z.index), zmin=0, zmax=1, colorscale="Viridis",
                             colorbar=dict(title="R²", x=0.38),
                             hovertemplate="layer %{y}, head %{x}<br>explained %{z:.3f}<extra></extra>"),
                  row=1, col=1)
    for layer, sub in df.groupby("layer"):
        prof = sub.groupby("offset")["mean_logit"].mean()
        fig.add_trace(go.Scatter(x=prof.index, y=prof.values, mode="lines", name=f"layer {layer}"), row=1, col=2)
    fig.update_xaxes(title_text="head", row=1, col=1)
    fig.update_yaxes(title_text="layer", autorange="reversed", row=1, col=1)
    fig.update_xaxes(title_text="offset k − q", row=1, col=2)
    fig.update_yaxes(title_text="mean logit", row=1, col=2)
    return _layout(fig, _title(df, "Toeplitz structure of the attention logits"))


def spectral_eigen(df: pd.DataFrame) -> go.Figure:
    """Eigenvalue range of the Toeplitz part per head, one bar trace per layer."""
    per_head = df.drop_duplicates(["layer", "head"])
    fig = go.Figure()
    for layer, sub in per_head.groupby("layer"):
        fig.add_trace(go.Bar(x=sub["head"], y=sub["eig_range"], name=f"layer {layer}",
                             customdata=np.stack([sub["eig_min"], sub["eig_max"], sub["cond"]], -1),
                             hovertemplate="head %{x}: [%{customdata[0]:.3g}, %{customdata[1]:.3g}], "
                                           "cond %{customdata[2]:.3g}<extra></extra>"))
    fig.update_xaxes(title_text="head")
    fig.update_yaxes(title_text="eigenvalue range of (T + Tᵀ)/2")
    return _layout(fig, _title(df, "Spectrum of the Toeplitz part"), barmode="group")


def hadamard_check(df: pd.DataFrame) -> go.Figure:
    """Eigenvalue range of T∘E vs T, one scatter trace per modulation kind, plus the diagonal (kinds + 1)."""
    fig = go.Figure()
    for kind, sub in df.groupby("kind"):
        fig.add_trace(go.Scatter(x=sub["range_T"], y=sub["range_H"], mode="markers", name=kind,
                                 text=[f"n={n}" for n in sub["n"]]))
    top = float(max(df["range_T"].max(), df["range_H"].max())) if len(df) else 1.0
    fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="no contraction",
                             line=dict(dash="dash", color="gray")))
    fig.update_xaxes(title_text="eigenvalue range of T (additive)")
    fig.update_yaxes(title_text="eigenvalue range of T ∘ E (multiplicative)")
    return _layout(fig, "Hadamard product with a Toeplitz modulation (Lemma B.1 check)")


# ---- distance bias ---------------------------------------------------------------------------
def distance_bias(df: pd.DataFrame) -> go.Figure:
    """Histogram of S(near) − S(far) summed over heads, one bar trace per layer (overlaid)."""
    fig = go.Figure()
    for layer, sub in df.groupby("layer"):
        h = sub.groupby(["bin_lo", "bin_hi"])["count"].sum().reset_index()
        total = max(h["count"].sum(), 1)
        mean = sub.drop_duplicates("head")["mean_diff"].mean()
        fig.add_trace(go.Bar(x=(h["bin_lo"] + h["bin_hi"]) / 2, y=h["count"] / total, width=h["bin_hi"] - h["bin_lo"],
                             name=f"layer {layer} (mean {mean:.2f})", opacity=0.55))
    fig.add_vline(x=0, line_dash="dash", line_color="gray")
    fig.update_xaxes(title_text="logit(near key) − logit(far key)")
    fig.update_yaxes(title_text="share of pairs")
    return _layout(fig, _title(df, "Distance bias"), barmode="overlay")


def rope_expected_score(df: pd.DataFrame) -> go.Figure:
    """Per q/k mean: analytic expectation (line) and Monte Carlo mean (markers): 2 traces per mean."""
    fig = go.Figure()
    for mu, sub in df.groupby("q_mean"):
        fig.add_trace(go.Scatter(x=sub["distance"], y=sub["expected_score"], mode="lines", name=f"mean {mu:g} (analytic)"))
        fig.add_trace(go.Scatter(x=sub["distance"], y=sub["mc_mean"], mode="markers", marker=dict(size=3),
                                 name=f"mean {mu:g} (Monte Carlo)", opacity=0.6))
    fig.update_xaxes(title_text="relative distance m − n")
    fig.update_yaxes(title_text="E[q′·k′]")
    return _layout(fig, "Expected RoPE score vs. distance (FoPE Fig. 8)")


# ---- extrapolation ---------------------------------------------------------------------------
def extrapolation(df: pd.DataFrame) -> go.Figure:
    """Accuracy (left axis) and loss (right axis) vs. longest test length: 2 traces per run/scheme in the table."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    key = "run_id" if "run_id" in df.columns and df["run_id"].nunique() > 1 else None
    groups = df.groupby(key) if key else [(None, df)]
    for name, sub in groups:
        sub = sub.sort_values("max_len")
        label = f"{sub['scheme'].iloc[0]} " if "scheme" in sub.columns and key else ""
        err = None
        if "acc_lo" in sub.columns:
            err = dict(type="data", symmetric=False, array=sub["acc_hi"] - sub["accuracy"],
                       arrayminus=sub["accuracy"] - sub["acc_lo"])
        fig.add_trace(go.Scatter(x=sub["max_len"], y=sub["accuracy"], mode="lines+markers", name=f"{label}accuracy",
                                 text=sub["split"], error_y=err), secondary_y=False)
        fig.add_trace(go.Scatter(x=sub["max_len"], y=sub["loss"], mode="lines+markers", name=f"{label}loss",
                                 text=sub["split"], line=dict(dash="dot")), secondary_y=True)
    if "train_len" in df.columns:
        fig.add_vline(x=float(df["train_len"].iloc[0]), line_dash="dash", line_color="gray")
    fig.update_xaxes(title_text="longest sequence in the split (tokens; dashed: training length)")
    fig.update_yaxes(title_text="accuracy", range=[0, 1.02], secondary_y=False)
    fig.update_yaxes(title_text="loss", secondary_y=True)
    return _layout(fig, _title(df, "Length extrapolation"))


# ---- experiments over runs -------------------------------------------------------------------
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
    return _layout(fig, "Partial RoPE")


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
    return _layout(fig, "RoPE vs RoPE+sinusoidal: where the deposit sits")


def mla_rope_nope(df: pd.DataFrame) -> go.Figure:
    """Grouped bars: PE-Lab test accuracy (mean over seeds) and the paper's Table 1 (2 traces)."""
    g = df.groupby(["scheme", "task"]).agg(test_acc=("test_acc", "mean"), paper=("paper_test_acc", "first"),
                                            single=("n_single_deposits", "mean")).reset_index()
    x = [f"{scheme_label(s)}, {task_label(t)}" for s, t in zip(g["scheme"], g["task"])]
    fig = go.Figure([go.Bar(x=x, y=g["test_acc"], name="PE-Lab", text=[f"{s:.1f} single deposits" for s in g["single"]]),
                     go.Bar(x=x, y=g["paper"], name="paper (Table 1)")])
    fig.update_yaxes(title_text="test accuracy", range=[0, 1.02])
    return _layout(fig, "MLA vs RoPE vs NoPE", barmode="group")


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
    return _layout(fig, f"Convergence ({metric})")


FIGURES = {
    "ablation": ablation,
    "ablation_mean": ablation,
    "ablation_layers": ablation_layers,
    "deposit": deposit,
    "qk_means": qk_means,
    "angles": angles,
    "spectral": spectral,
    "spectral_eigen": spectral_eigen,
    "hadamard_check": hadamard_check,
    "distance_bias": distance_bias,
    "rope_expected_score": rope_expected_score,
    "extrapolation": extrapolation,
    "partial_rope": partial_rope,
    "rope_vs_rope_sinusoidal": rope_vs_rope_sinusoidal,
    "mla_rope_nope": mla_rope_nope,
    "convergence": convergence,
    "ablation_resample": ablation,
}

__all__ = ["FIGURES", *dict.fromkeys(f.__name__ for f in FIGURES.values())]

from . import heads  # noqa: E402  (issue 14's builders, in their own module; it uses _title/_layout above)

FIGURES.update(heads.FIGURES)
