"""Experiments over sets of runs: partial RoPE, RoPE vs RoPE+sinusoidal, MLA vs RoPE vs NoPE,
convergence (seed 003, sections 4-5). Tasks always get their own panels (their labels and lengths differ)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis.common import scheme_label, task_label
from workbench.figures import style as S


def _layer_label(l: int) -> str:
    return "every" if l == -1 else ("mixed" if l == -2 else str(int(l)))


def _settings(df: pd.DataFrame) -> list:
    """The (preset, setting) pairs of an experiment table in `SETTINGS` order ([(None, None)] without the
    columns): each gets its own panels or series -- runs of two settings are never averaged together."""
    from workbench.analysis.settings import SETTINGS

    if "setting" not in df.columns:
        return [(None, None)]
    pre = df["preset"] if "preset" in df.columns else pd.Series([None] * len(df), index=df.index)
    pairs = list(dict.fromkeys(zip(pre, df["setting"])))
    order = {k: i for i, k in enumerate(SETTINGS)}
    return sorted(pairs, key=lambda p: (str(p[0]), order.get(p[1], len(order)), str(p[1])))


def _in(df: pd.DataFrame, pair) -> pd.DataFrame:
    preset, setting = pair
    if setting is None:
        return df
    m = df["setting"] == setting
    return df[m & (df["preset"] == preset)] if "preset" in df.columns else df[m]


def _setting_name(pair, n_settings: int) -> str:
    from workbench.analysis.settings import setting_label

    return "" if pair[1] is None or n_settings < 2 else setting_label(pair[1], pair[0])


def _one_setting(df: pd.DataFrame) -> str:
    """` — <setting label>` for a table of one setting (the title names it), else ``."""
    pairs = _settings(df)
    if len(pairs) != 1 or pairs[0][1] is None:
        return ""
    from workbench.analysis.settings import setting_label

    return " — " + setting_label(pairs[0][1], pairs[0][0])


def most_common(layers: pd.Series) -> float:
    """The layer most seeds put there (the shallower one on a tie); NaN when none: layer numbers are never averaged
    (a mean of layers 1 and 5 is no layer)."""
    v = layers.dropna()
    return float(v.mode().min()) if len(v) else np.nan


def partial_rope(df: pd.DataFrame) -> go.Figure:
    """Per (setting, task): heatmaps of test accuracy (%, mean over seeds) and of the deepest deposit layer (the one
    most seeds have: `most_common`) over (k heads x RoPE layer), values in the cells and a labelled colour bar beside
    each panel: 2 traces per panel row. k is a category axis (evenly spaced cells, whatever the k values)."""
    settings = _settings(df)
    panels = [(pair, task) for pair in settings for task in S.tasks_of(_in(df, pair))]
    titles = []
    for pair, task in panels:
        where = ", ".join(b for b in (task_label(task), _setting_name(pair, len(settings))) if b)
        titles += [f"{where}: test accuracy", f"{where}: deepest deposit layer"]
    fig = make_subplots(rows=len(panels), cols=2, horizontal_spacing=0.2,
                        vertical_spacing=0.22 / max(len(panels), 1), subplot_titles=titles)
    for r, (pair, task) in enumerate(panels, 1):
        sub = _in(df, pair)
        sub = sub[sub["task"] == task].copy()
        sub["layer_label"] = sub["layer"].map(_layer_label)
        sub["test_acc"] = S.percent(sub["test_acc"])
        cells = (("test_acc", "test accuracy (%)", ".1f", (0, 100), "mean"),
                 ("deepest_deposit_layer", "layer (most seeds)", "d", (None, None), most_common))
        for c, (col, bar, fmt, lim, how) in enumerate(cells, 1):
            z = sub.groupby(["layer_label", "k"])[col].agg(how).unstack("k")
            z = z[sorted(z.columns)]
            z.columns = [f"k={int(k)}" for k in z.columns]  # text labels: a category axis, one cell per k
            fig.add_trace(S.heatmap(z, colorbar_title=bar, fig=fig, row=r, col=c, zmin=lim[0], zmax=lim[1], fmt=fmt,
                                    colorscale="Viridis" if c == 1 else "Cividis", name=f"{task_label(task)} {bar}",
                                    hover="RoPE layer %{y}, %{x}: %{z:" + fmt + "}<extra></extra>"), row=r, col=c)
            S.category_axes(fig, z, "k (heads with RoPE)", "RoPE layer" if c == 1 else "", row=r, col=c,
                            reverse_y=False)
    return S.layout(fig, "Partial RoPE (blank cell: no run, or no deposit)" + _one_setting(df),
                    height=max(380, 330 * len(panels) + 60))


def rope_vs_rope_sinusoidal(df: pd.DataFrame) -> go.Figure:
    """Per task a panel; top-head delta per layer, mean over seeds, one line per (setting, variant) in its
    scheme's colour (a lighter shade per further setting; hover: share of seeds with a single-head deposit)."""
    tasks = S.tasks_of(df)
    settings = _settings(df)
    key = "variant" if "variant" in df.columns else "scheme"
    fig = make_subplots(rows=1, cols=max(len(tasks), 1), subplot_titles=[task_label(t) for t in tasks])
    for c, task in enumerate(tasks, 1):
        for i, pair in enumerate(settings):
            for variant, sub in _in(df, pair)[lambda d: d["task"] == task].groupby(key):
                scheme = sub["scheme"].iloc[0]
                m = sub.groupby("layer")["top_delta"].mean()
                single = sub.groupby("layer")["pattern"].agg(lambda p: (p == "single-head").mean())
                name = ", ".join(b for b in (_pretty(variant), _setting_name(pair, len(settings))) if b)
                fig.add_trace(go.Scatter(x=m.index, y=m.values, mode="lines+markers", name=name,
                                         legendgroup=name, line=dict(color=S.shade(S.scheme_color(scheme), i,
                                                                                   len(settings) + 1)),
                                         text=[f"single-head in {s:.0%} of seeds" for s in single.values]),
                              row=1, col=c)
        S.integer_axis(fig, df["layer"], "x", row=1, col=c, title_text="layer")
        fig.update_yaxes(title_text="Δ of the top head" if c == 1 else "", row=1, col=c)
    return S.layout(fig, "RoPE vs RoPE+sinusoidal: where the deposit sits" + _one_setting(df))


