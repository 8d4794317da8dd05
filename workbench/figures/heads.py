"""Figures of the causal per-head analyses (issue 14): patching, attribution patching (per head, per edge, per
query / key / value), probes, trigger attention, direct logit attribution, the head summary, a head's card and its
attention pattern. Each is built from its table alone; trace counts are given in the docstrings (tests check them)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis.head_summary import MEASURE_SOURCES
from workbench.analysis.qkv import PLURAL, check_line, exact

from . import style
from .style import layout as _layout
from .style import title_for as _title


PANEL_TEXT_HEADS = 8


def _heatmap(fig: go.Figure, sub: pd.DataFrame, value: str, lo: str | None = None, hi: str | None = None,
             diverging: bool = True, title: str = "", row=None, col=None) -> None:
    """Add a (layer x head) heatmap of `value` to `fig` (style.heatmap: integer axes, labelled colour bar), the
    interval [lo, hi] in the hover. In a side-by-side panel, values are written into the cells only up to
    PANEL_TEXT_HEADS heads (more do not fit: the hover has them)."""
    z = sub.pivot(index="layer", columns="head", values=value)
    text = None
    if lo and hi:
        a = sub.pivot(index="layer", columns="head", values=lo).reindex_like(z).values
        b = sub.pivot(index="layer", columns="head", values=hi).reindex_like(z).values
        text = [[f"[{x:.3f}, {y:.3f}]" for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]
    title = title or value
    hover = "layer %{y}, head %{x}<br>" + title + " %{z:.3f}" + (" %{text}" if text else "") + "<extra></extra>"
    hm = style.heatmap(z, colorbar_title=title, fig=fig, row=row, col=col, diverging=diverging, text=text,
                       hover=hover, cell_text=row is None or z.shape[1] <= PANEL_TEXT_HEADS)
    if row is None:
        fig.add_trace(hm)
    else:
        fig.add_trace(hm, row=row, col=col)
    style.category_axes(fig, z, "head", "layer", row=row, col=col)


def patching(df: pd.DataFrame, positions: str = "all") -> go.Figure:
    """Left: head effect (layer x head heatmap at `positions`, 1 trace). Right: the residual stream's effect per
    layer, one line per position set (3 traces)."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.22,
                        subplot_titles=[f"head z patched ({positions} positions)", "residual stream patched"])
    heads = df[(df["site"] == "head") & (df["positions"] == positions)]
    _heatmap(fig, heads, "effect", "ci_lo", "ci_hi", title="effect", row=1, col=1)
    _stream_lines(fig, df, 1, 2)
    return _layout(fig, _title(df, "Activation patching (1 = carries the whole difference)"))


def _stream_lines(fig: go.Figure, df: pd.DataFrame, row: int, col: int) -> None:
    """The residual stream's effect per layer, one line per position set with its interval (3 traces)."""
    for pos, sub in df[df["site"] == "resid"].groupby("positions", sort=False):
        sub = sub.sort_values("layer")
        fig.add_trace(go.Scatter(x=sub["layer"], y=sub["effect"], mode="lines+markers", name=f"stream, {pos}",
                                 error_y=dict(type="data", symmetric=False, array=sub["ci_hi"] - sub["effect"],
                                              arrayminus=sub["effect"] - sub["ci_lo"])), row=row, col=col)
    fig.update_xaxes(title_text="layer (hook_resid_post)", row=row, col=col)
    style.integer_axis(fig, sorted(df["layer"].unique()), "x", row=row, col=col)
    fig.update_yaxes(title_text="normalised effect", row=row, col=col)


