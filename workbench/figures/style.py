"""The one visual grammar every figure builder uses (dashboard, reports, notebooks).

- a fixed colour per PE scheme (`scheme_color`), the same in every figure;
- a sequential colour per layer (`layer_color`, light-to-dark Viridis: shallow to deep);
- dash styles: train dashed / test solid (`SPLIT_DASH`), q solid / k dotted (`TENSOR_DASH`);
- run labels that carry the task and the seed whenever a table mixes them (`run_labels`);
- legends with unique names, grouped per run (`legendgroup`; `finish` hides repeated entries);
- heatmaps over layers and heads with integer category axes, cell values written in when few enough,
  labelled colour bars placed beside their own panel, a diverging scale centred at 0 for deltas (`heatmap`);
- baselines as dotted grey traces flagged `meta={"baseline": kind}` (`add_baseline`), so they show in the
  legend and tests can find them.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative, sample_colorscale

from workbench.analysis.common import scheme_label, task_label

# ---- colours -----------------------------------------------------------------------------------
SCHEME_COLORS = {
    "nope": "#7f7f7f", "sinusoidal": "#ff7f0e", "learned": "#8c564b", "random": "#bcbd22",
    "relative": "#17becf", "t5": "#0b6e78", "alibi": "#9467bd", "rope": "#1f77b4", "rope+sinusoidal": "#2ca02c",
    "mla": "#d62728", "coca": "#e377c2", "fope": "#393b79", "tapa": "#ad494a", "wavelet": "#637939",
    "legendre": "#8c6d31",
}
BASELINE_COLOR = "#555555"
SPLIT_DASH = {"train": "dash", "test": "solid"}
TENSOR_DASH = {"q": "solid", "k": "dot"}
BASELINE_DASH = {"chance": "dot", "length-only": "dashdot", "uniform angles": "dot", "clean model": "dash",
                 "shuffled labels": "dot", "uniform heads": "dot", "no contraction": "dash",
                 "uniform attention": "dash"}
DIVERGING = "RdBu_r"
SEQUENTIAL = "Viridis"
MAX_CELL_TEXT = 120      # write values into heatmap cells up to this many cells
SMALL_GRID = 24          # a heatmap of up to this many cells writes every value; a larger one ...
LABEL_SHARE = 0.15       # ... only those at least this share of the colour scale away from its reference


def scheme_color(scheme: str | None) -> str:
    """The scheme's fixed colour; an unknown scheme gets a stable colour from its name."""
    if scheme in SCHEME_COLORS:
        return SCHEME_COLORS[scheme]
    pal = qualitative.Dark24
    return pal[int(hashlib.md5(str(scheme).encode()).hexdigest(), 16) % len(pal)]


def layer_color(layer: int, n_layers: int) -> str:
    """Sequential colour of layer `layer` out of `n_layers` (Viridis 0.85 -> 0: shallow light, deep dark)."""
    t = 0.0 if n_layers <= 1 else layer / (n_layers - 1)
    return sample_colorscale(SEQUENTIAL, [0.85 * (1 - t)])[0]


def shade(color: str, i: int, n: int) -> str:
    """Variant i of n of a colour: i = 0 is the colour itself, later variants lighter (up to 60 % white)."""
    if i <= 0 or n <= 1:
        return color
    rgb = np.array([int(color[k:k + 2], 16) for k in (1, 3, 5)], float) if color.startswith("#") else \
        np.array([float(v) for v in color[color.index("(") + 1:-1].split(",")[:3]])
    out = rgb + (255 - rgb) * 0.6 * i / (n - 1)
    return "#" + "".join(f"{int(round(v)):02x}" for v in np.clip(out, 0, 255))


TASK_ORDER = ("trigger-distance", "trigger-count")


def tasks_of(df: pd.DataFrame) -> list:
    """The tasks of a table in panel order: Task 1, Task 2, then any other in order of appearance."""
    seen = list(dict.fromkeys(df["task"])) if "task" in df.columns else [None]
    return sorted(seen, key=lambda t: TASK_ORDER.index(t) if t in TASK_ORDER else len(TASK_ORDER) + seen.index(t))


# ---- labels ------------------------------------------------------------------------------------
def title_for(df: pd.DataFrame, what: str) -> str:
    """`what — Scheme, Task` when the table holds a single scheme / task."""
    bits = []
    if "scheme" in df.columns and df["scheme"].nunique() == 1:
        bits.append(scheme_label(df["scheme"].iloc[0]))
    if "task" in df.columns and df["task"].nunique() == 1:
        bits.append(task_label(df["task"].iloc[0]))
    bits = [b for b in bits if b]
    return f"{what} — {', '.join(bits)}" if bits else what