def mla_rope_nope(df: pd.DataFrame) -> go.Figure:
    """Grouped bars per (setting, variant, task): PE-Lab test accuracy (%, mean over seeds, the colour of the scheme
    the variant stands for, `settings.base_scheme`) and the paper's Table 1 (same colour, hatched; the paper's number
    of a setting's plain run only, `settings.plain_variant`): 2 traces. Runs of two settings or two variants (tier-4
    diagnoses) are separate bars."""
    from workbench.analysis.settings import base_scheme, plain_variant

    d = df.copy()
    for col, default in (("variant", d["scheme"]), ("setting", None), ("preset", None)):
        if col not in d.columns:
            d[col] = default
    g = d.groupby(["task", "preset", "setting", "variant"], dropna=False).agg(
        scheme=("scheme", "first"), test_acc=("test_acc", "mean"), paper=("paper_test_acc", "first"),
        single=("n_single_deposits", "mean"), n=("test_acc", "size")).reset_index()
    g.loc[~plain_variant(g), "paper"] = np.nan  # the paper ran the plain schemes only
    g["base"] = [base_scheme(v, sc) for v, sc in zip(g["variant"], g["scheme"])]
    settings = _settings(d)
    rank = {p: i for i, p in enumerate(settings)}
    order = {t: i for i, t in enumerate(S.tasks_of(g))}
    g["_o"] = [(order[t], rank.get((p, s), 0), {"mla": 0, "rope": 1, "nope": 2}.get(b, 3), v != b, v)
               for t, p, s, b, v in zip(g["task"], g["preset"], g["setting"], g["base"], g["variant"])]
    g = g.sort_values("_o", ignore_index=True)
    x = ["<br>".join(b for b in (f"{_pretty(v)}, {task_label(t)}", _setting_name((p, s), len(settings))) if b)
         for v, t, p, s in zip(g["variant"], g["task"], g["preset"], g["setting"])]
    colors = [S.scheme_color(b) for b in g["base"]]
    acc, paper = S.percent(g["test_acc"]), S.percent(g["paper"])
    fig = go.Figure([go.Bar(x=x, y=acc, name="PE-Lab", marker_color=colors,
                            text=[f"{a:.1f}" for a in acc], textposition="outside",
                            customdata=np.stack([g["single"], g["n"]], axis=-1),
                            hovertemplate="%{x}: %{y:.2f} % (mean of %{customdata[1]} run(s))<br>%{customdata[0]:.1f} "
                                          "single deposits<extra>PE-Lab</extra>"),
                     go.Bar(x=x, y=paper, name="paper (Table 1)", marker=dict(color=colors, opacity=0.45,
                                                                               pattern_shape="/"),
                            text=[f"{a:.1f}" if a == a else "" for a in paper], textposition="outside")])
    fig.update_yaxes(title_text="test accuracy (%)", range=[0, 110])
    fig.update_xaxes(type="category")
    return S.layout(fig, "MLA vs RoPE vs NoPE" + _one_setting(d), barmode="group")