def attribution(df: pd.DataFrame, positions: str = "all") -> go.Figure:
    """Left: the AtP estimate of each head's patching effect (layer x head heatmap at `positions`, 1 trace).
    Right, where the table was checked against the run's patching: estimate vs real patching effect, one point per
    head with its layer in the hover (1 trace), and the line where they are equal (1 trace); without the check,
    the stream's estimated effect per layer, one line per position set (3 traces)."""
    heads = df[(df["site"] == "head") & (df["positions"] == positions)]
    checked = "check" in df.columns and not str(df["check"].iloc[0]) and heads["patching_effect"].notna().any()
    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.22,
                        subplot_titles=[f"AtP estimate, head z ({positions} positions)",
                                        "estimate vs patching, per head" if checked else "residual stream (AtP)"])
    _heatmap(fig, heads, "effect", "ci_lo", "ci_hi", title="estimate", row=1, col=1)
    if checked:
        n_layers = int(df["layer"].max()) + 1
        fig.add_trace(go.Scatter(x=heads["patching_effect"], y=heads["effect"], mode="markers", name="head",
                                 marker=dict(color=[style.layer_color(int(l), n_layers) for l in heads["layer"]]),
                                 text=[f"L{int(l)}.H{int(h)}" for l, h in zip(heads["layer"], heads["head"])],
                                 hovertemplate="%{text}: patching %{x:.3f}, AtP %{y:.3f}<extra></extra>"),
                      row=1, col=2)
        both = np.concatenate([heads["patching_effect"].to_numpy(float), heads["effect"].to_numpy(float)])
        both = both[np.isfinite(both)]
        span = [float(both.min()), float(both.max())]
        style.add_baseline(fig, span, "equal", span, label="estimate = patching", row=1, col=2)
        fig.update_xaxes(title_text="patching effect", row=1, col=2)
        fig.update_yaxes(title_text="AtP estimate", row=1, col=2)
        rho = heads["rank_corr"].iloc[0]
        inside = heads["in_patching_ci"]
        note = (f"rank correlation with patching over heads {rho:+.2f}; {int(inside.sum())} of "
                f"{int(inside.notna().sum())} estimates inside patching's interval")
    else:
        _stream_lines(fig, df, 1, 2)
        note = str(df["check"].iloc[0]) if "check" in df.columns else "not checked against patching"
    steps = _ig_steps(df)
    what = f"AtP-IG, {steps} steps" if steps else "AtP"
    if steps and "completeness" in df.columns:
        note += f"; completeness {float(df['completeness'].iloc[0]):.3f} (1: the path is integrated)"
    title = _title(df, f"Attribution patching ({what}: a gradient estimate of patching)")
    return _layout(fig, f"{title}<br><sup>{note}</sup>")


def _ig_steps(df: pd.DataFrame) -> int:
    """The table's integrated-gradients steps (0: plain attribution; tables from before the column: 0)."""
    return int(df["ig_steps"].iloc[0]) if "ig_steps" in df.columns else 0


