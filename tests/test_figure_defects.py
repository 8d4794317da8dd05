"""The figure defects of issue 25 ("Page defects") and issue 22 item 4, each on a made-up table: two runs share
one ablation scale; the deposit figure's axes share their zero; Table 1's bars sit on their labels, one-seed
bars look different and chance / length-only are drawn; heatmaps write only the cells that matter; the head
card gives logits their own axis; no log axis shows values that are zero by construction; spectral and
distance-bias figures stay readable (and say so) when logits are in the millions; extrapolation entries are
unique per run and the shifted split is not joined to the length line."""
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from workbench.figures import FIGURES
from workbench.figures import style as S

from test_analysis import delta_table


def axis_of(fig, trace, axis="y"):
    ref = getattr(trace, f"{axis}axis") or axis
    return fig.layout[f"{axis}axis{ref[1:]}"]


def log_values_below_floor(fig) -> list:
    """(trace name, smallest value) of traces drawn on a log y axis with a value below style.LOG_FLOOR."""
    bad = []
    for tr in fig.data:
        if getattr(tr, "y", None) is None or axis_of(fig, tr).type != "log":
            continue
        y = np.asarray([np.nan if v is None else v for v in tr.y], float)
        if (y[np.isfinite(y)] < S.LOG_FLOOR).any():
            bad.append((tr.name, float(np.nanmin(y))))
    return bad


# ---- ablation atlas ----------------------------------------------------------------------------------------
def test_two_runs_share_one_colour_scale_and_y_range():
    """Run A's effects are at most 0.04, run B's 0.2: drawn on one scale, one colour is one effect size."""
    from workbench.figures.ablation import shared_scale

    a = delta_table([[0.04, 0.0, 0.01, 0.0], [0.0, 0.02, 0.0, 0.0]]).assign(clean=0.9)
    b = delta_table([[0.2, 0.0, 0.0, 0.0], [0.0, 0.0, 0.05, 0.0]]).assign(clean=0.8)
    scale = shared_scale([a, b], "accuracy", None, "ablation_layers")
    hms = [FIGURES["ablation"](t, **scale["ablation"]).data[0] for t in (a, b)]
    assert hms[0].zmax == hms[1].zmax == pytest.approx(0.2) and hms[0].zmin == hms[1].zmin == pytest.approx(-0.2)
    for view in ("ablation_layers", "ablation_violins"):
        sc = shared_scale([a, b], "accuracy", None, view)
        ranges = [tuple(FIGURES[view](t, **sc[view]).layout.yaxis.range) for t in (a, b)]
        assert ranges[0] == ranges[1], view
        lo, hi = ranges[0]
        values = [(t["clean"] - t["delta"]) if view == "ablation_layers" else t["delta"] for t in (a, b)]
        assert lo <= min(v.min() for v in values) and hi >= max(v.max() for v in values)
    from workbench.analysis import deposit

    deps = [FIGURES["deposit"](deposit.compute(t), **scale["deposit"]) for t in (a, b)]
    assert deps[0].layout.yaxis.range == deps[1].layout.yaxis.range and deps[0].layout.yaxis.range[1] >= 0.21
    assert shared_scale([a, None], "accuracy")["ablation"]["zmax"] == pytest.approx(0.04)  # run B not picked yet


