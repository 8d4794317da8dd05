"""The visual grammar on the figure objects themselves: every FIGURES builder, fed the tables of a few tiny runs
of different schemes and both tasks, gives unique legend names, each scheme's colour to its traces, integer
ticks on layer/head axes, no two axis titles at one place (nor a colour bar over a title), and a baseline
trace where the statistic has one. Plus the baselines' definitions, table precision and static export."""
import math
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from workbench.analysis import (ablation, angles, deposit, distance_bias, experiments, extrapolation, hadamard_check,
                                qk_means, rope_expected_score, spectral)
from workbench.analysis.common import scheme_label, tag
from workbench.analysis.baselines import chance, length_only_accuracy
from workbench.figures import FIGURES, TABLE_OF
from workbench.figures import style as S

from test_analysis import make_data, make_model
from test_causal import head_tables  # noqa: F401  (fixture: patching, probes, trigger attention, DLA tables)

TASKS = {"trigger-distance": 6, "trigger-count": 6}
RUNS = [("r-rope-1", "rope", "trigger-distance", 1), ("r-nope-1", "nope", "trigger-distance", 1),
        ("r-alibi-1", "alibi", "trigger-distance", 1), ("r-rope-2", "rope", "trigger-count", 1),
        ("r-rope-1b", "rope", "trigger-distance", 2)]


def fake_run(rid, scheme, task, seed, data=None, epochs=3):
    acc = {"rope": 0.9, "nope": 0.2, "alibi": 0.5}[scheme]
    metrics = pd.DataFrame({"epoch": range(1, epochs + 1), "train_acc": np.linspace(0.2, acc, epochs),
                            "test_acc": np.linspace(0.1, acc, epochs), "train_loss": np.linspace(2, 0.5, epochs),
                            "test_loss": np.linspace(2.2, 0.6, epochs)})
    saved = {}
    run = SimpleNamespace(
        id=rid, final={"test_acc": acc, "test_loss": 0.5, "train_acc": acc, "train_loss": 0.4}, info={},
        has_code_diff=False,
        config={"model": {"scheme": scheme, "scheme_kwargs": {}, "n_heads": 4, "n_layers": 2, "n_classes": 6},
                "task": {"task": task}, "train": {"seed": seed}},
        tables=lambda: list(saved), load_table=lambda n: saved[n], save_table=lambda n, df: saved.__setitem__(n, df),
        metrics=lambda: metrics)
    if data is not None:
        run.load_dataset = lambda: data
    return run