def _edge_labels(df: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Source labels (L0.H3, L0 MLP) and reader labels (L1 attn, L0 MLP, readout) of an edges table."""
    src = np.where(df["source"] == "head", "L" + df["layer"].astype(str) + ".H" + df["head"].astype(str),
                   "L" + df["layer"].astype(str) + " MLP")
    dst = np.where(df["target"] == "readout", "readout",
                   "L" + df["target_layer"].astype(str) + " " + df["target"].str.replace("mlp", "MLP"))
    return pd.Series(src, index=df.index), pd.Series(dst, index=df.index)


def edges(df: pd.DataFrame, top: int = 15) -> go.Figure:
    """Left: every edge's estimated effect, source (rows: heads, then the layer's MLP) x reader (columns: each
    layer's attention and MLP, then the readout), blank where no edge runs (1 trace). Right: the `top` edges by
    |effect| with their intervals (1 trace) and, where the table path-patched them, the real path patch with its
    interval (1 trace)."""
    src, dst = _edge_labels(df)
    d = df.assign(src=src, dst=dst)
    d["key"] = d["layer"] * 10_000 + np.where(d["source"] == "mlp", 9_999, d["head"])
    d["dkey"] = d["target_layer"] * 2 + (d["target"] == "mlp")
    z = d.pivot(index="src", columns="dst", values="effect")
    z = z.loc[d.sort_values("key")["src"].unique(), d.sort_values("dkey")["dst"].unique()]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.55, 0.45], horizontal_spacing=0.3,
                        subplot_titles=["writer → reader", f"top {top} edges by |effect|"])
    fig.add_trace(style.heatmap(z, colorbar_title="effect", fig=fig, row=1, col=1, diverging=True,
                                hover="%{y} → %{x}: %{z:.3f}<extra></extra>", cell_text=False), row=1, col=1)
    style.category_axes(fig, z, "reader", "writer", row=1, col=1)
    best = d.loc[d["effect"].abs().sort_values(ascending=False).index[:top]].iloc[::-1]
    fig.add_trace(go.Bar(x=best["effect"], y=best["src"] + " → " + best["dst"], orientation="h",
                         name="estimate (EAP)", error_x=dict(type="data", symmetric=False,
                                                        array=best["ci_hi"] - best["effect"],
                                                        arrayminus=best["effect"] - best["ci_lo"])), row=1, col=2)
    if "path_effect" in best.columns and best["path_effect"].notna().any():
        fig.add_trace(go.Scatter(x=best["path_effect"], y=best["src"] + " → " + best["dst"], mode="markers",
                                 name="path patch (real)", marker=dict(symbol="diamond", size=9, color="black"),
                                 error_x=dict(type="data", symmetric=False, array=best["path_hi"] - best["path_effect"],
                                              arrayminus=best["path_effect"] - best["path_lo"])), row=1, col=2)
    fig.update_xaxes(title_text="normalised effect", zeroline=True, row=1, col=2)
    note = str(df["note"].iloc[0]) if "note" in df.columns and str(df["note"].iloc[0]) else ""
    steps = _ig_steps(df)
    what = f"EAP-IG, {steps} steps" if steps else "EAP"
    title = _title(df, f"Edge attribution ({what}: which later component reads each head)")
    return style.legend_below(_layout(fig, f"{title}<br><sup>{note}</sup>" if note else title), x=1, xanchor="right")


def qkv(df: pd.DataFrame, positions: str = "all") -> go.Figure:
    """Left: each head's effect through its queries, keys and values at `positions` (heads x site heatmap, 1
    trace): the real patches where every row was patched (`qkv.exact`), else AtP*. Right, for the rows patched for
    real: AtP* and plain AtP against the real patch (2 traces) and the line where they are equal (1 trace); nothing
    there when no row was checked."""
    sub = df[df["positions"] == positions].assign(
        label=lambda d: "L" + d["layer"].astype(str) + ".H" + d["head"].astype(str))
    real = exact(df, positions)
    z = sub.pivot(index="label", columns="site", values="patch_effect" if real else "effect")
    z = z.loc[sub.sort_values(["layer", "head"])["label"].unique(), [s for s in ("query", "key", "value")
                                                                     if s in z.columns]]
    checked = df[df["patch_effect"].notna()] if "patch_effect" in df.columns else df.iloc[:0]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.4, 0.6], horizontal_spacing=0.22,
                        subplot_titles=[f"{'real patch' if real else 'AtP* estimate'} ({positions} positions)",
                                        "estimates vs the real patch" if len(checked) else "no row patched for real"])
    fig.add_trace(style.heatmap(z, colorbar_title="effect", fig=fig, row=1, col=1, diverging=True,
                                hover="%{y} %{x}: %{z:.3f}<extra></extra>", cell_text=False), row=1, col=1)
    style.category_axes(fig, z, "site", "head", row=1, col=1)
    note = check_line(df)
    if len(checked):
        text = [f"L{int(l)}.H{int(h)} {s} ({p})" for l, h, s, p in
                zip(checked["layer"], checked["head"], checked["site"], checked["positions"])]
        for col, name, symbol in (("effect", "AtP* (pattern recomputed)", "circle"), ("atp", "AtP (linear)", "x")):
            fig.add_trace(go.Scatter(x=checked["patch_effect"], y=checked[col], mode="markers", name=name, text=text,
                                     marker=dict(symbol=symbol, size=8),
                                     hovertemplate="%{text}: patch %{x:.3f}, estimate %{y:.3f}<extra></extra>"),
                          row=1, col=2)
        both = checked[["patch_effect", "effect", "atp"]].to_numpy(float).ravel()
        both = both[np.isfinite(both)]
        span = [float(both.min()), float(both.max())]
        style.add_baseline(fig, span, "equal", span, label="estimate = patch", row=1, col=2)
        fig.update_xaxes(title_text="real patch effect", row=1, col=2)
        fig.update_yaxes(title_text="estimate", row=1, col=2)
    if "note" in df.columns and str(df["note"].iloc[0]):
        note = str(df["note"].iloc[0])
    title = _title(df, "Queries, keys or values: where each head's effect enters (AtP*)")
    return style.legend_below(_layout(fig, f"{title}<br><sup>{note}</sup>"), x=1, xanchor="right")


SITE_COLORS = {"query": "#1f77b4", "key": "#d62728", "value": "#7f7f7f"}


def qkv_shares(df: pd.DataFrame) -> go.Figure:
    """Run by run (one bar each, labelled by scheme, task and seed, and by what is summed: the real patches where
    every row was patched, else AtP*), the share of the heads' summed |effect| through their queries, keys and
    values (3 stacked traces, the sums in the hover): where each run's heads take in the counterfactual difference.
    Runs whose effects are undefined (the counterfactual moves nothing) are named under the title."""
    ok = df[df["total"] > 0] if "total" in df.columns else df.iloc[:0]
    if "measure" in ok.columns:
        ok = ok.assign(label=ok["label"] + " (" + ok["measure"] + ")")
    fig = style.share_bars(ok, "site", {s: (f"through its {PLURAL[s]}", SITE_COLORS[s]) for s in SITE_COLORS},
                           ["total", "net"], "%{y}: %{x:.0%} (sum of |effect| %{customdata[0]:.3f}, signed "
                                             "%{customdata[1]:+.3f})")
    fig.update_xaxes(range=[0, 1], tickformat=".0%")  # the axis title is the subtitle: the legend sits below
    none = [str(x) for x in dict.fromkeys(df.loc[df["total"] <= 0, "label"])] if "total" in df.columns else []
    note = f"; undefined (the counterfactual moves nothing): {', '.join(none)}" if none else \
        "; queries and keys: where position enters, values: what is read"
    return _layout(fig, "Where the heads take in the difference, run by run<br><sup>share of the heads' summed "
                        f"|effect|{note}</sup>")


def probes(df: pd.DataFrame) -> go.Figure:
    """Top left: position probe R² by layer with its shuffled control and length-only baseline (3 traces).
    Bottom left: the label probe's accuracy on the pooled stream by layer (1 trace): two quantities, two axes.
    Right: label-probe selectivity per head (1 trace)."""
    fig = make_subplots(rows=2, cols=2, column_widths=[0.45, 0.55], horizontal_spacing=0.12, vertical_spacing=0.22,
                        specs=[[{}, {"rowspan": 2}], [{}, None]],  # titles no wider than their panel, and clear
                        subplot_titles=["position (layer −1: input)",  # of the row above's tick labels
                                        "label from each head's z: selectivity", "label, pooled stream"])
    pos = df[df["probe"] == "position"].sort_values("layer")
    if len(pos):
        err = dict(type="data", symmetric=False, array=pos["score_hi"] - pos["score"],
                   arrayminus=pos["score"] - pos["score_lo"])
        fig.add_trace(go.Scatter(x=pos["layer"], y=pos["score"], mode="lines+markers", name="position R²",
                                 error_y=err), row=1, col=1)
        style.add_baseline(fig, list(pos["control"]), "shuffled labels", pos["layer"], label="position, shuffled",
                           row=1, col=1)
        style.add_baseline(fig, float(pos["baseline"].iloc[0]), "length-only",
                           (pos["layer"].min(), pos["layer"].max()), label="length alone", row=1, col=1)
    stream = df[df["probe"] == "label_stream"].sort_values("layer")
    if len(stream):
        fig.add_trace(go.Scatter(x=stream["layer"], y=stream["score"], mode="lines+markers",
                                 name="label, pooled stream (accuracy)", customdata=stream["selectivity"],
                                 hovertemplate="layer %{x}: %{y:.3f} (selectivity %{customdata:+.3f})"), row=2, col=1)
    heads = df[df["probe"] == "label_head"]
    if len(heads):
        _heatmap(fig, heads, "selectivity", "score_lo", "score_hi", title="selectivity", row=1, col=2)
    for r, title in ((1, "R²"), (2, "accuracy")):
        style.integer_axis(fig, sorted(df.loc[df["probe"] != "label_head", "layer"].unique()), "x", row=r, col=1)
        fig.update_yaxes(title_text=title, row=r, col=1)
    fig.update_xaxes(title_text="layer", row=2, col=1)
    fig.update_layout(legend=dict(orientation="h", x=0, y=-0.2, yanchor="top"))  # the right edge has the colour bar
    return _layout(fig, _title(df, "Linear probes (cross-validated, shuffled-label controls)"),
                   margin=dict(l=70, r=30, t=80, b=110))


def trigger_attention(df: pd.DataFrame, measure: str | None = None) -> go.Figure:
    """Left: `measure` per head (t2_to_t1 on Task 1, else to_triggers; 1 trace). Right: mean attention weight vs
    |i − j|, averaged over each layer's heads (one line per layer) plus the uniform reference (n_layers + 1), on
    a linear axis: weights that are zero (masked keys, underflow) sit at 0 instead of plunging down a log axis."""
    measures = set(df["measure"])
    measure = measure or ("t2_to_t1" if "t2_to_t1" in measures else "to_triggers")
    fig = make_subplots(rows=1, cols=2, column_widths=[0.5, 0.5], horizontal_spacing=0.22,
                        subplot_titles=[measure.replace("_", " "), "attention weight vs |i − j|"])
    _heatmap(fig, df[df["measure"] == measure], "value", "ci_lo", "ci_hi", diverging=False, title="weight",
             row=1, col=1)
    dist = df[df["measure"] == "by_distance"]
    n_layers = int(df["layer"].max()) + 1
    for layer, sub in dist.groupby("layer"):
        m = sub.groupby("distance")["value"].mean()
        fig.add_trace(go.Scatter(x=m.index, y=m.values, mode="lines", name=f"layer {layer}",
                                 line=dict(color=style.layer_color(int(layer), n_layers))), row=1, col=2)
    uni = dist.groupby("distance")["uniform"].mean()
    style.add_baseline(fig, list(uni.values), "uniform attention", uni.index, label="uniform attention", row=1, col=2)
    fig.update_xaxes(title_text="|i − j|", row=1, col=2)
    fig.update_yaxes(title_text="mean weight", rangemode="tozero", row=1, col=2)
    return _layout(fig, _title(df, "Trigger attention"))


DLA_TITLES = {"runner_up": "logit of the label − the runner-up's", "mean": "logit of the label − mean logit"}


def dla(df: pd.DataFrame, measure: str | None = None) -> go.Figure:
    """Left: each head's direct effect on the margin `measure` (1 trace): "runner_up" (the label's logit minus the
    runner-up class's, the margin the decision turns on; the default where the table has it) or "mean" (minus the
    mean logit; tables made before 2026-11-28 have only this). Right: the other components (embedding, attention
    biases, MLPs, bias) on the same margin, as bars with intervals (1 trace)."""
    from workbench.analysis.dla import MARGINS

    measure = measure or ("runner_up" if MARGINS["runner_up"][0] in df else "mean")
    if measure not in MARGINS or MARGINS[measure][0] not in df:
        raise ValueError(f"measure={measure!r}: the table has "
                         f"{', '.join(m for m, (c, _) in MARGINS.items() if c in df)}")
    col, ci = MARGINS[measure]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.22,
                        subplot_titles=[f"heads ({DLA_TITLES[measure]})", "other components"])
    _heatmap(fig, df[df["component"] == "head"], col, f"{ci}_lo", f"{ci}_hi", title="logits", row=1, col=1)
    rest = df[df["component"] != "head"]
    names = [c if l < 0 else f"{c} L{l}" for c, l in zip(rest["component"], rest["layer"])]
    fig.add_trace(go.Bar(x=names, y=rest[col], name="components",
                         error_y=dict(type="data", symmetric=False, array=rest[f"{ci}_hi"] - rest[col],
                                      arrayminus=rest[col] - rest[f"{ci}_lo"])), row=1, col=2)
    fig.update_yaxes(title_text="logits", row=1, col=2)
    return _layout(fig, _title(df, "Direct logit attribution (final LayerNorm scale frozen)"))


SUMMARY_MEASURES = {"zero_delta": "zero-ablation Δacc", "mean_delta": "mean-ablation Δacc",
                    "resample_delta": "resample-ablation Δacc", "patch_effect": "patching effect",
                    "patch_trigger": "patching effect (trigger positions)", "atp_effect": "AtP estimate of patching",
                    "via_query": "AtP* through its queries", "via_key": "AtP* through its keys",
                    "via_value": "AtP* through its values", "probe_acc": "label probe accuracy",
                    "probe_selectivity": "label probe selectivity", "dla": "direct effect vs the mean (logits)",
                    "dla_runner_up": "direct effect vs the runner-up (logits)",
                    "self_repair": "self-repair (logits)", "repaired": "share of the direct effect made up",
                    "t2_to_t1": "attention t2 → t1", "to_triggers": "attention to triggers", "n_agree": "methods agreeing"}


def head_summary(df: pd.DataFrame, measure: str = "n_agree") -> go.Figure:
    """(layer x head) heatmap of `measure` (1 trace), deposit heads by >= min_agree methods (circles, 1 trace)
    and the paper's ablation-only single-head deposits (crosses, 1 trace)."""
    if measure not in SUMMARY_MEASURES and measure not in df.columns:
        raise ValueError(f"measure={measure!r} is not a head-summary column; use one of {list(SUMMARY_MEASURES)}")
    if measure not in df.columns or df[measure].isna().all():
        source = MEASURE_SOURCES.get(measure, "the per-head tables")
        raise ValueError(f"this head summary has no {SUMMARY_MEASURES[measure]}: compute {source} for the run, then "
                         "head_summary again")
    fig = go.Figure()
    label = SUMMARY_MEASURES.get(measure, measure)
    _heatmap(fig, df, measure, diverging=measure != "n_agree", title=label)
    for col, name, symbol in (("deposit_head", f"deposit head (≥ {int(df['min_agree'].iloc[0])} methods)", "circle-open"),
                              ("paper_deposit", "paper: single-head deposit (zero-ablation)", "x-thin-open")):
        sub = df[df[col].astype(bool)]
        fig.add_trace(go.Scatter(x=sub["head"], y=sub["layer"], mode="markers", name=name, text=sub.get("methods"),
                                 marker=dict(symbol=symbol, size=30, line=dict(width=2), color="black")))
    fig.update_layout(legend=dict(orientation="h", y=-0.2))
    return _layout(fig, _title(df, f"Head summary: {label}"))


