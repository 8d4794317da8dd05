"""Self-repair figures (table `self_repair` and the experiment `self_repair_shares`, docs/analyses.md): each head's
direct effect against the effect its ablation has, what made up the difference, and the same summed run by run."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import style
from .style import layout as _layout
from .style import title_for as _title

MEASURE_TEXT = {"runner_up": "logits of the label minus the clean run's runner-up class",
                "margin": "logits of the label minus the mean logit"}
PART_COLORS = {"via_heads": "#1f77b4", "via_mlps": "#ff7f0e", "via_layernorm": "#7f7f7f"}
PART_NAMES = {"via_heads": "later heads", "via_mlps": "MLPs", "via_layernorm": "final LayerNorm"}


def self_repair(df: pd.DataFrame, top: int = 10) -> go.Figure:
    """Left: every head's total effect (its ablation's) against its direct effect, in logits of the table's measure,
    one trace a layer in its colour, with the total's interval (n_layers traces), and the line where the two are
    equal, no self-repair (1 trace): a head between the line and 0 is made up downstream, one beyond it also acts
    through later components. Right: for the `top` heads of largest |direct effect|, the self-repair split into later heads, MLPs and the final
    LayerNorm (3 stacked traces): n_layers + 4 traces."""
    d = df.assign(label="L" + df["layer"].astype(str) + ".H" + df["head"].astype(str))
    n_layers = int(d["layer"].max()) + 1
    mode = str(d["mode"].iloc[0]) if "mode" in d.columns and len(d) else "zero"
    fig = make_subplots(rows=1, cols=2, column_widths=[0.5, 0.5], horizontal_spacing=0.14,
                        subplot_titles=["effect of ablating the head vs its direct effect",
                                        f"what makes it up ({min(top, len(d))} heads of largest direct effect)"])
    for layer, sub in d.groupby("layer"):
        err = dict(type="data", symmetric=False, array=sub["total_hi"] - sub["total"],
                   arrayminus=sub["total"] - sub["total_lo"])
        repaired = [f"{v:.0%}" if np.isfinite(v) else "undefined (small direct effect)" for v in sub["repaired"]]
        fig.add_trace(go.Scatter(x=sub["direct"], y=sub["total"], mode="markers", name=f"layer {layer}", error_y=err,
                                 marker=dict(size=9, color=style.layer_color(int(layer), n_layers)),
                                 text=sub["label"], customdata=np.stack([repaired, sub["top_component"]], -1),
                                 hovertemplate="%{text}: direct %{x:.3f}, total %{y:.3f}, repaired %{customdata[0]} "
                                               "(most: %{customdata[1]})<extra></extra>"), row=1, col=1)
    both = d[["direct", "total"]].to_numpy(float).ravel()
    both = both[np.isfinite(both)]
    if len(both):
        span = [float(min(both.min(), 0.0)), float(max(both.max(), 0.0))]
        style.add_baseline(fig, span, "no self-repair", span, label="total = direct (no self-repair)", row=1, col=1)
    fig.update_xaxes(title_text="direct effect (logits)", row=1, col=1)
    fig.update_yaxes(title_text="total effect (logits)", row=1, col=1)
    big = d.reindex(d["direct"].abs().sort_values(ascending=False).index).head(top).iloc[::-1]
    for part in ("via_heads", "via_mlps", "via_layernorm"):
        fig.add_trace(go.Bar(y=big["label"], x=big[part], orientation="h", name=PART_NAMES[part],
                             marker_color=PART_COLORS[part],
                             hovertemplate="%{y}: %{x:+.3f} logits<extra>" + PART_NAMES[part] + "</extra>"),
                      row=1, col=2)
    fig.update_xaxes(title_text="self-repair (logits)", row=1, col=2)
    fig.update_layout(barmode="relative")
    title = _title(df, f"Self-repair after {mode} ablation: how much of each head's direct effect the rest makes up")
    measure = str(d["measure"].iloc[0]) if "measure" in d.columns and len(d) else "margin"
    return style.legend_below(_layout(fig, f"{title}<br><sup>{MEASURE_TEXT.get(measure, measure)}; between the line "
                                           "and 0: made up downstream; beyond it: the head also acts through later "
                                           "components</sup>"), x=1, xanchor="right")


INDIRECT = 2.0  # summed |total| over summed |direct| above which a run's shares are flagged as saying little
SHARE_NAMES = {"kept": "still shown by its ablation", **{k: f"made up by {v}" for k, v in PART_NAMES.items()}}
SHARE_COLORS = {"kept": "#2ca02c", **PART_COLORS}


def self_repair_shares(df: pd.DataFrame) -> go.Figure:
    """Run by run (one bar each), the heads' summed |direct effect| split into what their ablations still show and
    what later heads, MLPs and the final LayerNorm made up (4 stacked traces, adding up to 1; a negative share is a
    downstream change that added to the loss, the heads' indirect effect; the sum of |direct| in the hover). Runs
    whose summed |total effect| is over `INDIRECT` times their summed |direct effect| are named in the subtitle: there
    the heads act mostly through later components and the shares say little."""
    ok = df[df["sum_direct"] > 0]
    fig = style.share_bars(ok, "part", {p: (SHARE_NAMES[p], SHARE_COLORS[p]) for p in SHARE_NAMES}, ["sum_direct"],
                           "%{y}: %{x:.0%} of the summed |direct effect| (%{customdata[0]:.1f} logits)",
                           barmode="relative")
    fig.update_xaxes(tickformat=".0%")
    mode = str(df["mode"].iloc[0]) if "mode" in df.columns and len(df) else "zero"
    note = "the rest made up downstream"
    if "sum_total" in ok.columns:
        mostly = list(dict.fromkeys(ok.loc[ok["sum_total"] > INDIRECT * ok["sum_direct"], "label"]))
        if mostly:
            note = (f"ablations move the measure over {INDIRECT:g}x the direct effects (read little into their "
                    "shares): " + ", ".join(mostly))
    return _layout(fig, f"How much of the heads' direct effects their {mode} ablations show, run by run<br><sup>"
                        f"share of the heads' summed |direct effect|; {note}</sup>")


FIGURES = {"self_repair": self_repair, "self_repair_shares": self_repair_shares}