@pytest.fixture(scope="module")
def tables(head_tables):  # noqa: F811
    """Per-run tables of tiny untrained models (2 layers x 4 heads), tagged like stored ones, plus the
    experiment tables over the runs; multi-run tables concatenated."""
    per_run: dict[str, list] = {}
    runs = []
    for rid, scheme, task, seed in RUNS:
        model = make_model(scheme, seed=seed)
        d = make_data(30, extrap=True, min_len=10, seed=seed)
        d.train_x, d.train_y = d.test_x, d.test_y
        run = fake_run(rid, scheme, task, seed, data=d)
        abl = ablation.compute(model, d, n_boot=20)
        t = {"ablation": abl, "deposit": deposit.compute(abl), "qk_means": qk_means.compute(model, d),
             "spectral": spectral.compute(model, d),
             "distance_bias": distance_bias.compute(model, d, n_pairs=100, short=(0, 2), long=(6, 9)),
             "extrapolation": extrapolation.compute(model, d, n_boot=10)}
        if scheme == "rope":
            t["angles"] = angles.compute(model, d, n_pairs=200)
        for name, df in t.items():
            df = tag(df, run)
            run.save_table(name, df)
            per_run.setdefault(name, []).append(df)
        runs.append(run)
    out = {name: dfs[0] for name, dfs in per_run.items()}  # single-run figures get the first run
    out["extrapolation"] = pd.concat(per_run["extrapolation"], ignore_index=True)  # compares runs
    out["ablation_mean"] = out["ablation"]
    out["convergence"] = experiments.convergence(runs=runs)
    for run in runs[:2]:
        run.save_table("qkv", tag(head_tables["qkv"], run))
    out["qkv_shares"] = experiments.qkv_shares(runs=runs)
    for run in runs[1:3]:
        run.save_table("self_repair", tag(head_tables["self_repair"], run))
    out["self_repair_shares"] = experiments.self_repair_shares(runs=runs)
    out["partial_rope"] = experiments.partial_rope(runs=runs[:1], compute_missing=False)  # one run: one cell
    out["rope_vs_rope_sinusoidal"] = experiments.rope_vs_rope_sinusoidal(runs=runs, compute_missing=False)
    out["mla_rope_nope"] = experiments.mla_rope_nope(runs=runs, compute_missing=False)
    from workbench.analysis.claims import run_table

    out["run_accuracy"] = run_table(runs=runs)
    out["hadamard_check"] = hadamard_check(sizes=(8,), n_trials=3)
    out["rope_expected_score"] = rope_expected_score(d_head=8, max_distance=20, n_samples=50)
    out["attention_patterns"] = pattern_rows()  # head_attention reads it too (trigger tokens start with '*')
    out.update({k: v for k, v in head_tables.items() if k not in out})
    from workbench.analysis.claims import table1

    out["table1"] = table1(pd.DataFrame([{"run_id": r.id, "setting": setting, "variant": meta[1], "scheme": meta[1],
                                          "task": meta[2], "seed": meta[3], "test_acc": r.final["test_acc"]}
                                         for r, meta in zip(runs, RUNS) for setting in ("paper", "authors")]))
    out["findings_verdicts"] = pd.DataFrame(
        [{"claim": c, "setting": st, "rung": rung, "verdict": v, "n_seeds": n, "evidence": "e", "runs": [],
          "claim_no": i if rung == "repro" else -1}
         for i, (c, st, rung, v, n) in enumerate([("RoPE shallow", "paper", "repro", "mixed", 3),
                                                   ("RoPE shallow", "authors", "repro", "reproduced", 3),
                                                   ("MLA beats RoPE", "paper", "repro", "inconclusive (ceiling)", 3),
                                                   ("RoPE shallow", "paper", "repro-long", "reproduced", 1)])])
    out["findings_deposits"] = pd.DataFrame(
        [{"scheme": k, "setting": "paper", "task": t, "seed": sd, "layer": l, "head": h, "drop": d, "n_layers": 2,
          "learned": ok, "status": "learned", "run_id": f"r-{k}-{sd}"}
         for k, t, sd, l, h, d, ok in [("rope", "trigger-distance", 1, 1.0, 2.0, 0.5, True),
                                       ("rope", "trigger-distance", 2, np.nan, np.nan, np.nan, True),
                                       ("mla", "trigger-count", 1, 0.0, 1.0, 0.2, True),
                                       ("nope", "trigger-distance", 1, np.nan, np.nan, np.nan, False)]])
    out["findings_study"] = pd.DataFrame(
        [{"group": g, "scheme": k, "train_seed": sd, "data_seed": d, "counted": c, "layer_005": l, "head_005": h,
          "drop_005": dr, "largest_drop_layer": 0 if l != l else l, "largest_drop_head": 1, "largest_drop": 0.04}
         for g, k, sd, d, c, l, h, dr in [("study", "rope", 45, 43, True, 0.0, 3.0, 0.4),
                                          ("study", "rope", 46, 43, False, np.nan, np.nan, np.nan),
                                          ("ladder seeds", "rope", 42, 42, True, 1.0, 6.0, 0.5),
                                          ("study", "mla", 45, 43, True, np.nan, np.nan, np.nan)]])
    return out


def pattern_rows(heads=4, words=("a", "*b", "c", "d", "*e")) -> pd.DataFrame:
    """An attention_patterns table (the explorer's per-example view): uniform weights over the words."""
    words, n = np.array(words), len(words)
    h, q, k = np.meshgrid(np.arange(heads), np.arange(n), np.arange(n), indexing="ij")
    return pd.DataFrame({"layer": 0, "head": h.ravel(), "q_pos": q.ravel(), "k_pos": k.ravel(), "weight": 1.0 / n,
                         "q_token": words[q.ravel()], "k_token": words[k.ravel()], "ablated": h.ravel() == 1})


def build(name, tables):
    return FIGURES[name](tables[TABLE_OF[name]], **({"layer": 1, "head": 2} if name == "head_card" else {}))


def legend_entries(fig):
    return [t for t in fig.data if t.type not in ("heatmap",) and t.showlegend is not False]


# ---- the contract, for every builder ----------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_unique_legend_names(name, tables):
    fig = build(name, tables)
    names = [t.name for t in legend_entries(fig)]
    assert None not in names, f"{name}: a legend entry without a name (shows as 'trace N')"
    assert len(names) == len(set(names)), f"{name}: repeated legend entries {names}"
    fig.to_json()