def run_accuracy(df: pd.DataFrame, train: bool = False) -> go.Figure:
    """Final test accuracy of runs (a `claims.run_table`, in %), one panel per task, one bar per (setting, variant): the
    mean over seeds in the scheme's colour with each seed as a dot; with `train`, the train accuracy beside it
    (hatched), so overfitting reads as the gap. Traces: 1 bar + 1 dot trace per split and task."""
    splits = (("test_acc", "test"), ("train_acc", "train")) if train else (("test_acc", "test"),)
    d = S.percent_table(df, [col for col, _ in splits])
    settings = _settings(d)
    d["x"] = [", ".join(b for b in (_pretty(v), _setting_name((p, s), len(settings))) if b)
              for v, p, s in zip(d["variant"], d.get("preset", [None] * len(d)), d["setting"])]
    tasks = S.tasks_of(d)
    fig = make_subplots(rows=1, cols=max(len(tasks), 1), subplot_titles=[task_label(t) for t in tasks],
                        shared_yaxes=True, horizontal_spacing=0.06)
    for c, task in enumerate(tasks, 1):
        dt = d[d["task"] == task]
        g = dt.groupby("x", sort=False).agg(scheme=("scheme", "first"), n=("run_id", "size"),
                                            **{col: (col, "mean") for col, _ in splits})
        colors = [S.scheme_color(s) for s in g["scheme"]]
        for col, split in splits:
            hatched = dict(pattern_shape="/", opacity=0.5) if split == "train" else {}
            fig.add_trace(go.Bar(x=list(g.index), y=g[col], name=f"{split} accuracy (mean over seeds)",
                                 legendgroup=split, offsetgroup=split, marker=dict(color=colors, **hatched),
                                 customdata=g["n"],
                                 hovertemplate="%{x}: %{y:" + S.PCT + "} % (mean of %{customdata} run(s))"
                                               f"<extra>{split}</extra>"), row=1, col=c)
            fig.add_trace(go.Scatter(x=dt["x"], y=dt[col], mode="markers", name=f"{split} accuracy, one seed",
                                     legendgroup=f"{split}-seed", offsetgroup=split,
                                     marker=dict(color="black", size=6, symbol="circle-open" if split == "train"
                                                 else "circle"), text=dt["run_id"],
                                     hovertemplate="%{text}: %{y:" + S.PCT + "} %<extra></extra>"), row=1, col=c)
        fig.update_xaxes(type="category", row=1, col=c)
    fig.update_yaxes(title_text="accuracy (%)", range=[0, 105], row=1, col=1)
    return S.layout(fig, "Final accuracy of the runs behind the claim" + (" (train hatched beside test)" if train
                                                                         else ""), barmode="group")


