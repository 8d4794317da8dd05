"""A run's setting is one notion (workbench.analysis.settings) and nothing averages runs of two settings: the
experiment figures draw settings and variants apart, the pages open on a run that learned, tables show rounded
values, the Findings page reads the verdict rules (colours, disclaimer, evidence by kind). No browser here."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from workbench.analysis import claims, settings
from workbench.figures import FIGURES
from workbench.figures import style as S


def cfg(scheme="rope", arch="paper", fidelity="pelab", tag=None, preset="repro", task="trigger-distance", seed=42,
        **kw):
    return {"preset": preset, "fidelity": fidelity, "tag": tag, "task": {"task": task}, "train": {"seed": seed},
            "model": {"scheme": scheme, "arch": arch, "scheme_kwargs": kw}}


# ---- the notion --------------------------------------------------------------------------------------------
def test_setting_is_preset_setting_and_variant():
    s = settings.describe(cfg("mla", arch="encoder", fidelity="authors-mla", tag="mla-no-input-pe"))
    assert (s.preset, s.setting, s.variant, s.scheme) == ("repro", "authors-mla", "mla-no-input-pe", "mla")
    assert s.key == "repro/authors-mla/mla-no-input-pe" and "authors' MLA script" in s.label
    assert settings.describe(cfg("mla", arch="encoder")).setting == "encoder"        # PE-Lab's encoder MLA
    assert settings.describe(cfg("rope", rope_heads=1)).variant == 'rope {"rope_heads": 1}'
    assert settings.describe(cfg("rope")).key != settings.describe(cfg("rope", preset="cpu")).key
    # claims reads the one definition
    assert claims.setting_of is settings.setting_of and claims.SETTINGS is settings.SETTINGS


def test_annotate_and_setting_options():
    import json

    idx = pd.DataFrame({"id": ["a", "b", "c"], "preset": ["repro"] * 3, "scheme": ["rope", "mla", "rope"],
                        "config": [json.dumps(cfg()), json.dumps(cfg("mla", arch="encoder", fidelity="authors-mla",
                                                                     tag="mla")), json.dumps(cfg(arch="decoder"))]})
    a = settings.annotate(idx)
    assert list(a["setting"]) == ["paper", "authors-mla", "decoder"]
    assert [o["value"] for o in settings.setting_options(a)] == ["repro/paper", "repro/authors-mla", "repro/decoder"]
    assert settings.default_setting(a) == "repro/paper"
    assert list(settings.in_setting(a, "repro/decoder")["id"]) == ["c"]


# ---- figures draw settings apart -----------------------------------------------------------------------------
def two_settings_mla_table() -> pd.DataFrame:
    """The Partial RoPE page's old failure: the authors' MLA (15 %) and PE-Lab's encoder MLA (99.9 %) of one task."""
    rows = []
    for setting, variant, acc in (("authors-mla", "mla", 0.15), ("authors-mla", "mla-no-input-pe", 0.16),
                                  ("encoder", "mla", 0.999), ("paper", "rope", 1.0)):
        rows.append({"run_id": f"{setting}-{variant}", "scheme": variant.split("-")[0], "task": "trigger-distance",
                     "seed": 42, "preset": "repro", "setting": setting, "variant": variant, "test_acc": acc,
                     "paper_test_acc": 0.88, "n_single_deposits": 1})
    return pd.DataFrame(rows)


def test_mla_rope_nope_draws_each_setting_and_variant_apart():
    df = two_settings_mla_table()
    fig = FIGURES["mla_rope_nope"](df)
    ours = fig.data[0]
    assert len(ours.x) == 4, ours.x  # old builder: one MLA bar, the mean 43.6 % of three settings' runs
    assert sorted(np.round(ours.y, 1)) == [15.0, 16.0, 99.9, 100.0]  # in %
    assert any("authors' MLA script" in x for x in ours.x) and any("encoder" in x for x in ours.x)
    paper = dict(zip(fig.data[1].x, fig.data[1].y))
    assert all(np.isnan(v) for x, v in paper.items() if "no-input-pe" in x), "a diagnosis variant has no paper bar"