def run_labels(df: pd.DataFrame, key: str = "run_id") -> dict:
    """Label per run in a table of several runs: the scheme, plus the task when the table mixes tasks; while two
    runs share a label, their setting, variant, seed and at last the run id are added (every run gets its own)."""
    if key not in df.columns:
        return {}
    meta = df.drop_duplicates(key).set_index(key)
    mixed_tasks = "task" in meta.columns and meta["task"].nunique() > 1
    labels = {}
    for rid, row in meta.iterrows():
        bits = [scheme_label(row.get("scheme")) if "scheme" in meta.columns else str(rid)]
        if mixed_tasks:
            bits.append(task_label(row.get("task")))
        labels[rid] = ", ".join(b for b in bits if b)
    for extra in ("setting", "variant", "seed", "run_id"):  # disambiguate until every run has its own label
        counts = pd.Series(labels).value_counts()
        for rid, row in meta.iterrows():
            if counts[labels[rid]] > 1:
                v = rid if extra == "run_id" else (row.get(extra) if extra in meta.columns else None)
                if v is None or (not isinstance(v, str) and pd.isna(v)):
                    continue
                labels[rid] += (f", seed {int(v)}" if extra == "seed" else f" ({v})" if extra == "run_id"
                                else f", {v}")
    return labels


# ---- layout ------------------------------------------------------------------------------------
def grid(n: int, max_cols: int = 3) -> tuple[int, int]:
    cols = max(1, min(n, max_cols))
    return math.ceil(max(n, 1) / cols), cols


def share_bars(df: pd.DataFrame, part: str, parts: dict[str, tuple[str, str]], custom: list[str], hover: str,
               barmode: str = "stack") -> go.Figure:
    """One horizontal bar a run (`label`, in order of first appearance), stacked by the values of column `part`
    listed in `parts` {value: (legend name, colour)}, each segment the run's `share` (one trace a part); `hover` reads
    %{customdata[i]} of the `custom` columns, the part's name appended. The figure grows with the runs, and the legend
    sits below (the axis title belongs in the subtitle)."""
    order = list(dict.fromkeys(df["label"]))
    fig = go.Figure()
    for value, (name, color) in parts.items():
        s = df[df[part] == value].set_index("label").reindex(order)
        fig.add_trace(go.Bar(y=order, x=s["share"], orientation="h", name=name, marker_color=color,
                             customdata=s[custom].to_numpy(), hovertemplate=f"{hover}<extra>{name}</extra>"))
    fig.update_layout(barmode=barmode, legend=dict(orientation="h", y=-0.25), height=max(260, 90 + 40 * len(order)))
    return fig


TITLE_WIDTH = 72  # characters a title line holds in a half-width dashboard card on a 1,280-px screen


def wrap(label: str, width: int = 12) -> str:
    """A label broken into lines of about `width` characters at spaces ("<br>" between them), so that no tick label
    needs rotating and no title runs past its figure."""
    lines, cur = [], ""
    for word in label.split():
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}".strip()
    return "<br>".join(lines + [cur])


def wrap_title(title: str, width: int = TITLE_WIDTH) -> str:
    """A title's first line broken where it is longer than `width` characters: after its " — " (the run it shows
    then reads on a line of its own) where both parts fit, else at spaces (`wrap`). A subtitle after "<br>" is kept
    as it is; plotly does not wrap titles itself, and cuts what passes the figure's right edge."""
    head, sep, rest = title.partition("<br>")
    if len(head) <= width:
        return title
    a, dash, b = head.rpartition(" — ")
    head = f"{a}<br>— {b}" if dash and len(a) <= width and len(b) + 2 <= width else wrap(head, width)
    return head + sep + rest


LEGEND_ROOM = 40  # px the bottom margin grows by for a legend below the axis titles (`legend_below`)


def legend_below(fig: go.Figure, x: float = 0, xanchor: str = "left") -> go.Figure:
    """A horizontal legend at the figure's bottom edge, under the x axes' titles, the bottom margin grown by
    LEGEND_ROOM (after `layout`, which sets the margins). A legend placed in paper units below the plot (y < 0) sat
    on the axis title or not depending on the figure's height (the Heads page's edge and q/k/v figures)."""
    fig.update_layout(legend=dict(orientation="h", x=x, xanchor=xanchor, yref="container", y=0, yanchor="bottom"),
                      margin_b=(fig.layout.margin.b or 60) + LEGEND_ROOM)
    return fig