CARD_MEASURES = [("zero_delta", "zero_lo", "zero_hi"), ("mean_delta", None, None),
                 ("resample_delta", "resample_lo", "resample_hi"), ("patch_effect", "patch_lo", "patch_hi"),
                 ("patch_trigger", None, None), ("patch_non_trigger", None, None), ("atp_effect", "atp_lo", "atp_hi"),
                 ("via_query", "via_query_lo", "via_query_hi"), ("via_key", "via_key_lo", "via_key_hi"),
                 ("via_value", "via_value_lo", "via_value_hi"),
                 ("probe_selectivity", None, None),
                 ("dla", "dla_lo", "dla_hi"), ("dla_runner_up", "dla_runner_up_lo", "dla_runner_up_hi"),
                 ("self_repair", "self_repair_lo", "self_repair_hi"),
                 ("repaired", None, None), ("t2_to_t1", None, None), ("to_triggers", None, None)]
LOGIT_MEASURES = {"dla", "dla_runner_up", "self_repair"}  # measured in logits (about 100 in a trained head): the card gives them their own axis


def head_card(df: pd.DataFrame, layer: int = 0, head: int = 0) -> go.Figure:
    """One head's measures from the head summary as bars with their intervals: those on a unit scale (Δ
    accuracy, normalised patching effect, selectivity, attention weight; 1 trace) and its direct effect in
    logits on its own axis below (1 trace), so neither scale hides the other."""
    row = df[(df["layer"] == layer) & (df["head"] == head)]
    if row.empty:
        raise ValueError(f"no head (layer {layer}, head {head}) in the head summary")
    r = row.iloc[0]
    groups = {"unit": ([], [], [], []), "logits": ([], [], [], [])}
    for col, lo, hi in CARD_MEASURES:
        if col not in r or pd.isna(r[col]):
            continue
        names, vals, up, down = groups["logits" if col in LOGIT_MEASURES else "unit"]
        names.append(SUMMARY_MEASURES.get(col, col.replace("_", " ")))
        vals.append(r[col])
        has = lo in r and hi in r and pd.notna(r.get(lo)) and pd.notna(r.get(hi))
        up.append(r[hi] - r[col] if has else 0.0)
        down.append(r[col] - r[lo] if has else 0.0)
    n_unit, n_logit = max(len(groups["unit"][0]), 1), len(groups["logits"][0])
    fig = make_subplots(rows=2 if n_logit else 1, cols=1, vertical_spacing=0.3 if n_logit else 0.1,
                        row_heights=[n_unit / (n_unit + n_logit + 1), (n_logit + 1) / (n_unit + n_logit + 1)]
                        if n_logit else None)
    for r_, (key, xtitle) in enumerate((("unit", "Δ accuracy, normalised effect, selectivity, attention weight"),
                                        ("logits", "logits")), 1):
        names, vals, up, down = groups[key]
        if not names:
            continue
        fig.add_trace(go.Bar(x=vals, y=names, orientation="h", name=f"L{layer}.H{head} ({key})", showlegend=False,
                             marker_color="#636efa" if key == "unit" else "#2b2f8f",
                             error_x=dict(type="data", symmetric=False, array=up, arrayminus=down)), row=r_, col=1)
        fig.update_yaxes(autorange="reversed", row=r_, col=1)
        fig.update_xaxes(title_text=xtitle, zeroline=True, row=r_, col=1)
    verdict = "deposit head" if r["deposit_head"] else "not a deposit head"
    paper = "deposit" if r["paper_deposit"] else "no deposit"
    return _layout(fig, f"Layer {layer}, head {head}: {verdict} (votes: {r['methods'] or 'none'})"
                        f"<br><sup>the paper's ablation-only definition: {paper}</sup>")