def test_deposit_axes_share_their_zero_and_labels_leave_the_bars_free():
    """A negative interval used to push the left axis's 0 above the right one's, so 1/H (0.25) sat below 0."""
    dep = pd.DataFrame({"layer": [0, 1, 2], "pattern": ["single-head", "none", "average"], "n_heads": 4,
                        "top_head": [3, 0, 1], "top_delta": [0.3, 0.01, 0.1], "top_lo": [0.25, -0.08, 0.05],
                        "top_hi": [0.35, 0.1, 0.15], "concentration": [0.9, 0.3, 0.5]})
    fig = FIGURES["deposit"](dep)
    (l0, l1), (r0, r1) = fig.layout.yaxis.range, fig.layout.yaxis2.range
    assert -l0 / (l1 - l0) == pytest.approx(-r0 / (r1 - r0))  # 0 at the same height on both axes
    assert l0 <= -0.08 and l1 >= 0.35
    uniform = next(t for t in fig.data if S.is_baseline(t))
    assert uniform.yaxis == "y2" and min(uniform.y) > 0
    assert all(t.text is None for t in fig.data if isinstance(t, go.Bar)), "no head label over an error bar"
    assert list(fig.layout.xaxis.ticktext) == ["0<br>h3", "1<br>h0", "2<br>h1"]
    assert fig.layout.legend.x > 1.05, "the legend stands right of the C_l axis title"


# ---- Table 1 -----------------------------------------------------------------------------------------------
def t1_table():
    rows = []
    for setting, schemes in (("paper", ("mla", "rope", "nope")), ("authors", ("rope", "nope")),
                             ("authors-mla", ("mla",)), ("encoder", ("mla", "nope"))):
        for task in ("trigger-distance", "trigger-count"):
            for scheme in schemes:
                n = 1 if setting == "encoder" else 3
                rows.append({"setting": setting, "scheme": scheme, "task": task, "paper": 0.9, "mean": 0.8,
                             "lo": np.nan if n == 1 else 0.7, "hi": np.nan if n == 1 else 0.9, "n_seeds": n,
                             "seeds": "0.8", "runs": ["r"], "chance": 1 / 26,
                             "length_only": 0.2 if task == "trigger-distance" else 0.04})
    return pd.DataFrame(rows)


def test_table1_bars_sit_on_their_labels_and_one_seed_bars_are_marked():
    df = t1_table()
    fig = FIGURES["table1"](df)
    for ax in ("x", "x2"):
        bars = [t for t in fig.data if isinstance(t, go.Bar) and (t.xaxis or "x") == ax and t.x[0] is not None]
        layout_ax = fig.layout["xaxis" if ax == "x" else "xaxis2"]
        assert layout_ax.tickangle == 0, "no panel rotates its labels"
        xs = pd.DataFrame([(x, s) for t in bars for x, s in zip(t.x, t.customdata[:, 0])], columns=["x", "label"])
        for tick, label in zip(layout_ax.tickvals, layout_ax.ticktext):
            group = xs[xs["label"].str.replace(" ", "") == label.replace("<br>", "").replace(" ", "")]["x"]
            assert len(group) and group.mean() == pytest.approx(tick), f"bars of {label!r} drift off their label"
        for t in bars:  # one seed: hatched, no interval; more: plain with one
            n = t.customdata[:, 1].astype(int)
            assert [s == S_PATTERN for s in t.marker.pattern.shape] == list(n == 1)
            err = np.asarray([np.nan if v is None else v for v in t.error_y.array], float)
            assert np.isnan(err[n == 1]).all() and np.isfinite(err[n > 1]).all()
    kinds = [t.meta["baseline"] for t in fig.data if S.is_baseline(t)]
    assert kinds.count("chance") == 2 and kinds.count("length-only") == 1, "Task 2's length-only is chance"
    assert any(t.name.startswith("hatched") for t in fig.data)