def partial_table(setting: str, accs: dict) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": f"{setting}-{k}-{l}", "task": "trigger-distance", "preset": "repro",
                          "setting": setting, "k": k, "layer": l, "test_acc": a, "deepest_deposit_layer": 1.0}
                         for (k, l), a in accs.items()])


def test_partial_rope_panels_per_setting_and_k_as_categories():
    df = pd.concat([partial_table("paper", {(16, -1): 1.0, (1, 0): 0.5, (4, 0): 0.6}),
                    partial_table("encoder", {(16, -1): 0.2})], ignore_index=True)
    fig = FIGURES["partial_rope"](df)
    assert len(fig.data) == 4, "2 heatmaps per setting"
    z = {tr.name: tr for tr in fig.data}
    cells = [float(np.nanmax(np.asarray(tr.z, float))) for tr in fig.data if "accuracy" in tr.name]
    assert sorted(cells) == [20.0, 100.0], "the encoder's full RoPE is not averaged into the paper arch's (%)"
    assert list(fig.data[0].x) == ["k=1", "k=4", "k=16"], "k in order, as categories (one cell width each)"
    assert any("encoder" in a.text for a in fig.layout.annotations) and z


def conv_rows(run_id, setting, variant, seed, values, task="trigger-distance", chance=0.04, length_only=0.18):
    return pd.DataFrame({"run_id": run_id, "scheme": variant, "task": task, "seed": seed, "preset": "repro",
                         "setting": setting, "variant": variant, "label": variant, "epoch": range(1, len(values) + 1),
                         "split": "test", "metric": "accuracy", "value": values, "chance": chance,
                         "length_only": length_only})


def test_convergence_splits_settings_bands_seeds_and_merges_coinciding_baselines():
    df = pd.concat([conv_rows("a", "paper", "rope", 1, [0.5, 0.9]), conv_rows("b", "paper", "rope", 2, [0.7, 1.0]),
                    conv_rows("c", "authors", "rope", 1, [0.1, 0.2]),
                    conv_rows("d", "paper", "nope", 1, [0.1, 0.1], task="trigger-count", chance=0.2,
                              length_only=0.205)], ignore_index=True)
    fig = FIGURES["convergence"](df, splits=("test",))
    lines = [t for t in fig.data if not S.is_baseline(t) and t.fill is None]
    names = sorted(t.name for t in lines)
    assert len(names) == 3 and any("authors" in n for n in names), names  # paper RoPE, authors RoPE, NoPE
    paper = next(t for t in lines if t.name.startswith("RoPE") and "authors" not in t.name)
    np.testing.assert_allclose(paper.y, [60, 95])  # the two paper seeds averaged (in %), the authors' run not
    assert fig.layout.yaxis.title.text == "accuracy (%)" and "%" in paper.hovertemplate
    bands = [t for t in fig.data if t.fill == "toself"]
    assert len(bands) == 1 and bands[0].mode == "lines", "a min-max band where a label has 2 seeds, no markers"
    task2 = [t for t in fig.data if S.is_baseline(t) and t.xaxis == "x2"]
    assert len(task2) == 1 and "≈" in task2[0].name, "chance and length-only within 0.02: one line"
    task1 = {t.meta["baseline"] for t in fig.data if S.is_baseline(t) and t.xaxis == "x"}
    assert task1 == {"chance", "length-only"}
    assert "mean over up to 2 seeds" in fig.layout.title.text
    single = FIGURES["convergence"](df[df.run_id.isin(["c", "d"])], splits=("test",))
    assert "one run per line" in single.layout.title.text and "mean over" not in single.layout.title.text
    # runs of two class counts on one task (a 72-class and a 16-class preset): a chance line each, not their mean
    mixed = pd.concat([conv_rows("e", "paper", "rope", 1, [0.5, 0.9], chance=1 / 72, length_only=0.3),
                       conv_rows("f", "paper", "rope", 2, [0.5, 0.9], chance=1 / 16, length_only=0.5)])
    fig = FIGURES["convergence"](mixed, splits=("test",))
    chance = sorted((round(t.y[0], 3), t.name) for t in fig.data if S.is_baseline(t) and t.meta["baseline"] == "chance")
    assert [c for c, _ in chance] == [round(100 / 72, 3), 6.25] and "72 classes" in chance[0][1], chance
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from workbench.figures.extrapolation import add_accuracy_baselines

    ex = make_subplots(rows=1, cols=1)  # the extrapolation panels likewise
    add_accuracy_baselines(ex, pd.DataFrame({"x": [1, 2], "chance": [1 / 72, 1 / 16], "length_only": [0.3, 0.5]}),
                           "x", 1, 1)
    assert sorted(t.name for t in ex.data if isinstance(t, go.Scatter) and "chance" in t.name) == \
        ["chance (1/16)", "chance (1/72)"]