def _axes(fig, letter):
    return {k: v for k, v in fig.layout.to_plotly_json().items() if k.startswith(f"{letter}axis")}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_layer_and_head_axes_have_integer_ticks(name, tables):
    fig = build(name, tables)
    checked = 0
    for letter in ("x", "y"):
        for key, ax in _axes(fig, letter).items():
            title = ((ax.get("title") or {}).get("text") or "").lower()
            if not title.startswith(("layer", "head", "epoch", "rotary plane", "k (heads", "ropE layer".lower())):
                continue  # a value axis, not a category of layers / heads / epochs / planes
            checked += 1
            if ax.get("type") == "category":
                continue
            vals = ax.get("tickvals")
            assert vals is not None and ax.get("tickmode") == "array", f"{name}.{key} ({title}): free ticks"
            assert all(float(v).is_integer() for v in vals), f"{name}.{key}: ticks {vals}"
    for tr in fig.data:  # heatmaps over layers/heads carry their integer labels
        if tr.type == "heatmap" and tr.x is not None and tr.y is not None:
            assert all(isinstance(v, (int, np.integer, str)) for v in list(tr.x) + list(tr.y)), name
    if name in ("ablation", "ablation_layers", "ablation_violins", "deposit", "spectral", "spectral_eigen", "angles",
                "angles_profile", "convergence", "rope_vs_rope_sinusoidal", "patching", "attribution", "probes", "trigger_attention",
                "dla", "head_summary"):
        assert checked, f"{name}: no layer/head/epoch/plane axis found"


def _title_positions(fig):
    """(letter, side, domain, anchor position) of every titled axis: two equal tuples draw on top of each other."""
    lay = fig.layout.to_plotly_json()
    pos = []
    for letter, other in (("x", "y"), ("y", "x")):
        for key, ax in _axes(fig, letter).items():
            if not (ax.get("title") or {}).get("text"):
                continue
            anchor = ax.get("anchor") or other
            anchor_ax = lay.get(f"{other}axis{anchor[1:]}", {}) if anchor not in ("free",) else {}
            side = ax.get("side") or ("bottom" if letter == "x" else "left")
            ad = tuple(np.round(anchor_ax.get("domain", (0, 1)), 3))
            pos.append((letter, side, tuple(np.round(ax.get("domain", (0, 1)), 3)), ad))
    return pos


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_axis_titles_never_share_a_place_or_a_colour_bar(name, tables):
    fig = build(name, tables)
    pos = _title_positions(fig)
    assert len(pos) == len(set(pos)), f"{name}: two axis titles at one place {pos}"
    y_title_x = [p[3][0] for p in pos if p[0] == "y" and p[1] == "left" and p[3][0] > 0.05]  # titles of inner panels
    for tr in fig.data:
        cb = getattr(tr, "colorbar", None)
        if tr.type != "heatmap" or tr.showscale is False or cb is None or cb.x is None:
            continue
        assert (cb.title.text or ""), f"{name}: unlabelled colour bar"
        for x0 in y_title_x:  # a colour bar (about 0.1 wide with its title) must end before the next panel's title
            assert not (cb.x <= x0 < cb.x + 0.1), f"{name}: colour bar at x={cb.x} covers the y title at {x0}"


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_axis_titles_fit_their_panel(name, tables):
    """A title longer than its axis runs into the next panel's (the old q/k figure drew one long y title per
    row, overlapping). Width estimate: 7 px per character; plot area: the figure size minus its margins."""
    fig = build(name, tables)
    lay = fig.layout
    m = lay.margin
    w = (lay.width or 1000) - (m.l or 80) - (m.r or 80)
    h = (lay.height or 450) - (m.t or 100) - (m.b or 80)
    for letter, size in (("x", w), ("y", h)):
        for key, ax in _axes(fig, letter).items():
            text = (ax.get("title") or {}).get("text") or ""
            d0, d1 = ax.get("domain", (0, 1))
            assert len(text) * 7 <= (d1 - d0) * size + 1, f"{name}.{key}: {text!r} is longer than its axis"


MIXED = ("extrapolation", "convergence", "rope_vs_rope_sinusoidal")


@pytest.mark.parametrize("name", MIXED)
def test_each_scheme_keeps_its_colour(name, tables):
    fig = build(name, tables)
    labels = {scheme_label(s): s for _, s, _, _ in RUNS}
    seen = set()
    for tr in fig.data:
        if S.is_baseline(tr) or tr.name is None:
            continue
        scheme = next((s for lab, s in labels.items() if tr.name.startswith(lab)), None)
        assert scheme is not None, f"{name}: trace {tr.name!r} names no scheme"
        family = {S.shade(S.scheme_color(scheme), i, n) for n in range(1, 6) for i in range(n)}  # runs of a scheme
        assert tr.line.color in family, (name, tr.name, tr.line.color)
        seen.add(scheme)
    assert seen == {"rope", "nope", "alibi"} - ({"nope", "alibi"} if name == "rope_vs_rope_sinusoidal" else set())
    assert len({S.scheme_color(s) for s in S.SCHEME_COLORS}) == len(S.SCHEME_COLORS), "one colour per scheme"


def test_bars_take_the_scheme_colour(tables):
    fig = build("mla_rope_nope", tables)
    ours = fig.data[0]
    for x, color in zip(ours.x, ours.marker.color):
        scheme = next(s for s in S.SCHEME_COLORS if x.startswith(scheme_label(s) + ","))
        assert color == S.scheme_color(scheme)


