"""Figures build from their tables alone; the experiments over sets of runs give the expected tables."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from workbench.analysis import (NotApplicable, ablation, aggregate_seeds, angles, deposit, distance_bias, experiments,
                                extrapolation, hadamard_check, qk_means, rope_expected_score, spectral)
from workbench.figures import FIGURES

from test_analysis import delta_table, make_data, make_model


@pytest.fixture(scope="module")
def tables():
    model = make_model("rope")
    d = make_data(30, extrap=True, min_len=10)
    abl = ablation.compute(model, d, n_boot=30)
    return {
        "ablation": abl,
        "deposit": deposit.compute(abl),
        "qk_means": qk_means.compute(model, d),
        "angles": angles.compute(model, d, n_pairs=300),
        "spectral": spectral.compute(model, d),
        "distance_bias": distance_bias.compute(model, d, n_pairs=200, short=(0, 2), long=(6, 9)),
        "extrapolation": extrapolation.compute(model, d, n_boot=20),
        "hadamard_check": hadamard_check(sizes=(8,), n_trials=3),
        "rope_expected_score": rope_expected_score(d_head=8, max_distance=20, n_samples=50),
    }


# name -> expected number of traces for the tiny rope model (2 layers); baselines (clean model, chance,
# length-only, uniform angles, 1/H) count as traces
EXPECTED = {"ablation": 1, "ablation_layers": 3, "ablation_violins": 3, "qk_means": 4, "angles": 2,
            "angles_profile": 3, "spectral": 3, "spectral_eigen": 2, "distance_bias": 2, "extrapolation": 5,
            "hadamard_check": 4, "rope_expected_score": 6}


@pytest.mark.parametrize("name", sorted(EXPECTED) + ["deposit"])
def test_figure_builds_from_its_table(name, tables):
    key = {"ablation_layers": "ablation", "ablation_violins": "ablation", "spectral_eigen": "spectral",
           "angles_profile": "angles"}.get(name, name)
    fig = FIGURES[name](tables[key])
    assert isinstance(fig, go.Figure)
    assert name == "deposit" or len(fig.data) == EXPECTED[name], name
    if name == "deposit":  # one bar trace per pattern present, the concentration and its uniform level 1/H
        assert len(fig.data) == tables["deposit"]["pattern"].nunique() + 2
    fig.to_json()  # serialisable, as the dashboard needs


def test_ablation_figure_values_and_modes(tables):
    abl = tables["ablation"]
    fig = FIGURES["ablation"](abl)
    z = np.asarray(fig.data[0].z)
    acc = abl[abl.metric == "accuracy"].pivot(index="layer", columns="head", values="delta").values
    np.testing.assert_allclose(z, acc)
    both = pd.concat([abl, abl.assign(mode="mean")])
    assert len(FIGURES["ablation"](both).data) == 2
    assert len(FIGURES["ablation_mean"](both).data) == 2


def test_qk_figure_shades_undertrained_dims(tables):
    fig = FIGURES["qk_means"](tables["qk_means"])
    under = tables["qk_means"].loc[tables["qk_means"].undertrained, "dim"].nunique()
    assert under > 0 and len(fig.layout.shapes) == 2 * under  # one band per dim in each of the q and k panels


# ---- experiments over runs (fake runs with hand-made tables) ------------------------------------------
def fake_run(rid, scheme, task, seed, kw=None, deltas=None, acc=0.9, epochs=3):
    abl = delta_table(deltas or [[0.4, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    saved = {"ablation": abl}
    metrics = pd.DataFrame({"epoch": range(1, epochs + 1), "train_acc": np.linspace(0.2, acc, epochs),
                            "test_acc": np.linspace(0.1, acc, epochs), "train_loss": np.linspace(2, 0.5, epochs),
                            "test_loss": np.linspace(2.2, 0.6, epochs)})
    return SimpleNamespace(
        id=rid, final={"test_acc": acc, "test_loss": 0.5, "train_acc": acc, "train_loss": 0.4},
        config={"model": {"scheme": scheme, "scheme_kwargs": kw or {}, "n_heads": 4, "n_layers": 2},
                "task": {"task": task}, "train": {"seed": seed}},
        tables=lambda: list(saved), load_table=lambda n: saved[n], save_table=lambda n, df: saved.__setitem__(n, df),
        metrics=lambda: metrics)


@pytest.fixture(scope="module")
def runs():
    return [
        fake_run("a", "rope", "trigger-distance", 1),
        fake_run("b", "rope", "trigger-distance", 1, kw={"rope_heads": 2, "rope_layers": [1]},
                 deltas=[[0.0, 0.0, 0.0, 0.0], [0.0, 0.3, 0.0, 0.0]], acc=0.7),
        fake_run("c", "rope+sinusoidal", "trigger-distance", 1, deltas=[[0.01, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]]),
        fake_run("d", "mla", "trigger-distance", 1, deltas=[[0.03, 0.03, 0.02, 0.02], [0.0, 0.0, 0.0, 0.0]], acc=0.85),
        fake_run("e", "nope", "trigger-count", 1, deltas=[[0.0] * 4, [0.0] * 4], acc=0.7),
    ]


def test_partial_rope_table(runs):
    df = experiments.partial_rope(runs=runs).set_index("run_id")
    assert list(df.index) == ["a", "b"]
    assert df.loc["a", "variant"] == "full" and df.loc["a", "k"] == 4 and df.loc["a", "layer"] == -1
    assert df.loc["b", "variant"] == "partial" and df.loc["b", "k"] == 2 and df.loc["b", "layer"] == 1
    assert df.loc["a", "deepest_single_deposit_layer"] == 0 and df.loc["b", "deepest_single_deposit_layer"] == 1
    assert df.loc["b", "test_acc"] == 0.7
    assert len(FIGURES["partial_rope"](df.reset_index()).data) == 2


def test_rope_vs_sinusoidal_and_mla_tables(runs):
    rs = experiments.rope_vs_rope_sinusoidal(runs=runs)
    assert set(rs["run_id"]) == {"a", "c"} and len(rs) == 4  # partial run "b" excluded; 2 layers each
    c = rs[rs.run_id == "c"].set_index("layer")
    assert c.loc[0, "pattern"] == "none" and c.loc[1, "pattern"] == "single-head"
    assert len(FIGURES["rope_vs_rope_sinusoidal"](rs).data) == 2
    mrn = experiments.mla_rope_nope(runs=runs).set_index("run_id")
    assert set(mrn.index) == {"a", "d", "e"}
    assert mrn.loc["d", "n_single_deposits"] == 0 and mrn.loc["d", "n_average_deposits"] == 1
    assert mrn.loc["a", "paper_test_acc"] == pytest.approx(0.9264)
    assert mrn.loc["e", "deposit"] == "NoPE, Task 2: no deposit"
    assert len(FIGURES["mla_rope_nope"](mrn.reset_index()).data) == 2


def test_convergence_table(runs):
    df = experiments.convergence(runs=runs)
    assert len(df) == 5 * 3 * 2 * 2  # runs x epochs x split x metric
    a = df[(df.run_id == "a") & (df.split == "test") & (df.metric == "accuracy")]
    np.testing.assert_allclose(a["value"], np.linspace(0.1, 0.9, 3))
    fig = FIGURES["convergence"](df)
    assert len(fig.data) == 2 * 4 + 2 * 1  # Task 1: 4 labels (full and partial rope apart) x (train, test); Task 2: nope
    with pytest.raises(NotApplicable):
        experiments.convergence(runs=[])


def test_long_frame_is_the_concat_of_a_frame_per_block():
    """`experiments.long_frame` frames `convergence`'s blocks once: the same frame as a DataFrame a block,
    concatenated (scalars repeated, lists as rows, a column a block lacks NaN there, the order of first sight)."""
    blocks = [({"run_id": "a", "seed": 1, "epoch": [1, 2], "value": [0.5, 0.75], "tag": "x"}, 2),
              ({"run_id": "b", "seed": None, "epoch": [1], "value": [0.25], "chance": 0.1, "tag": None}, 1),
              ({"run_id": "c", "epoch": [1, 2, 3], "value": [0.0, 0.5, 1.0], "seed": 3, "tag": "y"}, 3)]
    framed = experiments.long_frame(blocks)
    pd.testing.assert_frame_equal(framed, pd.concat([pd.DataFrame(b) for b, _ in blocks], ignore_index=True))
    assert list(framed.columns) == ["run_id", "seed", "epoch", "value", "tag", "chance"]
    assert framed["chance"].isna().tolist() == [True, True, False, True, True, True]


def test_aggregated_ablation_feeds_deposit_and_figures():
    ts = [delta_table([[0.4 + s, 0.0, 0.01, 0.0]]) for s in (0.0, 0.02, -0.02)]
    agg = aggregate_seeds(ts)
    dep = deposit.compute(agg)
    assert dep["pattern"].iloc[0] == "single-head" and dep["gap_lo"].iloc[0] > 0
    assert len(FIGURES["ablation"](agg).data) == 1