def test_the_authors_rope_and_its_variants_are_drawn_in_ropes_colour():
    """The authors' `rope` runs rope+sinusoidal; its curve, legend "RoPE", is RoPE's blue (as in Table 1), not
    rope+sinusoidal's green, and its tier-4 variant a lighter shade of that blue; the paper arch's own
    rope+sinusoidal keeps its green."""
    from workbench.analysis.settings import base_scheme

    assert [base_scheme(v, s) for v, s in (("rope", "rope+sinusoidal"), ("rope-final-ln", "rope+sinusoidal"),
                                           ("rope+sinusoidal", "rope+sinusoidal"), ("mla-paper-arch", "mla"),
                                           ("rope {\"rope_heads\": 1}", "rope"), ("alibi", "alibi"))] == [
        "rope", "rope", "rope+sinusoidal", "mla", "rope", "alibi"]
    rows = [conv_rows("a", "authors", "rope", 1, [0.5, 0.9]), conv_rows("b", "authors", "rope-final-ln", 1, [0.4, 0.6]),
            conv_rows("c", "paper", "rope+sinusoidal", 1, [0.3, 0.5])]
    rows[0]["scheme"] = rows[1]["scheme"] = "rope+sinusoidal"
    fig = FIGURES["convergence"](pd.concat(rows, ignore_index=True), splits=("test",))
    color = {t.name: t.line.color for t in fig.data if not S.is_baseline(t) and t.fill is None}
    rope = next(c for n, c in color.items() if n.startswith("RoPE") and "final" not in n)
    final = next(c for n, c in color.items() if "final" in n)
    both = next(c for n, c in color.items() if "sinusoidal" in n.lower() and "final" not in n)
    assert rope == S.scheme_color("rope") and final == S.shade(S.scheme_color("rope"), 1, 2)
    assert both == S.scheme_color("rope+sinusoidal"), color


def test_run_accuracy_bars_per_setting_and_variant_with_train_beside_test():
    rt = pd.DataFrame({"run_id": ["a", "b", "c"], "setting": ["paper", "paper", "authors"], "preset": "repro",
                       "variant": ["rope"] * 3, "scheme": ["rope"] * 3, "task": "trigger-distance", "seed": [1, 2, 1],
                       "test_acc": [0.8, 1.0, 0.3], "train_acc": [0.9, 1.0, 0.9]})
    fig = FIGURES["run_accuracy"](rt, train=True)
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 2 and len(bars[0].x) == 2, "one bar per setting, test and train"
    np.testing.assert_allclose(sorted(bars[0].y), [30, 90])  # in %, as on every page
    assert fig.layout.yaxis.title.text == "accuracy (%)" and "%" in bars[0].hovertemplate


# ---- tables, verdicts --------------------------------------------------------------------------------------
def test_float32_cells_show_rounded():
    df = pd.DataFrame({"theta": np.array([0.1, 7.638999938964844], dtype="float32"),
                       "share": np.array([0.4979999959468841], dtype="float32").repeat(2)})
    shown = S.round_table(df).to_dict("records")
    assert shown[0] == {"theta": 0.1, "share": 0.498} and repr(shown[1]["theta"]) == "7.639"