def test_table1_bars_say_how_many_runs_still_move_or_did_not_learn_legibly():
    """Each bar's note counts its runs still moving (not settled or still learning) and those that did not learn,
    by their statuses (a ceiling run not settled moves too); a bar too short to hold its note carries it above,
    in a dark colour (white text outside a bar is unreadable on the page), a tall one inside, in white."""
    from workbench.figures.findings import NOTE_INSIDE, still_moving

    assert still_moving("2 ceiling; 1 ceiling, not settled") == "1 still moving"
    assert still_moving("1 did not learn; 2 still learning") == "1 not learned, 2 still moving"
    assert still_moving("3 learned") == still_moving("") == still_moving(None) == ""
    df = t1_table()
    mask = (df.setting == "paper") & (df.task == "trigger-distance")
    df.loc[mask, "status"] = ["2 learned; 1 not settled", "3 learned", "3 did not learn"]
    df.loc[mask & (df.scheme == "nope"), "mean"] = 0.15  # short: a NoPE that did not learn
    df["status"] = df["status"].fillna("")
    fig = FIGURES["table1"](df)
    notes = {}
    for t in fig.data:
        if isinstance(t, go.Bar) and (t.xaxis or "x") == "x" and t.x[0] is not None:
            pos = [t.textposition] * len(t.x) if isinstance(t.textposition, str) else list(t.textposition)
            colour = [t.textfont.color] * len(t.x) if isinstance(t.textfont.color, str) else list(t.textfont.color)
            for label, y, text, p, c in zip(t.customdata[:, 0], t.y, t.text, pos, colour):
                notes[(t.name, label)] = (y, text, p, c)
    from workbench.analysis.claims import SETTINGS

    paper = SETTINGS["paper"]
    assert notes[("MLA", paper)][1:] == ("1 still moving", "inside", "white")
    assert notes[("RoPE", paper)][1] == ""
    y, text, p, c = notes[("NoPE", paper)]
    assert y < NOTE_INSIDE and text == "3 not learned" and p == "outside" and c != "white"
    assert all(p == "inside" for y, _, p, _ in notes.values() if y >= NOTE_INSIDE)


S_PATTERN = "/"


def test_table1_draws_each_paper_scale_mean_across_its_own_bar_and_dots_the_ones_still_learning():
    """`paper_scale_mean` (report.paper_scale.with_paper_scale_table1): an amber line across the bar of the same
    (setting, scheme, task) at that mean, dotted where a run of it is still learning, the seeds and status in its
    hover; cells without a paper-scale run, and a table without the columns, draw none and keep the old title."""
    df = t1_table()
    plain = FIGURES["table1"](df)
    assert not any(t.meta and "paper_scale" in t.meta for t in plain.data) and "GPU" not in plain.layout.title.text
    df["paper_scale_mean"], df["paper_scale_n_seeds"] = np.nan, np.nan
    df["paper_scale_seeds"], df["paper_scale_status"] = "", ""
    cells = {("authors", "rope", "trigger-distance"): (0.94, 2, "0.942, 0.946", "2 learned"),
             ("authors", "rope", "trigger-count"): (0.61, 2, "0.590, 0.626", "2 still learning"),
             ("authors-mla", "mla", "trigger-distance"): (0.89, 1, "0.893", "1 still learning"),
             ("authors", "nope", "trigger-distance"): (0.04, 1, "0.039", "1 did not learn")}
    for (setting, scheme, task), v in cells.items():
        i = df.index[(df.setting == setting) & (df.scheme == scheme) & (df.task == task)][0]
        df.loc[i, ["paper_scale_mean", "paper_scale_n_seeds", "paper_scale_seeds", "paper_scale_status"]] = v
    fig = FIGURES["table1"](df)
    assert "GPU" in fig.layout.title.text
    marks = [t for t in fig.data if t.meta and "paper_scale" in t.meta]
    assert {(t.meta["paper_scale"], t.line.dash, t.xaxis or "x") for t in marks} == {
        ("learned", "solid", "x"), ("still learning", "dot", "x"), ("still learning", "dot", "x2")}
    bars = {(t.xaxis or "x", t.name): t for t in fig.data if isinstance(t, go.Bar) and t.x[0] is not None}
    seen = []
    for t in marks:
        x, y = np.array([np.nan if v is None else v for v in t.x], float), np.array(
            [np.nan if v is None else v for v in t.y], float)
        for k in range(0, len(x), 4):  # left end, centre, right end, gap
            scheme = t.hovertemplate.split(" at the paper's")[0]
            bar = bars[(t.xaxis or "x", scheme)]
            j = list(bar.x).index(x[k + 1])  # the centre sits on a bar of its own scheme
            assert x[k + 2] - x[k] == pytest.approx(bar.width) and y[k] == y[k + 1] == y[k + 2]
            setting = bar.customdata[j, 0]
            seen.append((setting, scheme, t.xaxis or "x", round(y[k], 6), t.text[k]))
    from workbench.analysis.settings import SETTINGS
    want = {(SETTINGS[s], {"rope": "RoPE", "mla": "MLA", "nope": "NoPE"}[k], "x" if task == "trigger-distance"
             else "x2", round(100 * v[0], 6), f"{v[1]} seed{'s' if v[1] != 1 else ''}: {v[2]}; {v[3]}")
            for (s, k, task), v in cells.items()}
    assert set(seen) == want and len(seen) == len(want)


