"""Figures of the reproduction's findings, from the tables of `workbench.analysis.claims`."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis.common import scheme_label, task_label, tuples

from . import style


SCHEMES = ("mla", "rope", "nope")
BAR_WIDTH = 0.26  # up to three bars per setting, side by side and centred on the setting's label
ONE_SEED_PATTERN = "/"  # a bar of one seed (no interval) is hatched
MARK_MERGE = 0.02  # a length-only level within 2 points of chance is not drawn apart from it (Task 2)
SCALE_COLOR = "#f0a000"  # the paper-scale (GPU) mean: an amber line across its bar (reads on every scheme's colour)
SCALE_RANK = 1100  # its legend entries after the others (plotly's default rank is 1000)


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


NOTE_INSIDE = 40.0  # a Table 1 bar below this test accuracy (%) carries its note above it: too short to hold it


def still_moving(status: str) -> str:
    """A Table 1 cell's `status` ("2 ceiling; 1 ceiling, not settled") as the bar's note: how many of its runs
    are still moving (not settled, still learning) or did not learn, by the registered run rules; "" when none."""
    moving = lost = 0
    for part in str(status or "").split("; "):
        k, _, what = part.partition(" ")
        if not k.isdigit():
            continue
        lost += int(k) * what.startswith("did not learn")
        moving += int(k) * (not what.startswith("did not learn") and ("not settled" in what or "still" in what))
    return ", ".join(t for t in (f"{lost} not learned" * bool(lost), f"{moving} still moving" * bool(moving)) if t)


def table1(df: pd.DataFrame) -> go.Figure:
    """The paper's Table 1 beside PE-Lab's: one panel per task; per setting, a bar per scheme present, centred
    on the setting's label, with the seeds' range as whiskers (claims.table1's lo / hi; a bar of one seed is hatched:
    no range), and
    on every bar the paper's number for that scheme as a black diamond (the paper ran one setting; the diamond is
    the target each setting is compared with). When the table has `chance` / `length_only` columns (per
    setting and task, from `claims.table1`), each setting's levels are grey marks across its bars
    (length-only only where it is more than MARK_MERGE above chance). When it has `paper_scale_mean`
    (`report.paper_scale.with_paper_scale_table1`: the same cell trained at the paper's own scale on a GPU), that
    mean is an amber line across the bar, dotted where a run of it is still learning. Traces: one bar trace per
    scheme present, one marker trace per task for the paper, one per baseline present, one per task and kind of
    paper-scale mark present, and the one-seed legend key."""
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
            notes = [still_moving(v) for v in (s["status"] if "status" in s else pd.Series("", index=s.index))[have]]
            inside = (100 * s["mean"][have] >= NOTE_INSIDE).to_numpy()  # a short bar's note goes above it, legible
            fig.add_trace(go.Bar(
                x=x[have], y=100 * s["mean"][have], width=BAR_WIDTH, name=scheme_label(scheme), legendgroup=scheme,
                text=notes, textposition=["inside" if k else "outside" for k in inside], insidetextanchor="start",
                textangle=-90, constraintext="none", cliponaxis=False,
                textfont=dict(size=9, color=["white" if k else "#333333" for k in inside]),
                marker=dict(color=style.scheme_color(scheme),
                            pattern=dict(shape=[ONE_SEED_PATTERN if k == 1 else "" for k in n[have]],
                                         fillmode="overlay", fgcolor="white")),
                error_y=dict(type="data", array=100 * err_hi[have], arrayminus=100 * err_lo[have], visible=True),
                customdata=np.stack([[SETTINGS[k] for k in np.array(settings)[have]], n[have],
                                     s["seeds"].fillna("")[have],
                                     (s["status"] if "status" in s else s["seeds"]).fillna("")[have]], axis=-1),
                hovertemplate="%{customdata[0]}<br>" + scheme_label(scheme) + ": %{y:.2f} % (%{customdata[1]} "
                              "seeds: %{customdata[2]})<br>runs: %{customdata[3]}<extra></extra>"), row=1, col=c)
            ok = have & s["paper"].notna().to_numpy()
            px += list(x[ok])
            py += list(100 * s["paper"].to_numpy()[ok])
            pt += [scheme_label(scheme)] * int(ok.sum())
            _scale_marks(fig, s, x, scheme, c)
        _level_marks(fig, d, settings, "chance", "chance", "chance", c)  # drawn over the bars
        if {"chance", "length_only"} <= set(d.columns):  # where length-only is chance (Task 2), one mark says both
            d = d.assign(length_only=d["length_only"].where((d["length_only"] - d["chance"]).abs() > MARK_MERGE))
        _level_marks(fig, d, settings, "length_only", "length-only", "best length-only predictor", c)
        if px:
            fig.add_trace(go.Scatter(x=px, y=py, mode="markers", name="paper (one run)", legendgroup="paper",
                                     marker=dict(symbol="diamond", color="black", size=10), text=pt,
                                     hovertemplate="paper, %{text}: %{y:.2f} %<extra></extra>"), row=1, col=c)
        fig.update_xaxes(tickvals=list(range(len(settings))), ticktext=[style.wrap(SETTINGS[k]) for k in settings],
                         tickangle=0, tickfont=dict(size=11), range=[-0.5, len(settings) - 0.5], row=1, col=c)
    if one_seed:  # the legend key of the hatching
        fig.add_trace(go.Bar(x=[None], y=[None], name="hatched: one seed (no interval)", legendgroup="one seed",
                             marker=dict(color="#bbbbbb", pattern=dict(shape=ONE_SEED_PATTERN, fgcolor="white"))),
                      row=1, col=1)
    fig.update_yaxes(title_text="test accuracy (%)", range=[0, 105], row=1, col=1)
    scale = any(t.meta and "paper_scale" in t.meta for t in fig.data)
    title = ("Table 1: the paper's test accuracy (diamonds), PE-Lab's on CPU (bars: mean over seeds, whiskers: "
             "range) and on a GPU at paper scale (amber)" if scale else
             "Table 1: the paper's test accuracy (diamonds) and PE-Lab's (bars: mean over seeds, whiskers: the seeds' "
             "range)") + "<br><sup>in a bar: its runs still moving or not learned (registered run rules); a bar " \
        "above a diamond whose runs still move is not a model that beats the paper</sup>"
    return style.layout(fig, title, height=480)


def _scale_marks(fig, s: pd.DataFrame, x: np.ndarray, scheme: str, col: int) -> None:
    """The paper-scale means of one scheme's bars (`s`: its rows by setting, `x`: its bars' positions) as amber
    lines across them, one trace per kind (`meta.paper_scale`: "learned", or "still learning", dotted), listed after
    the other legend entries, with the seeds and what the runs can show in the hover (at the line's three points);
    nothing without `paper_scale_mean`."""
    if "paper_scale_mean" not in s:
        return
    mean = pd.to_numeric(s["paper_scale_mean"], errors="coerce").to_numpy()
    n = pd.to_numeric(s["paper_scale_n_seeds"], errors="coerce").fillna(0).astype(int).to_numpy()
    seeds = s["paper_scale_seeds"].fillna("").astype(str).to_numpy()
    status = s["paper_scale_status"].fillna("").astype(str).to_numpy()
    learning = np.array(["still learning" in v for v in status], dtype=bool)
    for kind, pick in (("learned", ~learning), ("still learning", learning)):
        xs, ys, info = [], [], []
        for i in np.flatnonzero(np.isfinite(mean) & np.isfinite(x) & pick):
            xs += [x[i] - BAR_WIDTH / 2, x[i], x[i] + BAR_WIDTH / 2, None]
            ys += [100 * mean[i]] * 3 + [None]
            info += [f"{n[i]} seed{'s' if n[i] != 1 else ''}: {seeds[i]}; {status[i]}"] * 3 + [""]
        if xs:
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines", name="at paper scale (GPU)" + (  # no wider than the widest other entry
                    ",<br>still learning" if kind == "still learning" else ""),
                legendgroup=f"scale-{kind}", legendrank=SCALE_RANK + (kind != "learned"), meta={"paper_scale": kind},
                line=dict(color=SCALE_COLOR, width=4, dash="dot" if kind == "still learning" else "solid"),
                text=info, hovertemplate=f"{scheme_label(scheme)} at the paper's own scale (GPU): %{{y:.2f}} % "
                                         "(%{text})<extra></extra>"), row=1, col=col)


def verdict_matrix(df: pd.DataFrame, by: str = "setting") -> go.Figure:
    """The claims' verdicts as coloured cells (`analysis.findings.verdict_matrix`), the number of seeds run behind each
    written in it. `by="setting"`: claims x settings at the base preset (the rung of the rows with `claim_no` >= 0);
    `by="rung"`: (claim, setting) x the ladder's rungs, for the rows run at a rung other than the base. A cell's
    `customdata` is its row's index in `df` (the page shows that row's evidence on a click). Traces: one heatmap,
    then one legend key per verdict shown (`style.VERDICT_COLORS`)."""
    from workbench.analysis.settings import SHORT

    base = df.loc[df["claim_no"] >= 0, "rung"].iloc[0] if (df["claim_no"] >= 0).any() else None
    if by == "setting":
        d = df[df["rung"] == base]
        d = d.assign(y=[style.wrap(c, 58) for c in d["claim"]],
                     x=[style.wrap(SHORT.get(s, s), 8) for s in d["setting"]])
        xs = [style.wrap(SHORT.get(s, s), 8) for s in dict.fromkeys(
            k for k in ("paper", "authors", "authors-mla", "encoder", "decoder") if k in set(d["setting"]))]
        xs += [x for x in dict.fromkeys(d["x"]) if x not in xs]
        title = f"Each claim per setting ({base}; number: seeds run, not all counted: see the evidence)"
    else:
        keys = set(zip(df.loc[df["rung"] != base, "claim"], df.loc[df["rung"] != base, "setting"]))
        d = df[[k in keys for k in zip(df["claim"], df["setting"])]]
        d = d.assign(y=[style.wrap(f"{c} · {SHORT.get(s, s)}", 110) for c, s in zip(d["claim"], d["setting"])],
                     x=[r.replace("-", "-<br>", 1) for r in d["rung"]])
        xs = list(dict.fromkeys([base.replace("-", "-<br>", 1)] + list(d["x"]))) if len(d) else []
        title = "Each claim per rung of the scale ladder (number: seeds; other rungs: seed 42 unless run with more)"
    ys = list(dict.fromkeys(d["y"]))
    verdicts = [v for v in dict.fromkeys(list(style.VERDICT_COLORS) + list(d["verdict"])) if v in set(d["verdict"])]
    code = {v: i for i, v in enumerate(verdicts)}
    z = np.full((len(ys), len(xs)), np.nan)
    text = np.full((len(ys), len(xs)), "", dtype=object)
    hover = np.full((len(ys), len(xs)), "", dtype=object)
    idx = np.full((len(ys), len(xs)), -1)
    yi, xi = {y: i for i, y in enumerate(ys)}, {x: i for i, x in enumerate(xs)}
    for i, r in zip(d.index, tuples(d)):
        a, b = yi[r.y], xi[r.x]
        z[a, b], text[a, b], idx[a, b] = code[r.verdict], str(int(r.n_seeds)), i
        hover[a, b] = (f"{style.wrap(r.claim, 60)}<br>{r.setting} · {r.rung}<br><b>{r.verdict}</b> "
                       f"({int(r.n_seeds)} seed{'s' if r.n_seeds != 1 else ''} run; the evidence says which count)<br>"
                       "click for the evidence")
    n = max(len(verdicts), 1)
    scale = [[(k + e) / n, style.verdict_color(v)] for k, v in enumerate(verdicts) for e in (0, 1)] or \
        [[0, "#ffffff"], [1, "#ffffff"]]
    fig = go.Figure(go.Heatmap(z=z, x=xs, y=ys, text=text, texttemplate="%{text}", customdata=idx.tolist(),
                               hovertext=hover, hovertemplate="%{hovertext}<extra></extra>", colorscale=scale,
                               zmin=-0.5, zmax=n - 0.5, showscale=False, xgap=2, ygap=2, name="verdicts",
                               showlegend=False))
    for v in verdicts:  # the legend: one square per verdict shown
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=v,
                                 marker=dict(symbol="square", size=12, color=style.verdict_color(v),
                                             line=dict(color="#888888", width=1))))
    fig.update_xaxes(side="top", type="category", categoryorder="array", categoryarray=xs, tickangle=0,
                     tickfont=dict(size=11))
    fig.update_yaxes(autorange="reversed", type="category", categoryorder="array", categoryarray=ys,
                     tickfont=dict(size=11))
    # the legend below the cells, not beside them: in a half-width card (a 1,280-px screen) a legend at the right
    # left the five setting columns too narrow for their labels, which overlapped (tests/browser.py)
    row = 28 if all("<br>" not in y for y in ys) else 32  # two lines of 11-px labels need 32 px apart
    height = 130 + row * max(len(ys), 1)  # the legend below takes about 40 px of it
    style.layout(fig, title, height=height, margin=dict(l=10, r=10, t=95, b=10))
    return fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=-0.01, yanchor="top",
                                         font=dict(size=11)), title_font_size=15)


NO_DEPOSIT = -1  # the x position of "no single-head deposit" in the deposit map


def deposit_map(df: pd.DataFrame) -> go.Figure:
    """Where each scheme puts its largest single-head deposit (`analysis.findings.deposit_map`): one panel per
    task, a row per (scheme, setting), x the layer (a column "none" for runs without a single-head deposit), one
    marker per seed (side by side in the row), its size the zero-ablation drop, the drop written beside it. Traces
    per panel: deposits (scheme colours), deposits of runs still moving (not settled or still learning: faded, not
    counted by the registered rules), no single-head deposit (open), did not learn (grey x)."""
    from workbench.analysis.settings import SHORT

    tasks = [t for t in style.TASK_ORDER if t in set(df["task"])]
    fig = make_subplots(rows=1, cols=max(1, len(tasks)), subplot_titles=[task_label(t) for t in tasks],
                        horizontal_spacing=0.12)
    rows = list(dict.fromkeys(f"{scheme_label(s)} · {SHORT.get(g, g)}" for s, g in zip(df["scheme"], df["setting"])))
    pos = {r: i for i, r in enumerate(rows)}
    n_layers = int(df["n_layers"].max()) if len(df) else 1
    for c, task in enumerate(tasks, 1):
        d = df[df["task"] == task].copy()
        d["row"] = [pos[f"{scheme_label(s)} · {SHORT.get(g, g)}"] for s, g in zip(d["scheme"], d["setting"])]
        d["k"] = d.groupby("row").cumcount()
        d["n"] = d.groupby("row")["seed"].transform("size")
        d["y"] = d["row"] + (d["k"] - (d["n"] - 1) / 2) * 0.22
        has = d["drop"].notna()
        moving = d["status"].astype(str).str.contains("not settled|still learning") if "status" in d else has & False

        def dots(m, **extra) -> dict:  # a deposit: sized by its drop, in its scheme's colour
            return dict(size=(7 + 26 * d.loc[m, "drop"].clip(0, 1)).tolist(),
                        color=[style.scheme_color(s) for s in d.loc[m, "scheme"]], **extra)

        kinds = [("deposit", has & ~moving, dots(has & ~moving, line=dict(color="#333333", width=0.5))),
                 ("deposit, run still moving (not counted)", has & moving,
                  dots(has & moving, opacity=0.35, line=dict(color="#333333", width=1.5))),
                 ("no single-head deposit", ~has & d["learned"], dict(size=9, symbol="circle-open", color="#333333")),
                 ("did not learn", ~has & ~d["learned"], dict(size=8, symbol="x-thin-open", color="#999999"))]
        for name, m, marker in kinds:
            s = d[m]
            x = s["layer"].fillna(NO_DEPOSIT)
            text = [f"{v:.2f}" if v == v else "" for v in s["drop"]]
            hover = [f"{scheme_label(r.scheme)} · {r.setting} · seed {r.seed}<br>"
                     + (f"L{int(r.layer)}.H{int(r.head)}: drop {100 * r.drop:.1f} points" if r.drop == r.drop
                        else name) + f"<br>{r.run_id}" for r in tuples(s)]
            fig.add_trace(go.Scatter(x=x, y=s["y"], mode="markers+text" if name.startswith("deposit") else "markers",
                                     text=text, textposition="middle right", textfont=dict(size=9),
                                     marker=marker, name=name, legendgroup=name, showlegend=c == 1,
                                     hovertext=hover, hovertemplate="%{hovertext}<extra></extra>",
                                     customdata=s["run_id"]), row=1, col=c)
        fig.update_xaxes(tickmode="array", tickvals=[NO_DEPOSIT] + list(range(n_layers)),
                         ticktext=["none"] + [str(i) for i in range(n_layers)], range=[-1.6, n_layers + 0.1],
                         title_text="layer", row=1, col=c)
        fig.update_yaxes(tickmode="array", tickvals=list(range(len(rows))), ticktext=rows if c == 1 else [""] * len(rows),
                         range=[len(rows) - 0.5, -0.5], showgrid=True, row=1, col=c)
    style.layout(fig, "Where the largest single-head deposit falls<br><sup>its layer; a marker per seed, its size "
                      "and number the zero-ablation drop</sup>",
                 height=150 + 24 * max(len(rows), 1) + style.LEGEND_ROOM, margin=dict(l=20, r=20, t=90, b=60))
    # the legend at the figure's bottom edge, under the axis titles: placed in plot units (y -0.08) it sat on the
    # layer ticks of a map of a few rows (the paper-scale runs' three)
    return style.legend_below(fig)


FIGURES = {"table1": table1, "verdict_matrix": verdict_matrix, "deposit_map": deposit_map}
TABLES = {"verdict_matrix": "findings_verdicts", "deposit_map": "findings_deposits"}
ELSEWHERE = {"table1": "`workbench compare --figure FILE`",
             "verdict_matrix": "the findings of `workbench report` and of the dashboard's Findings page",
             "deposit_map": "the findings of `workbench report` and of the dashboard's Findings page"}