def test_every_verdict_has_its_own_colour_and_unknown_is_grey():
    from workbench.analysis.claims import OUTCOMES

    verdicts = [*OUTCOMES, "inconclusive"]
    colours = [S.verdict_color(v) for v in verdicts]
    assert len(set(colours)) == len(verdicts) and S.UNKNOWN_VERDICT_COLOR not in colours
    assert S.verdict_color("something new") == S.UNKNOWN_VERDICT_COLOR


# ---- pages (their functions, no server) -----------------------------------------------------------------------
def index_rows() -> pd.DataFrame:
    rows = [("mla-diag", "mla", "authors-mla", "mla-no-input-pe", 0.15, "did not learn"),
            ("nope", "nope", "paper", "nope", 0.15, "did not learn"),
            ("rope-enc", "rope", "encoder", "rope", 1.0, "ceiling"),
            ("rope-k1", "rope", "paper", "rope-k1-all", 0.9, "still learning"),
            ("rope", "rope", "paper", "rope", 0.998, "ceiling"),
            ("rope-t2", "rope", "paper", "rope", 0.99, "ceiling")]
    return pd.DataFrame([{"id": i, "scheme": s, "setting": st, "variant": v, "test_acc": a, "status": "finished",
                          "run_status": rs, "preset": "repro", "seed": 42,
                          "task": "trigger-count" if i.endswith("t2") else "trigger-distance"}
                         for i, s, st, v, a, rs in rows])


def test_default_run_is_a_learned_tier1_paper_run_of_the_preferred_scheme():
    from apps import common as C

    df = index_rows()
    assert C.default_run(df) == "rope"
    assert C.default_run(df, prefer=("nope",)) == "rope", "NoPE did not learn: a run that learned comes first"
    assert C.default_run(df, want="mla-diag") == "mla-diag", "an explicit choice stands"
    label = C.run_label(df.set_index("id").loc["mla-diag"].to_dict() | {"id": "mla-diag"})
    assert "did not learn" in label and "authors' MLA script" in label and label.endswith("— mla-diag")


def test_runs_page_curves_default_to_multi_seed_schemes():
    from apps.common import curve_runs

    rows = [{"id": f"{s}-{seed}", "scheme": s, "variant": s, "task": "trigger-distance", "epoch": 3}
            for s in ("rope", "nope", "alibi", "mla") for seed in (1, 2, 3)]
    rows += [{"id": f"{s}-1", "scheme": s, "variant": s, "task": "trigger-distance", "epoch": 3}
             for s in ("coca", "t5", "fope", "tapa", "wavelet", "legendre", "random", "learned")]
    rows += [{"id": "rope-k1", "scheme": "rope", "variant": "rope-k1-all", "task": "trigger-distance", "epoch": 3}]
    df = pd.DataFrame(rows)
    default = curve_runs(df)
    assert {r.rsplit("-", 1)[0] for r in default} == {"rope", "nope", "alibi", "mla"} and len(default) == 12
    assert len(curve_runs(df, "runs")) == len(df)


def test_the_authors_rope_is_their_settings_plain_run_and_its_curves_are_drawn_by_default():
    """The authors' transformer script tags its Table 1 runs `rope` and `nope` while its RoPE's scheme is
    rope+sinusoidal: `plain_variant` takes both as the setting's plain runs (tier 4's one-field variants and partial
    RoPE are not), so the Runs page draws RoPE's curves and Task 2's panel there too (only NoPE's were drawn: the
    paper-scale runs of results/paper showed one curve of five runs)."""
    from apps.common import curve_runs
    from workbench.analysis.settings import plain_variant

    rows = [{"id": f"{v}-{t}-{seed}", "scheme": scheme, "variant": v, "task": task, "epoch": 3}
            for v, scheme in (("rope", "rope+sinusoidal"), ("nope", "nope"), ("rope-final-ln", "rope+sinusoidal"),
                              ("rope-k1-l0", "rope"))
            for t, task in (("t1", "trigger-distance"), ("t2", "trigger-count")) for seed in (42, 43)]
    df = pd.DataFrame(rows)
    assert list(df.loc[plain_variant(df), "variant"].unique()) == ["rope", "nope"]
    default = curve_runs(df)
    assert sorted(default) == sorted(f"{v}-{t}-{seed}" for v in ("rope", "nope") for t in ("t1", "t2")
                                     for seed in (42, 43))