def test_mixed_tasks_get_separate_panels_and_labels_carry_task_and_seed(tables):
    fig = build("extrapolation", tables)
    assert [a.text for a in fig.layout.annotations][:2] == ["Task 1", "Task 2"]
    names = {t.name for t in legend_entries(fig) if not S.is_baseline(t)}
    assert {"RoPE, Task 1, seed 1", "RoPE, Task 1, seed 2", "RoPE, Task 2", "NoPE, Task 1"} <= names, names
    conv = build("convergence", tables)
    assert [a.text for a in conv.layout.annotations][:2] == ["Task 1", "Task 2"]
    dashes = {"train" if t.name.endswith("(train)") else "test": t.line.dash for t in conv.data if not S.is_baseline(t)}
    assert dashes == {"train": "dash", "test": "solid"}
    assert all(t.showlegend is False for t in conv.data if t.name.endswith("(train)")), "one entry per scheme"


# ---- baselines ----------------------------------------------------------------------------------------------
BASELINES = {"extrapolation": {"chance", "length-only"}, "convergence": {"chance", "length-only"},
             "probes": {"shuffled labels", "length-only"}, "trigger_attention": {"uniform attention"},
             "angles_profile": {"uniform angles"}, "ablation_layers": {"clean model"},
             "ablation_violins": {"clean model"}, "deposit": {"uniform heads"}}


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_baselines_are_drawn(name, tables):
    fig = build(name, tables)
    kinds = {t.meta["baseline"] for t in fig.data if S.is_baseline(t)}
    assert BASELINES[name] <= kinds, (name, kinds)
    if name == "extrapolation":
        ext = tables["extrapolation"]
        ch = [t for t in fig.data if S.is_baseline(t) and t.meta["baseline"] == "chance"]
        assert ch and all(t.y[0] == pytest.approx(100 / 6) for t in ch)  # on the percent axis
        lo = [t for t in fig.data if S.is_baseline(t) and t.meta["baseline"] == "length-only"][0]
        assert max(lo.y) <= 100 and min(lo.y) >= 100 * ext["length_only"].min() - 1e-9
    if name == "ablation_layers":
        clean = [t for t in fig.data if S.is_baseline(t)][0]
        assert clean.y[0] == pytest.approx(tables["ablation"].query("metric == 'accuracy'")["clean"].mean())
        lines = [t for t in fig.data if not S.is_baseline(t)]
        a = tables["ablation"].query("metric == 'accuracy' and layer == 0").sort_values("head")
        np.testing.assert_allclose(lines[0].y, a["clean"] - a["delta"])  # the metric with the head off


def test_length_only_predictor_is_the_majority_label_per_length():
    x = np.array([[1, 2, 0, 0], [3, 4, 0, 0], [5, 6, 0, 0], [1, 2, 3, 0], [4, 5, 6, 0]])
    y = np.array([7, 7, 8, 9, 8])
    # length 2: labels 7, 7, 8 -> 2 right; length 3: 9, 8 -> 1 right
    assert length_only_accuracy(x, y) == pytest.approx(3 / 5)
    assert chance(71) == pytest.approx(1 / 71)
    with pytest.raises(ValueError, match="n_classes"):
        chance(0)


def test_the_baselines_of_a_run_that_ignores_a_label_count_the_examples_its_accuracy_counts():
    """The authors' Task 2 runs ignore label 0 (`train.ignore_label`): their accuracy is over the other examples,
    so the test split's n (the Wilson interval's) and its length-only level are too (it read n 6000 for 5823)."""
    from pathlib import Path
    from types import SimpleNamespace

    from workbench.analysis.baselines import run_baselines, split_baselines
    from workbench.analysis.claims import status_of_run
    from workbench.store import RunStore

    x = np.array([[1, 2, 0, 0], [3, 4, 0, 0], [5, 6, 0, 0], [1, 2, 3, 0], [4, 5, 6, 0]])
    data = SimpleNamespace(train_x=x, train_y=np.array([7, 7, 0, 9, 8]), test_x=x, test_y=np.array([0, 0, 8, 9, 8]))
    every, counted = split_baselines(data, 10), split_baselines(data, 10, ignore_label=0)
    assert list(every.n) == [5, 5] and list(counted.n) == [4, 3]
    assert counted.length_only.tolist() == pytest.approx([3 / 4, 2 / 3])
    shipped = Path(__file__).resolve().parent.parent / "results" / "repro"
    rid = "t2-rope-repro-s43-813a4c"
    if not (shipped / rid).is_dir():
        pytest.skip("no shipped results in this checkout")
    run = RunStore(shipped, readonly=True).get(rid)
    test_y = run.load_dataset().test_y
    assert run.config["train"]["ignore_label"] == 0 and (test_y == 0).any()
    n = int((test_y != 0).sum())
    assert run_baselines(run).set_index("split").loc["test", "n"] == n == status_of_run(run)["n_test"]