# ---- heatmaps ----------------------------------------------------------------------------------------------
def test_heatmaps_write_only_the_cells_that_matter():
    z = pd.DataFrame(np.zeros((6, 16)), index=range(6), columns=range(16))
    z.iloc[:, :] = np.random.default_rng(0).normal(0, 0.001, z.shape)
    z.iloc[3, 12], z.iloc[4, 6] = 0.063, 0.065
    text = S.heatmap(z, colorbar_title="Δ", diverging=True).text
    written = {(i, j): v for i, row in enumerate(text) for j, v in enumerate(row) if v}
    assert written == {(3, 12): "0.063", (4, 6): "0.065"}
    zeros = S.heatmap(z * 0, colorbar_title="Δ", diverging=True).text
    assert not any(v for row in zeros for v in row), "a grid of zeros writes no '0.00'"
    small = S.heatmap(pd.DataFrame([[0.0, 0.5]]), colorbar_title="acc").text
    assert [list(r) for r in small] == [["0.00", "0.50"]], "a small grid writes every value"
    hm = S.heatmap(z, colorbar_title="Δ", diverging=True, text=[["[a, b]"] * 16] * 6,
                   hover="%{z:.3f} %{text}<extra></extra>")
    assert hm.customdata[0][0] == "[a, b]" and "%{customdata}" in hm.hovertemplate, "intervals stay in the hover"


# ---- heads -------------------------------------------------------------------------------------------------
def test_head_card_gives_logits_their_own_axis():
    row = {"layer": 0, "head": 0, "zero_delta": 0.01, "zero_lo": 0.0, "zero_hi": 0.02, "patch_effect": 0.05,
           "probe_selectivity": 0.1, "t2_to_t1": 0.3, "dla": 106.0, "dla_lo": 104.0, "dla_hi": 108.0,
           "deposit_head": False, "paper_deposit": False, "methods": "dla"}
    fig = FIGURES["head_card"](pd.DataFrame([row]))
    unit, logits = fig.data
    assert max(abs(v) for v in unit.x) <= 1 and list(logits.x) == [106.0]
    assert unit.xaxis != logits.xaxis and "logits" in fig.layout.xaxis2.title.text
    assert "logit" not in fig.layout.xaxis.title.text


def test_probe_axes_hold_one_quantity_each():
    rows = [{"probe": "position", "layer": l, "score": 0.9, "score_lo": 0.8, "score_hi": 1.0, "control": 0.0,
             "baseline": 0.2, "selectivity": np.nan} for l in (-1, 0, 1)]
    rows += [{"probe": "label_stream", "layer": l, "score": 0.6, "score_lo": 0.5, "score_hi": 0.7, "control": 0.1,
              "baseline": 0.1, "selectivity": 0.5} for l in (0, 1)]
    fig = FIGURES["probes"](pd.DataFrame(rows))
    titles = {axis_of(fig, t).title.text for t in fig.data if t.name and t.name.startswith(("position R²", "label"))}
    assert titles == {"R²", "accuracy"}
    assert all("/" not in (fig.layout[a].title.text or "") for a in fig.layout if a.startswith("yaxis"))