def fake_claims() -> pd.DataFrame:
    """A claims table as the lead's change will give it: evidence_kind and holds_across_scale columns."""
    return pd.DataFrame([
        {"claim": "RoPE converges fastest on Task 1", "setting": "paper", "verdict": "inconclusive (ceiling)",
         "evidence": "all at 1.0", "runs": ["r1"], "evidence_kind": "curves", "holds_across_scale": "yes"},
        {"claim": "MLA beats RoPE on Task 2", "setting": "paper", "verdict": "beyond the paper",
         "evidence": "0.99 vs 0.98", "runs": ["r1", "r2"], "evidence_kind": "accuracy", "holds_across_scale": "no"},
        {"claim": "learned overfits", "setting": "paper", "verdict": "made-up verdict", "evidence": "gap 0.1",
         "runs": ["r2"], "evidence_kind": "overfit", "holds_across_scale": ""}])


def test_findings_shows_new_columns_and_colours_every_verdict():
    from apps.pages import findings as F

    cl = fake_claims()
    view = F.claims_view(cl)
    assert {"holds_across_scale", "verdict", "no"} <= set(view.columns) and "runs" not in view.columns
    styles = {s["if"]["filter_query"]: s["backgroundColor"] for s in F.verdict_styles(cl["verdict"])}
    assert styles['{verdict} = "made-up verdict"'] == S.UNKNOWN_VERDICT_COLOR
    assert styles['{verdict} = "beyond the paper"'] == S.VERDICT_COLORS["beyond the paper"]
    assert [F.evidence_kind(r) for r in cl.itertuples()] == ["curves", "accuracy", "overfit"]
    old = cl.drop(columns=["evidence_kind"])  # today's claims: guessed from the words
    assert [F.evidence_kind(r) for r in old.itertuples()] == ["curves", "accuracy", "overfit"]


def test_findings_disclaimer_box_is_the_presets_scale_disclaimer():
    """The Findings page says first what differs from the paper's setup: the preset's headline and model line in
    view (the fold's summary, not a bare "scale disclaimer" title), its points inside the fold."""
    from apps.pages import findings as F
    from workbench.train.presets import disclaimer

    d, box = disclaimer("repro"), F.disclaimer("repro")
    summary, points = box.children
    strong, _, lead, _ = summary.children
    assert box.className == "disclaimer" and type(box).__name__ == "Details"
    assert not getattr(box, "open", False)  # folded: the summary alone is in view
    assert "".join(c if isinstance(c, str) else f"`{c.children}`" for c in strong.children) == d.headline
    assert lead == d.lead and lead.startswith("6 layers x 16 heads like the paper, but d_model 128")
    assert points.children == "\n".join(f"- {x}" for x in d.points)
    assert F.disclaimer("not-a-preset") is None


def fake_store(tmp_path):
    """Two finished runs of the paper setting (r1 rope, r2 learned) with metrics, as a store-like object."""
    runs = {}
    for rid, scheme, acc in (("r1", "rope", 1.0), ("r2", "learned", 0.9)):
        m = pd.DataFrame({"epoch": [1, 2], "train_acc": [0.5, 1.0], "test_acc": [0.4, acc], "train_loss": [1, .1],
                          "test_loss": [1, .2]})
        runs[rid] = SimpleNamespace(id=rid, config=cfg(scheme, tag=None), info={}, has_code_diff=False,
                                    status="finished", final={"test_acc": acc, "train_acc": 1.0},
                                    metrics=lambda m=m: m,
                                    tables=lambda: [], has_table=lambda n: False, load_dataset=None)
    idx = pd.DataFrame([{"id": r, "scheme": x.config["model"]["scheme"], "task": "trigger-distance", "preset": "repro",
                         "status": "finished", "seed": 42, "test_acc": x.final["test_acc"], "tag": None,
                         "arch": "paper", "config": x.config} for r, x in runs.items()])
    return SimpleNamespace(get=runs.__getitem__, query=lambda **kw: idx, runs=lambda **kw: list(runs.values()))