TOKEN_TICKS = 16  # token labels an axis of the attention pattern shows at most (more ran into each other)


def _token_ticks(tokens: list) -> dict:
    """tickvals / ticktext for a pattern's axis: positions at least k apart, k such that at most TOKEN_TICKS are
    labelled; trigger tokens ('*') first, then every k-th position where it fits (the hover names every token, and
    the red marks every trigger)."""
    step = max(1, math.ceil(len(tokens) / TOKEN_TICKS))
    keep: list[int] = []
    for i in [i for i, t in enumerate(tokens) if str(t).startswith("*")] + list(range(0, len(tokens), step)):
        if all(abs(i - j) >= step for j in keep):
            keep.append(i)
    keep.sort()
    return {"tickvals": keep, "ticktext": [str(tokens[i]) for i in keep]}


def head_attention(df: pd.DataFrame, head: int | None = None) -> go.Figure:
    """One head's attention pattern on one example (an attention_patterns table, apps.pages.explorer.pattern_table;
    `head`: which head, default the table's first; trigger tokens start with '*'): heatmap (1 trace) and the
    trigger positions marked on both axes (1 trace)."""
    head = int(df["head"].min()) if head is None else int(head)
    df = df[df["head"] == head]
    if df.empty:
        raise ValueError(f"head={head} is not in the attention-pattern table")
    Q, K = int(df["q_pos"].max()) + 1, int(df["k_pos"].max()) + 1
    d = df.sort_values(["q_pos", "k_pos"])
    z = d["weight"].to_numpy().reshape(Q, K)
    q_tok = d.drop_duplicates("q_pos")["q_token"].tolist()
    k_tok = d.drop_duplicates("k_pos")["k_token"].tolist()
    fig = go.Figure(go.Heatmap(z=z, x=list(range(K)), y=list(range(Q)), colorscale="Viridis", zmin=0,
                               text=[[f"{a} → {b}" for b in k_tok] for a in q_tok],
                               hovertemplate="q %{y} → k %{x}<br>%{text}<br>weight %{z:.3f}<extra></extra>"))
    trig = [i for i, t in enumerate(k_tok) if str(t).startswith("*")]
    fig.add_trace(go.Scatter(x=trig + [-0.9] * len(trig), y=[-0.9] * len(trig) + trig, mode="markers",
                             name="trigger", marker=dict(symbol="triangle-down", size=10, color="#d62728")))
    fig.update_xaxes(title_text="key position", tickfont=dict(size=10), **_token_ticks(k_tok))
    fig.update_yaxes(title_text="query position", autorange="reversed", tickfont=dict(size=10), **_token_ticks(q_tok))
    layer = int(df["layer"].iloc[0])
    return _layout(fig, f"Attention of layer {layer}, head {head} (triggers marked)")


# figures drawn from another figure's table
TABLES = {"head_card": "head_summary", "head_attention": "attention_patterns"}

FIGURES = {"patching": patching, "attribution": attribution, "edges": edges, "qkv": qkv, "qkv_shares": qkv_shares,
           "probes": probes,
           "trigger_attention": trigger_attention, "dla": dla, "head_summary": head_summary, "head_card": head_card,
           "head_attention": head_attention}
ELSEWHERE = {"head_attention": "the dashboard's Heads page (drawn live from the model)"}