def test_trigger_attention_draws_no_log_axis_over_zero_weights():
    """Weights that are exactly 0 at some distances (masked keys) used to plunge to 1e-30 on a log axis."""
    rows = [{"layer": l, "head": h, "measure": "t2_to_t1", "distance": np.nan, "value": 0.5, "ci_lo": 0.4,
             "ci_hi": 0.6, "uniform": 0.1} for l in range(2) for h in range(2)]
    rows += [{"layer": l, "head": h, "measure": "by_distance", "distance": d, "value": 0.0 if d > 6 else 0.1,
              "ci_lo": np.nan, "ci_hi": np.nan, "uniform": 0.1} for l in range(2) for h in range(2) for d in range(9)]
    fig = FIGURES["trigger_attention"](pd.DataFrame(rows))
    assert not log_values_below_floor(fig)
    assert fig.layout.yaxis2.type != "log"


# ---- spectral and distance bias ----------------------------------------------------------------------------
def spectral_table(scale):
    """Two layers x two heads; layer 1's logits `scale` times layer 0's (a U-shaped profile in both)."""
    rows = []
    for layer, k in ((0, 1.0), (1, scale)):
        for head in range(2):
            for off in range(-5, 6):
                rows.append({"layer": layer, "head": head, "offset": off, "mean_logit": k * (off ** 2 + 3.0),
                             "explained_var": 0.5, "eig_min": -1.0, "eig_max": k, "cond": 2.0,
                             "eig_range": 0.0 if head == 1 else k + 1})
    return pd.DataFrame(rows)


def test_spectral_figures_show_structure_when_logits_are_in_the_millions():
    wild = spectral_table(2e6)
    fig = FIGURES["spectral"](wild)
    lines = [t for t in fig.data if t.type == "scatter"]
    for t in lines:  # each layer on its own scale: the small layer is not flattened to a line at 0
        y = np.asarray(t.y, float)
        assert np.abs(y).max() == pytest.approx(1.0) and y.std() > 0.2, t.name
        assert "×" in t.name
    assert any("outside the sensible range" in a.text for a in fig.layout.annotations)
    eig = FIGURES["spectral_eigen"](wild)
    assert eig.layout.yaxis.type == "log" and not log_values_below_floor(eig)
    assert any("outside the sensible range" in a.text for a in eig.layout.annotations)
    tame = FIGURES["spectral"](spectral_table(2.0))
    assert not any("outside" in (a.text or "") for a in tame.layout.annotations)
    assert all("×" not in t.name for t in tame.data if t.type == "scatter"), "similar layers keep their units"
    # a few decades (a demo run's ranges: 0.7 to 70): plotly's own log ticks label every digit and 9 ran into 10 in
    # the report; labels at 1, 2 and 5 of each decade only. Over many decades plotly's decade ticks are kept
    assert FIGURES["spectral_eigen"](spectral_table(20.0)).layout.yaxis.dtick == "D2"
    assert eig.layout.yaxis.dtick is None


def test_distance_bias_axis_and_legend_stay_readable():
    edges = np.linspace(-6e7, 6e7, 41)
    rows = []
    for layer in range(2):
        for head in range(2):
            counts = np.zeros(40, int)
            counts[20] = 990
            counts[0] = 1  # one extreme pair stretches the bins to -60 M
            for lo, hi, c in zip(edges[:-1], edges[1:], counts):
                rows.append({"layer": layer, "head": head, "bin_lo": lo, "bin_hi": hi, "count": c,
                             "mean_diff": -144627.88 * (layer + 1), "run_id": "r", "scheme": "mla",
                             "task": "trigger-distance"})
    fig = FIGURES["distance_bias"](pd.DataFrame(rows))
    names = [t.name for t in fig.data]
    assert not any(re.search(r"\d\.\d{3,}", n) or re.search(r"\d{4,}", n) for n in names), names
    lo, hi = fig.layout.xaxis.range
    assert hi - lo < 0.5 * (edges[-1] - edges[0]), "the axis is not stretched by one extreme pair"
    assert any("outside the sensible range" in a.text for a in fig.layout.annotations)
    assert "most pairs fall in one bin" in fig.layout.title.text and "L0.H0" in fig.layout.title.text