def _label_colors(d: pd.DataFrame, key: str) -> dict:
    """Colour per label: the colour of the scheme it stands for (`settings.base_scheme`: the authors' `rope` is
    RoPE's blue, though it runs rope+sinusoidal); the plain scheme keeps it, other labels of the scheme (tags,
    kwargs, settings) get lighter shades of it."""
    from workbench.analysis.settings import base_scheme

    schemes = d.groupby(key)["scheme"].first() if "scheme" in d.columns else pd.Series({l: l for l in d[key].unique()})
    schemes = pd.Series({label: base_scheme(str(label).split(" · ")[0], s) for label, s in schemes.items()})
    out = {}
    for scheme, labels in schemes.groupby(schemes):
        base = S.scheme_color(scheme)
        for i, label in enumerate(sorted(labels.index, key=lambda l: (l != scheme, str(l)))):  # the plain scheme first
            out[label] = S.shade(base, i, len(labels))
    return out


def _levels(dt: pd.DataFrame) -> list[tuple[str, float, str]]:
    """Chance and the best length-only predictor of the test rows `dt` as (kind, level, legend name), each one
    level (mean over the runs, a fraction; the legend name in %); when the two are within 0.02 of each other one
    line stands for both (two patterned lines on one level read as one blotchy line). Runs of different class
    counts (presets) get their levels each (a mean of 1/72 and 1/16 is neither's chance), named by the count."""
    if "chance" in dt.columns and dt["chance"].nunique() > 1:
        return [(kind, level, f"{name}, {round(1 / c)} classes") for c, g in dt.groupby(dt["chance"].round(9))
                for kind, level, name in _levels(g.drop(columns="chance").assign(chance=c))]
    out = []
    chance = float(dt["chance"].mean()) if "chance" in dt.columns and dt["chance"].notna().any() else None
    length = float(dt["length_only"].mean()) if "length_only" in dt.columns and dt["length_only"].notna().any() \
        else None
    if chance is not None and length is not None and abs(chance - length) < 0.02:
        return [("chance", max(chance, length), f"chance ≈ best length-only ({S.pct(max(chance, length))})")]
    if chance is not None:
        out.append(("chance", chance, f"chance ({S.pct(chance)})"))
    if length is not None:
        out.append(("length-only", length, f"best length-only predictor ({S.pct(length)})"))
    return out