def test_uniform_angle_reference_matches_simulated_uniform_angles():
    """uniform_reference against the analysis' own definitions applied to simulated uniform angles."""
    rng = np.random.default_rng(0)
    n, th, L = 200_000, 0.3, 24
    d = rng.integers(-20, 21, n)
    d = d[d != 0]
    a = rng.uniform(0, 2 * math.pi, len(d))
    w = rng.uniform(0.5, 2, len(d))
    scen_a = (d < 0) & (a > 0) & (a < math.pi)
    scen_d = (d > 0) & (a > math.pi)
    anom = scen_a | scen_d
    tau = np.where(scen_a, a / th, np.where(scen_d, (2 * math.pi - a) / th, 0.0))
    ref = angles.uniform_reference(d, w, th, L)
    assert ref["uniform_share_anomalous"] == pytest.approx(anom.mean(), abs=0.005)
    assert ref["uniform_share_affected"] == pytest.approx((anom & (np.abs(d) < tau)).mean(), abs=0.005)
    assert ref["uniform_tau_mean"] == pytest.approx(tau[anom].mean(), rel=0.01)
    assert ref["uniform_tau_capped_mean"] == pytest.approx(np.minimum(tau[anom], L - 1).mean(), rel=0.01)
    assert ref["uniform_weighted_share_anomalous"] == pytest.approx(w[anom].sum() / w.sum(), abs=0.005)


def test_angles_heatmap_is_centred_on_the_uniform_level(tables):
    a = tables["angles"]
    fig = build("angles", tables)
    z = np.asarray(fig.data[0].z, float)
    want = a[a.layer == 0].pivot(index="head", columns="plane", values="share_anomalous") - \
        a[a.layer == 0].pivot(index="head", columns="plane", values="uniform_share_anomalous")
    np.testing.assert_allclose(z, want.values)
    assert fig.data[-1].zmid == 0 and fig.data[-1].colorbar.title.text == "share anomalous − uniform"


# ---- heatmaps ------------------------------------------------------------------------------------------------
def test_single_cell_heatmap_shows_its_value_and_a_colour_bar(tables):
    fig = build("partial_rope", tables)
    assert len(fig.data) == 2
    for tr in fig.data:
        assert np.asarray(tr.z).size == 1 and tr.texttemplate, "the one cell writes its value"
        assert tr.showscale and tr.colorbar.title.text, "and has a labelled colour bar"
        assert tr.zmin < tr.zmax


def test_diverging_heatmap_is_symmetric_around_zero(tables):
    fig = build("ablation", tables)
    hm = fig.data[0]
    assert hm.zmid == 0 and hm.zmin == -hm.zmax and hm.colorscale[0][1] != hm.colorscale[-1][1]


def test_count_heatmaps_read_as_integers_and_wide_panels_leave_values_to_the_hover():
    """A count (methods agreeing) is written as '2', not '2.00', with whole colour-bar ticks; a 16-head panel
    beside another panel writes no values into its cells (they do not fit; the hover has them)."""
    counts = pd.DataFrame([[0, 1, 2], [3, 1, 0]], index=[0, 1], columns=[0, 1, 2])
    hm = S.heatmap(counts, colorbar_title="methods agreeing")
    assert hm.texttemplate == "%{text}" and hm.text[1][0] == "3" and hm.colorbar.dtick == 1
    frac = S.heatmap(counts / 4, colorbar_title="share")
    assert frac.text[1][0] == "0.75" and frac.colorbar.dtick is None
    from workbench.figures import heads
    probes = pd.DataFrame([{"probe": "label_head", "layer": l, "head": h, "score": 0.5, "score_lo": 0.4,
                            "score_hi": 0.6, "selectivity": 0.1 * h / 16, "control": 0.2, "baseline": 0.1,
                            "scheme": "rope", "task": "trigger-distance"} for l in range(2) for h in range(16)])
    fig = heads.probes(probes)
    assert fig.data[-1].texttemplate is None and fig.layout.legend.orientation == "h"
    assert heads.probes(probes[probes["head"] < 8]).data[-1].texttemplate, "8 heads still fit their values"


def test_layer_colours_are_sequential_and_q_k_share_them(tables):
    fig = build("qk_means", tables)
    by = {t.name: t for t in fig.data}
    assert by["q layer 0"].line.color == by["k layer 0"].line.color != by["q layer 1"].line.color
    assert by["q layer 0"].line.dash == "solid" and by["k layer 0"].line.dash == "dot"
    ys = fig.layout.yaxis.title.text, fig.layout.yaxis2.title.text
    assert ys == ("mean of q", "mean of k")