def test_distance_bias_says_when_its_bins_cannot_show_the_heads():
    """Tables computed before `shared_edges` (49 of the 205 shipped repro runs): one head's range set the bins and
    the other heads' pairs sit in one bin. The title names the head and points to the per-head share; a table whose
    bins resolve the heads gets no such note."""
    edges = np.linspace(-4, 4, 41)

    def table(wide_head: bool):
        rows = []
        for layer in range(3):
            for head in range(2):
                counts = np.zeros(40, int)
                if wide_head and (layer, head) == (2, 1):
                    counts[:] = 25
                elif wide_head:
                    counts[20] = 1000
                else:
                    counts[14:26] = [20, 40, 70, 110, 140, 120, 120, 140, 110, 70, 40, 20]
                rows += [{"layer": layer, "head": head, "bin_lo": lo, "bin_hi": hi, "count": c, "mean_diff": 0.1,
                          "run_id": "r", "scheme": "rope", "task": "trigger-distance"}
                         for lo, hi, c in zip(edges[:-1], edges[1:], counts)]
        return pd.DataFrame(rows)

    note = FIGURES["distance_bias"](table(True)).layout.title.text
    assert "L2.H1" in note and "per-head share" in note and "0.2 wide" in note, note
    assert "<br>" not in FIGURES["distance_bias"](table(False)).layout.title.text


def test_long_titles_wrap_and_grow_the_top_margin():
    """Plotly cuts a title at the figure's right edge (the deposit map's at 1,280 px): `style.layout` breaks a first
    line longer than TITLE_WIDTH (after its " — " where that fits) and grows the top margin by a line for each break
    it adds, so the title does not run into the subplot titles; a subtitle after "<br>" is kept as given."""
    short = S.layout(go.Figure(), "Short title")
    assert short.layout.title.text == "Short title" and short.layout.margin.t == 80
    run = "Head ablation: Δ accuracy = clean − ablated (0 = no effect), 3 seeds — RoPE, Task 1"
    fig = S.layout(go.Figure(), run + "<br><sup>a note</sup>")
    assert fig.layout.title.text == run.replace(" — ", "<br>— ") + "<br><sup>a note</sup>"
    assert fig.layout.margin.t == 80 + S.TITLE_LINE
    words = "word " * 40
    lines = S.layout(go.Figure(), words, margin=dict(l=1, r=1, t=50, b=1)).layout
    assert all(len(x) <= S.TITLE_WIDTH for x in lines.title.text.split("<br>"))
    assert lines.margin.t == 50 + S.TITLE_LINE * lines.title.text.count("<br>") and lines.margin.l == 1


# ---- extrapolation -----------------------------------------------------------------------------------------
def extrap_rows(rid, acc):
    return [{"run_id": rid, "scheme": "mla", "task": "trigger-distance", "seed": 42, "split": s, "max_len": m,
             "accuracy": a, "loss": 1 - a, "acc_lo": a - 0.01, "acc_hi": a + 0.01, "train_len": 48,
             "chance": 1 / 26, "length_only": 0.2}
            for s, m, a in (("test", 41, acc), ("len1.25x", 60, acc * 0.8), ("len2x", 96, acc * 0.5),
                            ("shifted", 96, acc * 0.4))]