@pytest.mark.parametrize("row, kind", [(0, "curves"), (1, "accuracy"), (2, "overfit")])
def test_findings_evidence_by_kind_with_run_links(tmp_path, row, kind):
    from dash import dcc

    from apps.pages import findings as F

    out = F.evidence(fake_store(tmp_path), fake_claims(), str(row))
    graphs = [c for c in out if isinstance(c, dcc.Graph)]
    assert len(graphs) == 1, out
    title = graphs[0].figure.layout.title.text
    assert ("Training curves" in title) if kind == "curves" else ("Final accuracy" in title)
    if kind == "overfit":
        assert "train" in title
    links = [li for c in out if type(c).__name__ == "Details" for ul in c.children[1:] for li in ul.children]
    assert links and all(li.children[0].href.startswith("/ablation?run=") for li in links)


def test_table_component_redacts_text_columns_keeps_ids_whole_and_gives_prose_room():
    from apps import common as C

    df = pd.DataFrame({"run_id": ["t1-rope-repro-s42-abcdef"], "error": ["failed reading /home/u/runs/x/run.json"],
                       "deposit": ["RoPE, Task 1: " + "single-head deposit at layer 1, head 6; " * 4],
                       "theta": np.array([0.1], dtype="float32")})
    t = C.table_component(df)
    row = t.data[0]
    assert row["error"] == "failed reading run.json", "pandas 3 str columns are redacted too"
    assert row["theta"] == 0.1
    nowrap = {s["if"]["column_id"] for s in t.style_data_conditional if s.get("whiteSpace") == "nowrap"}
    assert "run_id" in nowrap and "deposit" not in nowrap
    wide = {s["if"]["column_id"] for s in t.style_cell_conditional if s.get("minWidth") == "380px"}
    assert wide == {"deposit"}


def test_comparison_default_may_be_nope_that_did_not_learn():
    from apps import common as C

    df = index_rows()
    assert C.default_run(df[df.id != "rope"], prefer=("nope",), learned_first=False) == "nope"


def test_header_names_the_stores_as_given_without_server_paths(tmp_path, monkeypatch):
    from apps import store_caption

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert store_caption(tmp_path / "runs", "results/repro") == "your runs: runs · shipped: results/repro"
    elsewhere = tmp_path.parent / "tmp.CwJX6Qlyc"
    assert store_caption(elsewhere) == "your runs: tmp.CwJX6Qlyc"
    assert str(tmp_path.parent) not in store_caption(elsewhere)


def test_mla_rope_nope_takes_the_authors_rope_with_the_papers_number_and_ropes_colour():
    """The experiment behind notebook 02's "MLA vs RoPE vs NoPE": it selected runs by scheme, so the authors' RoPE
    (rope+sinusoidal, tagged rope) was left out; on the paper-scale runs of results/paper it kept 2 of 6. Now each
    run of a variant standing for mla / rope / nope is a row, the paper's Table 1 number beside its plain run, its bar
    in that scheme's colour."""
    from pathlib import Path

    from workbench.analysis import experiments
    from workbench.analysis.experiments import PAPER_TABLE1
    from workbench.store import RunStore

    store = RunStore(Path(__file__).resolve().parents[1] / "results" / "paper", readonly=True)
    runs = [store.get(r) for r in store.run_ids()]
    df = experiments.mla_rope_nope(runs=runs, compute_missing=False)
    assert sorted(df["run_id"]) == sorted(r.id for r in runs) and set(df["base"]) == {"rope", "nope", "mla"}
    rope = df[df["variant"] == "rope"]
    assert (rope["scheme"] == "rope+sinusoidal").all() and len(rope) == 4
    assert [PAPER_TABLE1[("rope", t)] for t in rope["task"]] == list(rope["paper_test_acc"])
    fig = FIGURES["mla_rope_nope"](df)
    colors = dict(zip(fig.data[0].x, fig.data[0].marker.color))
    assert {c for x, c in colors.items() if x.startswith("RoPE")} == {S.scheme_color("rope")}, colors
    assert sum(1 for v in fig.data[1].y if v == v) == len(colors), "every bar here is a plain run: a paper bar each"