TITLE_LINE = 20  # px a title line takes: the top margin grows by it for each line `wrap_title` adds


def layout(fig: go.Figure, title: str, **kw) -> go.Figure:
    """House template, title (`wrap_title`, the top margin grown for the lines it adds) and margins."""
    margin = dict(dict(l=70, r=30, t=80, b=60), **kw.pop("margin", {}))
    wrapped = wrap_title(title)
    added = wrapped.count("<br>") - title.count("<br>")
    margin["t"] += TITLE_LINE * added
    # plotly puts a title's first baseline at the middle of the top margin and its further lines below it, into the
    # subplot titles; a title broken here hangs from the top instead
    top = dict(yref="container", y=1, yanchor="top", pad=dict(t=12)) if added else {}
    fig.update_layout(title=dict(text=wrapped, **top), template="plotly_white", legend=dict(groupclick="togglegroup"),
                      margin=margin, **kw)
    return finish(fig)


def finish(fig: go.Figure) -> go.Figure:
    """One legend entry per name: later traces with a name already shown join its group and hide their entry."""
    seen: set[str] = set()
    for tr in fig.data:
        if tr.name is None or tr.showlegend is False:
            continue
        if tr.legendgroup is None:
            tr.legendgroup = tr.name
        if tr.name in seen:
            tr.showlegend = False
        seen.add(tr.name)
    return fig


def integer_axis(fig: go.Figure, values, axis: str = "x", row=None, col=None, **kw) -> None:
    """Ticks exactly at the integer values (layers, heads, planes, epochs)."""
    vals = sorted({int(v) for v in values if not pd.isna(v)})
    step = max(1, math.ceil(len(vals) / 16))
    upd = fig.update_xaxes if axis == "x" else fig.update_yaxes
    upd(tickmode="array", tickvals=vals[::step], ticktext=[str(v) for v in vals[::step]], row=row, col=col, **kw)


def _domain(fig: go.Figure, row, col) -> tuple[float, float]:
    if row is None:
        return (0.0, 1.0)
    ref = fig.get_subplot(row, col)
    return tuple(ref.xaxis.domain or (0.0, 1.0)) if ref is not None else (0.0, 1.0)


def colorbar(fig: go.Figure, title: str, row=None, col=None, **kw) -> dict:
    """A labelled colour bar standing just right of its own panel (so it never covers the next panel)."""
    x0, x1 = _domain(fig, row, col)
    ref = fig.get_subplot(row, col) if row is not None else None
    y0, y1 = tuple(ref.yaxis.domain or (0, 1)) if ref is not None else (0.0, 1.0)
    return dict(title=dict(text=title, side="right"), x=x1 + 0.01, xanchor="left", thickness=12,
                len=y1 - y0, y=(y0 + y1) / 2, yanchor="middle", **kw)


def heatmap(z: pd.DataFrame, *, colorbar_title: str, fig: go.Figure | None = None, row=None, col=None,
            diverging: bool = False, zmin=None, zmax=None, fmt: str | None = None, text=None, hover: str = "",
            showscale: bool = True, colorscale: str | None = None, name: str | None = None,
            cell_text: bool = True) -> go.Heatmap:
    """Heatmap of a pivoted table (index -> y, columns -> x). Integer labels stay integers; values are
    written into the cells when `cell_text` and there are at most MAX_CELL_TEXT of them; `diverging` centres
    RdBu at 0 with symmetric limits. The colour bar is placed beside the panel (row, col) of `fig`. `fmt` (d3
    format) defaults to integers when every value is one (counts), 3 decimals when every |value| < 0.1, else 2."""
    vals = z.to_numpy(dtype=float)
    finite = vals[np.isfinite(vals)]
    if fmt is None and finite.size and np.array_equal(finite, np.round(finite)):
        fmt = "d"
    if fmt is None:
        fmt = ".3f" if finite.size and np.abs(finite).max() < 0.1 else ".2f"
    if diverging:
        vmax = float(np.abs(finite).max()) if finite.size else 1.0
        vmax = vmax if vmax > 0 else 1.0
        zmin, zmax = (-vmax if zmin is None else zmin), (vmax if zmax is None else zmax)
    elif finite.size and zmin is None and zmax is None and finite.min() == finite.max():
        zmin, zmax = float(finite.min()) - 0.5, float(finite.max()) + 0.5  # one value: still a readable scale
    hover = hover or "%{y}, %{x}: %{z:" + fmt + "}<extra></extra>"
    kw = dict(z=vals, x=list(z.columns), y=list(z.index), zmin=zmin, zmax=zmax, showscale=showscale,
              colorscale=colorscale or (DIVERGING if diverging else SEQUENTIAL), name=name)
    if diverging:
        kw["zmid"] = 0.0
    if text is not None:  # the caller's per-cell text (e.g. intervals) goes to the hover as customdata
        kw["customdata"] = text
        hover = hover.replace("%{text}", "%{customdata}")
    kw["hovertemplate"] = hover
    if cell_text and vals.size <= MAX_CELL_TEXT:
        kw["text"] = cell_labels(vals, fmt, 0.0 if diverging else None, zmin, zmax)
        kw["texttemplate"] = "%{text}"
        kw["textfont"] = dict(size=11)
    if showscale:
        ticks = dict(dtick=1) if fmt == "d" and finite.size and np.ptp(finite) <= 12 else {}  # counts: whole ticks
        kw["colorbar"] = colorbar(fig if fig is not None else go.Figure(), colorbar_title, row, col, **ticks)
    return go.Heatmap(**kw)