def convergence(df: pd.DataFrame, metric: str = "accuracy", splits: tuple[str, ...] = ("train", "test"),
                per_run: bool = False) -> go.Figure:
    """Per task a panel; per label (variant, plus its setting when the table holds several) the test line (solid)
    and the train line (dashed, thinner, translucent) in the scheme's colour, mean over seeds with the min-max
    band over seeds shaded, one legend entry per label; `per_run` draws every run on its own (no band). Plus chance
    and the best length-only predictor (test split, one level each, one line when they coincide) when metric =
    accuracy and the table carries them. Accuracy is drawn in %. Traces: per label and split a line (+ a band with 2+
    seeds), + baselines."""
    d = df[(df["metric"] == metric) & df["split"].isin(splits)].copy()
    accuracy = metric == "accuracy"
    if accuracy:
        d["value"] = S.percent(d["value"])
    tasks = S.tasks_of(d)
    key = "label" if "label" in d.columns else "scheme"
    settings = _settings(d)
    if len(settings) > 1:  # two settings: the setting is part of the label, never averaged together
        d[key] = [f"{l} · {_setting_name((p, s), 2)}" for l, p, s in zip(
            d[key], d["preset"] if "preset" in d.columns else [None] * len(d), d["setting"])]
    if per_run:
        d[key] = [f"{l} · seed {s}" if "seed" in d.columns else f"{l} · {r}" for l, s, r in
                  zip(d[key], d.get("seed", d["run_id"]), d["run_id"])]
    colors = _label_colors(d, key)
    fig = make_subplots(rows=1, cols=max(len(tasks), 1), subplot_titles=[task_label(t) for t in tasks],
                        horizontal_spacing=0.08)
    n_seeds = d.groupby([key, "task"])["run_id"].nunique() if "run_id" in d.columns else pd.Series([1])
    for c, task in enumerate(tasks, 1):
        dt = d[d["task"] == task]
        for (label, split), sub in dt.groupby([key, "split"]):
            per_epoch = sub.groupby("epoch")["value"]
            m = per_epoch.mean()
            name = scheme_label(label) if key == "scheme" else _pretty(label)
            test = split == "test"  # one legend entry per label (its test line); the train line joins its group
            color = colors[label]
            if sub["run_id"].nunique() > 1 if "run_id" in sub.columns else False:
                lo, hi = per_epoch.min(), per_epoch.max()
                fig.add_trace(go.Scatter(x=list(m.index) + list(m.index[::-1]),
                                         y=list(hi.values) + list(lo.values[::-1]),
                                         mode="lines", fill="toself", fillcolor=_alpha(color, 0.15 if test else 0.08),
                                         line=dict(width=0, color=color), hoverinfo="skip", legendgroup=label,
                                         showlegend=False,
                                         name=f"{name} ({split}, min-max over seeds)"), row=1, col=c)
            fig.add_trace(go.Scatter(x=m.index, y=m.values, mode="lines+markers" if test else "lines",
                                     name=name if test else f"{name} ({split})", opacity=1.0 if test else 0.55,
                                     legendgroup=label, showlegend=None if test else False, marker=dict(size=4),
                                     line=dict(color=color, dash=S.SPLIT_DASH.get(split, "solid"),
                                               width=2 if test else 1.2),
                                     hovertemplate=f"{name}, {split}: " + "epoch %{x}, %{y:"
                                                   + (S.PCT + "} %" if accuracy else ".3f}") + "<extra></extra>"),
                          row=1, col=c)
        if accuracy:
            x0, x1 = float(dt["epoch"].min()), float(dt["epoch"].max())
            for kind, level, label in _levels(dt[dt["split"] == "test"]):
                S.add_baseline(fig, level, kind, (x0, x1), label=label, row=1, col=c, percent=True)
        S.integer_axis(fig, dt["epoch"], "x", row=1, col=c, title_text="epoch")
        fig.update_yaxes(title_text=("accuracy (%)" if accuracy else metric) if c == 1 else "", row=1, col=c,
                         **({"range": S.ACCURACY_RANGE} if accuracy else {}))
    most = int(n_seeds.max()) if len(n_seeds) else 1
    how = "one run per line" if most <= 1 else (f"mean over up to {most} seeds, band: min-max over seeds"
                                                if not per_run else "one run per line")
    which = " and ".join("train dashed" if s == "train" else "test solid" for s in splits)
    return S.layout(fig, f"Training curves ({metric}; {which}; {how})")


def _alpha(color: str, a: float) -> str:
    """`#rrggbb` as an rgba() with opacity a."""
    r, g, b = (int(color[k:k + 2], 16) for k in (1, 3, 5))
    return f"rgba({r},{g},{b},{a})"


def _pretty(label: str) -> str:
    """A convergence label `scheme {kwargs}` with the scheme's display name."""
    head, _, rest = str(label).partition(" ")
    return f"{scheme_label(head)} {rest}".strip() if head in S.SCHEME_COLORS else str(label)


FIGURES = {
    "partial_rope": partial_rope,
    "rope_vs_rope_sinusoidal": rope_vs_rope_sinusoidal,
    "mla_rope_nope": mla_rope_nope,
    "convergence": convergence,
    "run_accuracy": run_accuracy,
}
ELSEWHERE = {"run_accuracy": "the dashboard's Findings page"}