# ---- tables -------------------------------------------------------------------------------------------------
def test_tables_rounded_to_the_precision_that_matters():
    df = pd.DataFrame({"accuracy": [0.912345], "acc_lo": [0.9012345], "wall_s": [12.345], "theta": [0.000123456],
                       "loss": [1.23456], "scheme": ["rope"], "layer": [0]})
    t = S.round_table(df)
    assert list(t.columns[:2]) == ["scheme", "layer"] and S.n_key_columns(t) == 2
    row = t.iloc[0]
    assert row["accuracy"] == 0.912 and row["acc_lo"] == 0.901 and row["wall_s"] == 12.3 and row["loss"] == 1.235
    assert row["theta"] == pytest.approx(0.000123)


# ---- export -------------------------------------------------------------------------------------------------
def test_export_refuses_unknown_formats_and_a_missing_browser(tmp_path, monkeypatch):
    from workbench.figures import export

    with pytest.raises(ValueError, match=r"\.svg, \.pdf, \.png"):
        export.write_figure(go.Figure(), tmp_path / "f.txt")
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-chromium"))
    monkeypatch.delenv("PELAB_CHROMIUM", raising=False)
    with pytest.raises(export.ExportError, match="BROWSER_PATH=.*not an executable.*chromium"):
        export.write_figure(go.Figure(), tmp_path / "f.svg")