def _format(v: float, fmt: str) -> str:
    """A value as the d3 format `fmt` (d, .2f, .3f) writes it, with the typographic minus plotly uses."""
    text = f"{int(round(v))}" if fmt == "d" else format(v, fmt.lstrip("%"))
    return text.replace("-", "−")


def cell_labels(vals: np.ndarray, fmt: str, ref=None, zmin=None, zmax=None) -> list:
    """The text written into heatmap cells. A small grid (up to SMALL_GRID cells) writes every value; a larger
    one only the cells that stand out: at least LABEL_SHARE of the colour scale's span away from `ref` (0 on a
    diverging scale; None: the grid's median) and not printing as zero. The rest stay blank (the hover has every
    value): a grid of "0.00" and "0.12" writes nothing."""
    finite = vals[np.isfinite(vals)]
    if vals.size <= SMALL_GRID or not finite.size:
        return [[_format(v, fmt) if np.isfinite(v) else "" for v in row] for row in vals]
    lo = float(finite.min()) if zmin is None else float(zmin)
    hi = float(finite.max()) if zmax is None else float(zmax)
    ref = float(np.median(finite)) if ref is None else float(ref)
    cut = LABEL_SHARE * (hi - lo)

    def label(v):
        if not np.isfinite(v) or abs(v - ref) < cut:
            return ""
        text = _format(v, fmt)
        return "" if float(text.replace("−", "-")) == 0 else text

    return [[label(v) for v in row] for row in vals]


def category_axes(fig: go.Figure, z: pd.DataFrame, x_title: str, y_title: str, row=None, col=None,
                  reverse_y: bool = True) -> None:
    """Integer ticks at every row/column label of a heatmap (layers, heads), y reversed (layer 0 on top)."""
    for axis, labels, title in (("x", z.columns, x_title), ("y", z.index, y_title)):
        upd = fig.update_xaxes if axis == "x" else fig.update_yaxes
        if all(isinstance(v, (int, np.integer)) for v in labels):
            integer_axis(fig, labels, axis, row=row, col=col)
        else:
            upd(type="category", row=row, col=col)
        upd(title_text=title, showgrid=False, row=row, col=col)
    if reverse_y:
        fig.update_yaxes(autorange="reversed", row=row, col=col)


# ---- scales ------------------------------------------------------------------------------------
SANE_LOGIT = 1e3         # |attention logit| beyond this: far outside what a softmax can use (weights one-hot)
LOG_FLOOR = 1e-6         # a log axis shows no value below this: smaller ones are masked (zero by construction)


def num(v: float) -> str:
    """A value for a legend or note: 3 significant digits (-144627.88 -> -1.45e+05, 0.0123 -> 0.0123)."""
    return "nan" if v is None or not np.isfinite(v) else f"{v:.3g}".replace("-", "−")


def range_note(fig: go.Figure, values, limit: float, what: str) -> bool:
    """Say in the figure (a note under the title) when |values| exceed `limit`, the sensible range of `what`;
    True when it did."""
    vals = np.asarray(values, float)
    vals = vals[np.isfinite(vals)]
    if not vals.size or np.abs(vals).max() <= limit:
        return False
    fig.add_annotation(text=f"⚠ {what} reach {num(float(np.abs(vals).max()))}, outside the sensible range "
                            f"±{num(limit)}: read shapes, not sizes", xref="paper", yref="paper", x=0, y=1.0,
                       xanchor="left", yanchor="bottom", yshift=22, showarrow=False, name="range note",
                       font=dict(size=12, color="#b35900"))
    return True