def test_extrapolation_tells_runs_apart_and_does_not_join_shifted_to_the_length_line():
    df = pd.DataFrame(extrap_rows("t1-mla-repro-s42-aaa", 1.0) + extrap_rows("t1-mla-encoder-repro-s42-bbb", 0.17))
    fig = FIGURES["extrapolation"](df)
    shown = [t for t in fig.data if t.showlegend is not False and not S.is_baseline(t)]
    assert len(shown) == 2 and len({t.name for t in shown}) == 2, [t.name for t in shown]
    assert len({t.line.color for t in shown}) == 2, "two runs of one scheme get two shades"
    for t in fig.data:
        if S.is_baseline(t) or t.mode is None or "lines" not in t.mode:
            continue
        assert len(set(t.x)) == len(t.x), f"{t.name}: a line through two splits at one x"
    shifted = [t for t in fig.data if t.mode == "markers" and "shifted" in list(t.text)]
    assert len(shifted) == 4  # per run, accuracy and loss


def test_run_labels_are_unique_even_for_runs_of_one_scheme_task_and_seed():
    df = pd.DataFrame({"run_id": ["a", "b", "c"], "scheme": "mla", "task": "trigger-distance", "seed": [42, 42, 43]})
    labels = S.run_labels(df)
    assert len(set(labels.values())) == 3 and labels["c"] == "MLA, seed 43"
    with_variant = S.run_labels(df.assign(variant=["mla", "mla-encoder", "mla"]))
    assert with_variant["b"] == "MLA, mla-encoder" and len(set(with_variant.values())) == 3


def test_table1_levels_come_from_the_runs():
    """claims.table1: each row's chance and length-only levels are the mean over its runs' run-table levels (read
    from each run's dataset by claims.run_table); NaN where no run has them (the figure then draws no mark)."""
    from workbench.analysis.claims import table1

    rows = [{"run_id": rid, "setting": "paper", "variant": "rope", "scheme": "rope", "task": "trigger-distance",
             "seed": seed, "test_acc": 0.9, "status": "learned", "n_test": 100, "chance": 0.25, "length_only": lo}
            for rid, seed, lo in (("a", 42, 0.2), ("b", 43, 0.4))]
    rows.append({"run_id": "c", "setting": "authors-mla", "variant": "mla", "scheme": "mla", "task": "trigger-distance",
                 "seed": 42, "test_acc": 0.9, "status": "learned", "n_test": 100, "chance": np.nan,
                 "length_only": np.nan})
    out = table1(pd.DataFrame(rows)).set_index("setting")
    assert out.loc["paper", "chance"] == 0.25 and out.loc["paper", "length_only"] == pytest.approx(0.3)
    assert np.isnan(out.loc["authors-mla", "chance"]) and np.isnan(out.loc["authors-mla", "length_only"])


def test_an_attention_patterns_tokens_are_labelled_a_few_apart_triggers_first():
    """48 tokens labelled on each axis ran into each other on the Heads page (the demo's own runs); at most
    TOKEN_TICKS labels, at least k positions apart, trigger tokens placed first."""
    from workbench.figures.heads import TOKEN_TICKS, _token_ticks

    tokens = [f"*w{i}" if i in (3, 4, 5, 30) else f"w{i}" for i in range(48)]
    ticks = _token_ticks(tokens)
    vals = ticks["tickvals"]
    step = -(-48 // TOKEN_TICKS)
    assert len(vals) <= TOKEN_TICKS + 1 and min(b - a for a, b in zip(vals, vals[1:])) >= step
    assert 3 in vals and 30 in vals and ticks["ticktext"][vals.index(30)] == "*w30"
    assert _token_ticks(tokens[:10])["tickvals"] == list(range(10)), "a short example keeps every label"


def test_a_legend_below_sits_under_the_axis_titles():
    """The edge and q/k/v figures put their legend at y = -0.15 of the plot, on the x axis' title at some heights;
    `legend_below` anchors it to the figure's bottom edge and grows the bottom margin for it."""
    fig = S.legend_below(S.layout(go.Figure(go.Scatter(x=[0], y=[0], name="a")), "t"), x=1, xanchor="right")
    assert fig.layout.legend.yref == "container" and fig.layout.legend.y == 0 and fig.layout.legend.yanchor == "bottom"
    assert fig.layout.margin.b == 60 + S.LEGEND_ROOM