def test_export_checks_every_file_was_written_and_retries_the_missing_and_names_what_kaleido_said(tmp_path,
                                                                                               monkeypatch):
    """kaleido returns the errors of the renders that failed instead of raising them, and can return without writing
    a file and without an error: the export renders again the figures whose file is missing or empty, up
    to three tries, then says which it could not write and what kaleido said (never "wrote" a file that is not
    there). A file from an earlier export does not count as written, and stays whole until the new ones are all
    written (each is rendered under a temporary name and moved over its target at the end)."""
    from workbench.figures import export

    monkeypatch.setenv("PELAB_CHROMIUM", "/bin/true")  # any executable: kaleido itself is replaced below
    calls = []

    def flaky(specs):  # the first call writes only its first file, the second writes all it is given
        calls.append([Path(s["path"]).name for s in specs])
        for s in specs[:1] if len(calls) == 1 else specs:
            Path(s["path"]).write_text("<svg/>")
        return []

    monkeypatch.setattr(export, "_render", flaky)
    old = tmp_path / "b.svg"
    old.write_text("<svg>an earlier export</svg>")
    os.utime(old, ns=(0, 0))
    out = export.write_figures([go.Figure(), go.Figure()], [tmp_path / "a.svg", old])
    part = f".part{os.getpid()}"  # each is rendered under a temporary name beside its target, then moved over it
    assert calls == [[f".a{part}-0.svg", f".b{part}-1.svg"], [f".b{part}-1.svg"]]
    assert all(p.read_text() == "<svg/>" for p in out) and sorted(p.name for p in tmp_path.iterdir()) == [
        "a.svg", "b.svg"]
    monkeypatch.setattr(export, "_render", lambda specs: calls.append(specs) or ["TimeoutError: render took 300 s"])
    with pytest.raises(export.ExportError, match=r"the browser wrote no file for .*c\.svg \(3 tries; kaleido said: "
                                                 r"TimeoutError: render took 300 s\)"):
        export.write_figure(go.Figure(), tmp_path / "c.svg")
    assert len(calls) == 2 + export.ATTEMPTS
    spec = calls[-1][0]  # what kaleido is handed: the figure's dict, its (temporary) path, format and layout size
    assert spec["path"] == tmp_path / f".c{part}-0.svg" and spec["opts"] == {
        "format": "svg", "width": 1000, "height": 600, "scale": 1}

    def half(specs):  # writes the first figure, then the export is interrupted
        Path(specs[0]["path"]).write_text("<svg>new</svg>")
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "_render", half)
    with pytest.raises(KeyboardInterrupt):
        export.write_figures([go.Figure(), go.Figure()], [tmp_path / "a.svg", tmp_path / "b.svg"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.svg", "b.svg"]  # no temporary file left
    assert (tmp_path / "a.svg").read_text() == "<svg/>"  # an interrupted export leaves the earlier files whole


def test_export_one_figure_to_svg(tables, tmp_path):
    from workbench.figures import export

    if export.find_browser() is None:
        pytest.skip("no chromium for static export (install Debian's chromium: `make browser`)")
    before = os.environ.get("BROWSER_PATH")
    out = export.write_figure(build("ablation_layers", tables), tmp_path / "abl.svg")
    svg = out.read_text()
    assert svg.startswith("<svg") and "layer 0" in svg and "clean model" in svg
    assert os.environ.get("BROWSER_PATH") == before, "the browser path is handed to kaleido only while it runs"


def test_figure_cli_errors_are_clear(tmp_path):
    from typer.testing import CliRunner

    from workbench.cli import app

    r = CliRunner().invoke(app, ["figure", "x", "nothing", "--out", str(tmp_path / "f.svg"), "--root", str(tmp_path)])
    assert r.exit_code == 2 and "unknown figure 'nothing'" in r.output
    r = CliRunner().invoke(app, ["figure", "x", "ablation", "--out", str(tmp_path / "f.doc"), "--root", str(tmp_path)])
    assert r.exit_code == 2 and ".svg, .pdf, .png" in r.output


def test_tables_of_several_runs_get_a_panel_each(tables):
    """A diagnostic table of two runs is not pooled: one panel per run, the layers' entries shared."""
    a = tables["distance_bias"]
    both = pd.concat([a, a.assign(run_id="other", scheme="nope")], ignore_index=True)
    fig = FIGURES["distance_bias"](both)
    assert [x.text for x in fig.layout.annotations] == ["RoPE", "NoPE"]
    assert len(fig.data) == 2 * a["layer"].nunique()
    np.testing.assert_allclose(fig.data[0].y, FIGURES["distance_bias"](a).data[0].y)
    names = [t.name for t in legend_entries(fig)]
    assert sorted(names) == [f"layer {l}" for l in sorted(a["layer"].unique())]


def test_table1_puts_each_paper_number_on_its_own_schemes_bar(tables):
    """The paper's NoPE diamond sits on the NoPE bar, not at the centre of the setting's group (where RoPE is)."""
    fig = build("table1", tables)
    bars = {t.name: t for t in fig.data if isinstance(t, go.Bar) and t.xaxis in (None, "x")}
    paper = next(t for t in fig.data if t.name == "paper (one run)" and t.xaxis in (None, "x"))
    for x, y, label in zip(paper.x, paper.y, paper.text):
        assert x in list(bars[label].x), f"the paper's {label} ({y:.2f}) is not on a {label} bar"
    assert len(set(paper.x)) == len(paper.x)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_log_axes_show_no_values_that_are_zero_by_construction(name, tables):
    """No builder draws a value below style.LOG_FLOOR on a log axis (zeros plunge to 1e-30 there: issue 22)."""
    fig = build(name, tables)
    for tr in fig.data:
        y = getattr(tr, "y", None)
        ref = getattr(tr, "yaxis", None) or "y"
        if y is None or fig.layout[f"yaxis{ref[1:]}"].type != "log":
            continue
        v = np.asarray([np.nan if a is None else a for a in y], float)
        assert not (v[np.isfinite(v)] < S.LOG_FLOOR).any(), f"{name}: {tr.name} below the floor on a log axis"


# ---- one unit for accuracy: percent (issue 42) -----------------------------------------------------------------
FRACTION_ACCURACY = {  # figures that still draw an accuracy as a 0-1 fraction, and why (reported, not changed here)
    "ablation_layers": "the metric with a head ablated, drawn with its Δ drops (fractions, like the deposit "
                       "thresholds 0.05 / 0.10) on the Ablation page",
    "probes": "a probe's accuracy beside its selectivity (a Δ accuracy, a fraction) in one panel and hover",
}


def _is_accuracy(title) -> bool:
    """A title that reads as an accuracy, not a Δ / drop of one (those stay fractions)."""
    t = (title or "").lower()
    return "accuracy" in t and "δ" not in t and "drop" not in t


def _accuracy_axes(fig):
    """(axis name, 'x' | 'y', title) of every titled axis that reads as an accuracy."""
    return [(key, key[0], fig.layout[key].title.text) for key in fig.layout
            if key.startswith(("xaxis", "yaxis")) and _is_accuracy(fig.layout[key].title.text)]


@pytest.mark.parametrize("name", sorted(set(FIGURES) - set(FRACTION_ACCURACY)))
def test_accuracy_axes_read_in_percent(name, tables):
    """Every axis (and colour bar) titled accuracy says "%" and holds percent: values in [0, 100 + a little] with at
    least one above 1 (a 0-1 fraction fails), and the hovers of its traces print a "%"."""
    fig = build(name, tables)
    for key, letter, title in _accuracy_axes(fig):
        assert "%" in title, f"{name}: axis {key} {title!r} does not say %"
        ref = letter + key[5:]
        vals, hovers = [], []
        for tr in fig.data:
            if (getattr(tr, f"{letter}axis", None) or letter) != ref or tr.type not in ("scatter", "bar", "box"):
                continue
            v = getattr(tr, letter)
            if v is not None:
                vals += [np.nan if a is None else a for a in v]
            if tr.hovertemplate and f"%{{{letter}" in tr.hovertemplate:
                hovers.append(tr.hovertemplate)
        v = np.asarray(vals, float)
        v = v[np.isfinite(v)]
        assert v.size, f"{name}: nothing drawn on the accuracy axis {key}"
        assert v.min() >= 0 and v.max() <= 100 + 1e-9, f"{name}: {key} outside 0-100 %: {v.min()}..{v.max()}"
        assert (v > 1).any(), f"{name}: {key} {title!r} holds 0-1 fractions ({v.max()}), not percent"
        assert all(" %" in h for h in hovers), f"{name}: a hover on {key} prints no %: {hovers}"
    for tr in fig.data:  # a heatmap's colour bar titled accuracy
        bar = getattr(getattr(tr, "colorbar", None), "title", None)
        if tr.type == "heatmap" and bar is not None and _is_accuracy(bar.text):
            z = np.asarray(tr.z, float)
            assert "%" in bar.text and np.nanmax(z) > 1 and np.nanmax(z) <= 100, f"{name}: {bar.text} not in %"


def test_percent_helpers_scale_for_display_only():
    df = pd.DataFrame({"test_acc": [0.99812, np.nan], "top_delta": [0.3, 0.1], "accuracy": np.array([0.5, 1.0],
                                                                                                    "float32")})
    shown = S.percent_table(df)
    assert shown["test_acc"].iloc[0] == 99.81 and np.isnan(shown["test_acc"].iloc[1])
    assert list(shown["accuracy"]) == [50.0, 100.0] and list(shown["top_delta"]) == [0.3, 0.1], "deltas stay"
    assert df["test_acc"].iloc[0] == 0.99812, "the stored table is not touched"
    assert list(S.percent_table(df, headers=True).columns) == ["test_acc (%)", "top_delta", "accuracy (%)"]
    assert S.pct(0.998) == "99.8 %" and S.pct(float("nan")) == "n/a"


def test_figure_cli_says_when_a_runs_figure_shows_a_run_that_did_not_learn(tmp_path, monkeypatch):
    """`workbench figure RUN ablation`: a run that did not learn by the registered run rules gets the dashboard's
    warning on stderr (`claims.reading_note`); a run that learned and settled, none; the figure is written either
    way."""
    from pathlib import Path

    from typer.testing import CliRunner

    from workbench.analysis.claims import reading_note, reading_of
    from workbench.cli import app
    from workbench.figures import export
    from workbench.store import RunStore

    written = []
    monkeypatch.setattr(export, "write_figure", lambda fig, out, **kw: written.append(out))  # no browser needed
    shipped = Path(__file__).resolve().parents[1] / "results" / "repro"
    own = RunStore(tmp_path / "own")
    nope, rope = "t1-nope-repro-s43-8d1651", "t1-rope-repro-s42-e451f6"
    note = reading_note(reading_of(RunStore(shipped, readonly=True).get(nope)))
    assert note is not None and note[0] == "warn"
    for rid, warned in ((nope, True), (rope, False)):
        res = CliRunner().invoke(app, ["figure", rid, "ablation", "--out", str(tmp_path / f"{rid}.svg"),
                                       "--root", str(own.root), "--shipped", str(shipped)])
        assert res.exit_code == 0, res.output
        assert ("note: " in res.stderr) == warned and f"wrote {tmp_path / f'{rid}.svg'}" in res.stdout
    assert f"note: {nope} {note[1]}" in " ".join(CliRunner().invoke(app, [
        "figure", f"{rope},{nope}", "extrapolation", "--out", str(tmp_path / "x.svg"), "--root", str(own.root),
        "--shipped", str(shipped)]).stderr.split())
    assert len(written) == 3


def test_every_verdict_colour_is_told_apart_from_every_other():
    """Two verdicts whose chips differ by less than 12 (of 255) in every channel read as one in the legend (the
    ladder matrix had "one seed" and "too few seeds" 6 apart)."""
    from workbench.figures.style import VERDICT_COLORS

    rgb = {v: tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for v, c in VERDICT_COLORS.items()}
    close = [(a, b) for i, a in enumerate(rgb) for b in list(rgb)[i + 1:]
             if max(abs(x - y) for x, y in zip(rgb[a], rgb[b])) < 12]
    assert not close, close


def test_every_analysis_summarises_its_table_in_one_line(tables):
    """`workbench analyze` prints each analysis's `summary(table)` (`analysis.SUMMARIES`, one per analysis, in its
    own module): one non-empty line for every analysis's table."""
    from workbench.analysis import ANALYSES, SUMMARIES

    assert set(SUMMARIES) == set(ANALYSES) and set(SUMMARIES) <= set(tables)
    for name, summary in SUMMARIES.items():
        table = tables[name]
        if "run_id" in table and table["run_id"].nunique() > 1:  # the fixture concatenates runs; a summary reads one
            table = table[table.run_id == table.run_id.iloc[0]]
        line = summary(table)
        assert isinstance(line, str) and line.strip() and "\n" not in line, (name, line)