def robust_range(values, weights=None, share: float = 0.99) -> tuple[float, float]:
    """The central `share` of the (weighted) values: an axis range that a few extreme values cannot stretch."""
    v = np.asarray(values, float)
    w = np.ones_like(v) if weights is None else np.asarray(weights, float)
    ok = np.isfinite(v) & (w > 0)
    v, w = v[ok], w[ok]
    if not v.size:
        return (0.0, 1.0)
    order = np.argsort(v)
    v, c = v[order], np.cumsum(w[order]) / w.sum()
    tail = (1 - share) / 2
    return float(v[min(np.searchsorted(c, tail), len(v) - 1)]), float(v[min(np.searchsorted(c, 1 - tail), len(v) - 1)])


def log_safe(values, floor: float = LOG_FLOOR) -> np.ndarray:
    """Values for a log axis: those below `floor` (zeros by construction, underflow) become NaN, a gap in the
    line rather than a plunge to 1e-30."""
    v = np.asarray(values, float).copy()
    v[~(v >= floor)] = np.nan
    return v


# ---- accuracy in percent -------------------------------------------------------------------------
# Stored tables keep accuracies as fractions (0-1); every figure, page and report shows them in percent, one unit
# everywhere. Accuracy *drops* (ablation deltas, deposit thresholds 0.05 / 0.10, probe selectivity) stay fractions.
ACCURACY_COLUMNS = ("accuracy", "acc_lo", "acc_hi", "test_acc", "train_acc", "train_acc_eval", "paper_test_acc")
ACCURACY_RANGE = [0, 102]  # a percent accuracy axis: 100 % just below the top edge
PCT = ".1f"                # hover precision of a percent accuracy: `%{y:.1f} %` reads 99.8 %


def percent(values):
    """Accuracies stored as fractions (a scalar, array or Series) in percent, for display."""
    return 100 * (np.asarray(values, float) if isinstance(values, (list, tuple)) else values)


def pct(v) -> str:
    """An accuracy fraction as text in percent: 0.998 -> `99.8 %` (`n/a` when missing)."""
    return "n/a" if v is None or not np.isfinite(v) else f"{100 * v:{PCT}} %"


def percent_table(df: pd.DataFrame, columns=ACCURACY_COLUMNS, headers: bool = False) -> pd.DataFrame:
    """A table for display with its accuracy `columns` (those present) in percent, 2 decimals; `headers`: those
    columns renamed `<name> (%)` (where no page style refers to the column by name, e.g. a report)."""
    present = [c for c in columns if c in df.columns]
    out = df.assign(**{c: (100 * df[c].astype("float64")).round(2) for c in present})
    return out.rename(columns={c: f"{c} (%)" for c in present}) if headers else out


# ---- baselines ---------------------------------------------------------------------------------
def add_baseline(fig: go.Figure, y, kind: str, x, *, label: str | None = None, row=None, col=None,
                 secondary_y: bool | None = None, percent: bool = False) -> None:
    """A reference level drawn as a legend trace flagged meta.baseline = kind (chance, length-only, uniform
    angles, clean model, shuffled labels): a horizontal line y over x = (x0, x1) for a scalar y, or the
    curve (x, y) for lists. Nothing is drawn for a missing (None / NaN) level. `percent`: y is an accuracy
    fraction drawn on a percent axis (y x 100, the hover in %)."""
    ys = [y] if np.isscalar(y) or y is None else list(y)
    if not ys or any(v is None or not np.isfinite(v) for v in ys):
        return
    xs, ys = (list(x), [y, y]) if len(ys) == 1 else (list(x), ys)
    if percent:
        ys = [100 * v for v in ys]
    tr = go.Scatter(x=xs, y=ys, mode="lines", name=label or f"{kind} ({ys[0]:.3g}{' %' if percent else ''})",
                    line=dict(color=BASELINE_COLOR, dash=BASELINE_DASH.get(kind, "dot"), width=1.5),
                    hovertemplate=f"{kind}: %{{y:{PCT if percent else '.3f'}}}{' %' if percent else ''}"
                                  "<extra></extra>", meta={"baseline": kind})
    if row is None:
        fig.add_trace(tr)
    elif secondary_y is None:
        fig.add_trace(tr, row=row, col=col)
    else:
        fig.add_trace(tr, row=row, col=col, secondary_y=secondary_y)


def is_baseline(trace) -> bool:
    return isinstance(trace.meta, dict) and "baseline" in trace.meta


# ---- tables ------------------------------------------------------------------------------------
KEY_COLUMNS = ("id", "run_id", "label", "scheme", "task", "seed", "split", "layer", "head", "metric", "mode", "plane",
               "variant", "k")


def decimals(column: str, values: pd.Series) -> int | None:
    """Decimals a float column is shown with: times (wall, *_s, seconds) 1; accuracies, losses, deltas, shares
    and their intervals 3; columns whose values are all below 0.01 in magnitude, and rotary frequencies (`theta`),
    keep 3 significant digits (None)."""
    c = column.lower()
    if c in ("wall", "seconds", "time", "wall_s", "build_s") or c.endswith(("_s", "_sec", "_seconds", "_time")):
        return 1
    finite = values[np.isfinite(values)]
    if len(finite) and finite.abs().max() < 0.01 and finite.abs().max() > 0:
        return None
    if c in ("theta", "frequency", "freq") and len(finite) and finite.abs().max() <= 1:  # rotary frequencies span
        return None  # decades (1 ... 1e-4): 3 significant digits, so no rotating plane shows as 0
    return 3


def shown(column: str, value):
    """One value as a table shows it: a float rounded per `decimals` (3 significant digits when it is below 0.01,
    so it does not print as 0), '–' for NaN or None; anything else as it is."""
    if value is None or (isinstance(value, (float, np.floating)) and not np.isfinite(value)):
        return "–"
    if not isinstance(value, (float, np.floating)):
        return value
    d = decimals(column, pd.Series([float(value)]))
    return round(float(value), d) if d is not None else float(f"{float(value):.3g}")


def round_table(df: pd.DataFrame) -> pd.DataFrame:
    """The table as shown (dashboard, reports): key columns first, floats rounded per `decimals`."""
    keys = [c for c in KEY_COLUMNS if c in df.columns]
    out = df[keys + [c for c in df.columns if c not in keys]].copy()
    floats = [c for c in out.columns if out[c].dtype.kind == "f"]
    for c in floats:  # float32 0.1 rounds to 0.10000000149011612 once widened for display: widen first
        out[c] = out[c].astype("float64")
    dec = {c: decimals(c, out[c]) for c in floats}
    for c in floats:  # an interval bound is shown like its value: acc_lo -> accuracy, ci_lo -> delta, top_lo -> top_delta
        if c.endswith(("_lo", "_hi")):
            stem = c[:-3]
            for base in (stem, f"{stem}_delta", "delta" if stem == "ci" else "", "accuracy" if stem == "acc" else ""):
                if base in dec:
                    dec[c] = dec[base]
                    break
    for c in floats:
        d = dec[c]
        out[c] = out[c].round(d) if d is not None else out[c].map(lambda v: float(f"{v:.3g}") if np.isfinite(v) else v)
    return out


def n_key_columns(df: pd.DataFrame) -> int:
    """How many leading columns of a `round_table` result are key columns (frozen when the table scrolls)."""
    n = 0
    for c in df.columns:
        if c not in KEY_COLUMNS:
            break
        n += 1
    return n


# ---- claim verdicts ------------------------------------------------------------------------------
VERDICT_COLORS = {  # one light background per verdict (table rows, legend chips); dark text stays readable
    "reproduced": "#cdebd3", "mixed": "#fbe3a8", "not reproduced": "#f5c4be",
    "inconclusive (did not learn)": "#d8cff0", "inconclusive (ceiling)": "#c9def5",
    "inconclusive (within seed spread)": "#dfeef9",
    "inconclusive (still learning)": "#c6ebe6", "inconclusive (one seed)": "#dde7c4", "inconclusive": "#e6e0f3",
    "inconclusive (too few seeds)": "#d9cfa3", "inconclusive (few pairs)": "#d6ccba",
    "inconclusive (not specific)": "#f9d2c4", "inconclusive (specificity not shown)": "#f7ecd9",
    "not testable at this preset": "#eadcc6", "beyond the paper": "#f4d3ea", "pending": "#eef0f4",
}
UNKNOWN_VERDICT_COLOR = "#d9d9d9"


def verdict_color(verdict: str | None) -> str:
    """The verdict's colour; a verdict not in VERDICT_COLORS is grey."""
    return VERDICT_COLORS.get(verdict, UNKNOWN_VERDICT_COLOR)
