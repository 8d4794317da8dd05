"""Attribution patching (AtP): the gradient estimate equals real patching where the path to the logits is linear,
is the derivative of the patch elsewhere, and is checked against a run's patching table."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from workbench.analysis import ANALYSES, attribution, patching
from workbench.analysis.patching import SETS

from test_analysis import make_data
from test_causal import task_data, task_model


def linear_tail(arch: str):
    """A 2-layer model whose path from the last layer's head outputs to the logits is linear: no final LayerNorm,
    and the last block's MLP writes nothing (fc_out zero)."""
    model = task_model(arch=arch, final_ln="none")
    with torch.no_grad():
        model.blocks[-1].mlp.fc_out.weight.zero_()
        model.blocks[-1].mlp.fc_out.bias.zero_()
    return model


@pytest.mark.parametrize("arch", ["paper", "decoder"])
def test_atp_equals_patching_where_the_path_is_linear(arch):
    """Last layer's heads and stream, every position set: the estimate is the real patch, pair by pair; below it
    (a LayerNorm and an MLP on the way) the two differ."""
    model, d = linear_tail(arch), task_data()
    pairs = patching.pairs_for(d, 12, seed=3)
    est = attribution.per_pair(model, pairs, batch_size=5)
    real = patching.per_pair(model, pairs, "batched", batch_size=4)
    np.testing.assert_allclose(est["ld_clean"], real["ld_clean"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(est["ld_cf"], real["ld_cf"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(est["ld_patched"][-1], real["ld_patched"][-1], rtol=1e-4, atol=1e-4)
    assert np.abs(real["ld_patched"][-1] - real["ld_clean"]).max() > 1e-2  # the patch moves LD
    assert np.abs(est["ld_patched"][0] - real["ld_patched"][0]).max() > 1e-4  # first order only below


def patch_slope(model, pairs, name: str, head: int | None, s: int, t: float = 1e-4) -> np.ndarray:
    """d LD / d t of patching a fraction t of the counterfactual's activation at hook `name` (one head's slice, or
    all of it for None) at position set `s`, by central differences: what a first-order estimate must equal."""
    clean, cf = torch.as_tensor(pairs.clean_x), torch.as_tensor(pairs.cf_x)
    sets = patching.position_masks(torch.as_tensor(pairs.trigger_mask), clean).bool()
    _, cache = model.run_with_cache(cf)
    r = torch.arange(len(pairs))

    def ld_with(frac):
        def patch(a, hook):
            a = a.clone()
            sel = a[:, :, head] if head is not None else a
            src = cache[name][:, :, head] if head is not None else cache[name]
            sel[sets[s]] += frac * (src[sets[s]] - sel[sets[s]])
            return a
        with torch.no_grad():
            lg = model.run_with_hooks(clean, fwd_hooks=[(name, patch)])
        return (lg[r, pairs.cf_y] - lg[r, pairs.clean_y]).numpy()

    return (ld_with(t) - ld_with(-t)) / (2 * t)


def test_atp_is_the_derivative_of_the_patch():
    """For a site below a nonlinearity, patching a fraction t of the difference moves LD by t x the estimate as
    t -> 0 (central difference, float64): the gradient, the sign and the position sets are right."""
    model, d = task_model().double(), task_data()
    pairs = patching.pairs_for(d, 8, seed=1)
    est = attribution.per_pair(model, pairs, batch_size=8)
    for name, head, k in (("blocks.0.attn.hook_z", 2, 2), ("blocks.0.hook_resid_post", None, 4),
                          ("blocks.1.attn.hook_z", 1, 1)):
        layer = int(name.split(".")[1])
        for s in range(len(SETS)):
            np.testing.assert_allclose(est["ld_patched"][layer, s, k] - est["ld_clean"],
                                       patch_slope(model, pairs, name, head, s), rtol=1e-5, atol=1e-7)


def test_integrated_gradients_complete_the_path_and_stay_exact_where_linear():
    """With ig_steps, the gradient is averaged along the token embeddings' straight path from clean to
    counterfactual: the embedding's estimate then sums to the whole LD_cf - LD_clean (completeness, to the midpoint
    rule's 1/m^2 on a smooth model), where plain AtP's does not; on the linear tail the last layer keeps its exact estimate (its
    gradient is constant along the path), and 0 steps is plain AtP bit for bit."""
    model, d = task_model(activation="gelu").double(), task_data()  # smooth: no ReLU kink on the path
    pairs = patching.pairs_for(d, 10, seed=2)
    plain = attribution.per_pair(model, pairs, batch_size=5)
    ig16, ig = (attribution.per_pair(model, pairs, batch_size=5, ig_steps=s) for s in (16, 32))
    full = ig["ld_cf"] - ig["ld_clean"]
    err = lambda r: np.abs(r["embed_shift"] - full).max() / np.abs(full).max()  # noqa: E731
    assert err(ig) < 1e-3 and err(ig) < err(ig16) / 3 and err(plain) > 0.5  # the midpoint rule's 1/m^2
    assert attribution.completeness(ig) == pytest.approx(1.0, abs=2e-3)
    np.testing.assert_allclose(ig["ld_clean"], plain["ld_clean"])
    assert np.abs(ig["ld_patched"] - plain["ld_patched"]).max() > 1e-4
    again = attribution.per_pair(model, pairs, batch_size=5, ig_steps=0)
    assert all(np.array_equal(again[k], plain[k]) for k in plain)
    tail = linear_tail("paper")
    tail_pairs = patching.pairs_for(d, 8, seed=3)
    a, b = (attribution.per_pair(tail, tail_pairs, batch_size=4, ig_steps=s) for s in (0, 5))
    np.testing.assert_allclose(b["ld_patched"][-1], a["ld_patched"][-1], rtol=1e-4, atol=1e-5)
    df = attribution.compute(model, d, n_pairs=10, n_boot=20, ig_steps=3)
    assert (df["method"] == "atp_ig").all() and (df["ig_steps"] == 3).all() and df["completeness"].notna().all()
    from workbench.figures import FIGURES

    title = FIGURES["attribution"](df).layout.title.text
    assert "AtP-IG, 3 steps" in title and "completeness" in title
    with pytest.raises(ValueError, match="ig_steps"):
        attribution.path_points(-1)


def test_atp_known_answers_and_table():
    """A head whose W_O is zero has effect 0; the table has patching's rows and columns, marked `atp`."""
    model = task_model()
    with torch.no_grad():
        model.blocks[0].attn.W_O[1] = 0.0
    df = attribution.compute(model, task_data(), n_pairs=20, n_boot=50)
    ref = patching.compute(model, task_data(), n_pairs=20, n_boot=50)
    assert list(df.columns) == ["method"] + list(ref.columns) + ["ig_steps", "completeness", "grad_drop"]
    assert (df["method"] == "atp").all() and (df["ig_steps"] == 0).all()
    keys = ["site", "layer", "head", "positions"]
    assert (df[keys].values == ref[keys].values).all()
    dead = df[(df.site == "head") & (df.layer == 0) & (df["head"] == 1)]
    assert np.allclose(dead.effect, 0.0, atol=1e-6)
    np.testing.assert_allclose(df["ld_clean"], ref["ld_clean"], rtol=1e-6)  # the same pairs
    assert df["ci_lo"].notna().all() and (df["ci_lo"] <= df["effect"] + 1e-12).all()


def fake_run(model, data, tables=None):
    saved = dict(tables or {})
    return SimpleNamespace(id="r1", config={"model": {"scheme": "rope"}, "task": {"task": "trigger-distance"},
                                            "train": {"seed": 1}},
                           load_model=lambda device="cpu": model, load_dataset=lambda: data,
                           save_table=lambda name, df: saved.__setitem__(name, df), tables=lambda: list(saved),
                           load_table=lambda name: saved[name]), saved


def test_run_checks_against_the_runs_patching_table():
    model, d = linear_tail("decoder"), task_data()  # (the untrained paper-arch one: LD_cf = LD_clean on average)
    run, saved = fake_run(model, d)
    alone = attribution.run(run, n_pairs=16, n_boot=40)
    assert saved["attribution"] is alone and (alone["check"] == attribution.NO_PATCHING).all()
    assert alone["patching_effect"].isna().all() and alone["rank_corr"].isna().all()

    ANALYSES["patching"](run, n_pairs=16, n_boot=40)
    df = attribution.run(run, n_pairs=16, n_boot=40)
    assert (df["check"] == "").all() and (df["run_id"] == "r1").all()
    ref = saved["patching"]
    joined = df.merge(ref, on=["site", "layer", "head", "positions"], suffixes=("", "_ref"))
    np.testing.assert_array_equal(joined["patching_effect"], joined["effect_ref"])
    last = df[(df.layer == 1)]  # linear tail: the estimate is the patch, so it sits in patching's interval
    np.testing.assert_allclose(last["effect"], last["patching_effect"], rtol=1e-4, atol=1e-4)
    assert last["in_patching_ci"].eq(1.0).all()
    rho = df.groupby("positions")["rank_corr"].first()
    assert set(rho.index) == set(SETS) and ((rho >= -1) & (rho <= 1)).all()
    from scipy.stats import spearmanr

    for pos in SETS:  # Spearman over the heads of each position set, the estimate against patching
        heads = df[(df.site == "head") & (df.positions == pos)]
        assert rho[pos] == pytest.approx(spearmanr(heads["effect"], heads["patching_effect"]).statistic, abs=1e-9)

    other = attribution.run(run, n_pairs=16, n_boot=40, seed=7)  # other pairs than the patching table's
    assert (other["check"] == attribution.OTHER_PAIRS).all() and other["patching_effect"].isna().all()


def test_spearman_and_bad_input():
    a = np.array([1.0, 2.0, 3.0, np.nan, 5.0])
    assert attribution._spearman(a, a ** 3) == pytest.approx(1.0)
    assert attribution._spearman(a, -a) == pytest.approx(-1.0)
    assert np.isnan(attribution._spearman(a[:2], a[:2])) and np.isnan(attribution._spearman(a, np.ones(5)))
    from workbench.analysis import NotApplicable

    with pytest.raises(NotApplicable, match="trigger-distance"):
        attribution.compute(task_model(), make_data(10), n_pairs=4)
    with pytest.raises(ValueError, match="classes"):
        attribution.compute(task_model(n_classes=5), task_data(), n_pairs=4)


def test_figure_head_summary_and_card():
    """The figure: estimate vs patching when checked (3 traces), the stream's estimate when not (4); the head summary
    shows the estimate beside patching's effect, without a vote of its own."""
    from workbench.analysis import head_summary
    from workbench.figures import FIGURES

    model, d = linear_tail("decoder"), task_data()
    ref = patching.compute(model, d, n_pairs=16, n_boot=30)
    atp = attribution.compute(model, d, n_pairs=16, n_boot=30)
    checked, alone = attribution.check_against(atp, ref), attribution.check_against(atp, None)
    fig = FIGURES["attribution"](checked)
    assert len(fig.data) == 3 and fig.data[1].mode == "markers" and len(fig.data[1].x) == 2 * 4
    np.testing.assert_allclose(np.asarray(fig.data[1].x, float), checked.query("site == 'head' and positions == 'all'")
                               ["patching_effect"].to_numpy())
    assert "rank correlation" in fig.layout.title.text
    fig2 = FIGURES["attribution"](alone, positions="trigger")
    assert len(fig2.data) == 4 and attribution.NO_PATCHING in fig2.layout.title.text
    fig.to_json(), fig2.to_json()

    s = head_summary.compute({"patching": ref, "attribution": checked})
    heads = checked.query("site == 'head' and positions == 'all'").set_index(["layer", "head"])["effect"]
    np.testing.assert_allclose(s.set_index(["layer", "head"])["atp_effect"].loc[heads.index], heads)
    assert (s["n_methods"] == 1).all()  # patching votes; its estimate does not
    card = FIGURES["head_card"](s, layer=1, head=0)
    assert "AtP estimate of patching" in list(card.data[0].y)


def test_the_benchmarks_agreement_summary():
    """benchmarks/bench_attribution.py's summary per position set: top-k found, estimates inside, largest miss."""
    import importlib.util
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    sys.path.insert(0, str(bench))  # the script imports its neighbour `timing`
    try:
        spec = importlib.util.spec_from_file_location("bench_attribution", bench / "bench_attribution.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(bench))
    model, d = linear_tail("decoder"), task_data()
    ref = patching.compute(model, d, n_pairs=16, n_boot=30)
    checked = attribution.check_against(attribution.compute(model, d, n_pairs=16, n_boot=30), ref)
    rows = {r["positions"]: r for r in mod.agreement(checked, top=3)}
    assert set(rows) == set(SETS) and all(r["heads"] == 8 and r["k"] == 3 for r in rows.values())
    heads = checked[(checked.site == "head") & (checked.positions == "all")]
    assert rows["all"]["inside_ci"] == int(heads["in_patching_ci"].sum())
    assert rows["all"]["max_miss"] == pytest.approx((heads["effect"] - heads["patching_effect"]).abs().max())
    top = [set(heads.nlargest(3, col)[["layer", "head"]].itertuples(index=False))
           for col in ("effect", "patching_effect")]  # the 3 largest heads of the estimate and of patching
    assert rows["all"]["top_found"] == len(top[0] & top[1])
    assert rows["all"]["rank_corr"] == heads["rank_corr"].iloc[0]


@pytest.mark.parametrize("arch", ["paper", "decoder"])
def test_grad_drop_is_atp_on_the_last_layer_and_the_patch_with_layer_one_frozen_below(arch):
    """GradDrop (Kramár et al. 2024): a last-layer site's paths all avoid the layers below it, so its score is |AtP|
    (the L - 1 other drops leave it, its own cuts it off). In a 2-layer model with no final LayerNorm and MLPs that
    write nothing, a layer-0 head's path to the logits is linear once layer 1's outputs are held, so its score is
    the |effect| of its real patch with layer 1's attention and MLP outputs held at the clean run."""
    model, d = task_model(arch=arch, final_ln="none").double(), task_data()  # float64: exact to rounding
    with torch.no_grad():
        for block in model.blocks:
            block.mlp.fc_out.weight.zero_()
            block.mlp.fc_out.bias.zero_()
    df = attribution.compute(model, d, n_pairs=12, n_boot=0, seed=3, grad_drop=True)
    top = df[df["layer"] == 1]
    np.testing.assert_allclose(top["grad_drop"], top["effect"].abs(), rtol=1e-6, atol=1e-9)
    pairs = patching.pairs_for(d, 12, seed=3)
    clean, cf = torch.as_tensor(pairs.clean_x), torch.as_tensor(pairs.cf_x)
    r, y, y_cf = torch.arange(len(pairs)), torch.as_tensor(pairs.clean_y), torch.as_tensor(pairs.cf_y)
    with torch.no_grad():
        _, c = model.run_with_cache(clean)
        _, c_cf = model.run_with_cache(cf)
        ld = lambda lg: (lg[r, y_cf] - lg[r, y]).double()  # noqa: E731
        den = float((ld(model(cf)) - ld(model(clean))).mean())
        held = [(f"blocks.1.{n}", lambda t, hook, n=n: c[f"blocks.1.{n}"]) for n in ("hook_attn_out", "hook_mlp_out")]
        got = df[(df["site"] == "head") & (df["layer"] == 0) & (df["positions"] == "all")]["grad_drop"].to_numpy()
        for h in range(model.cfg.n_heads):
            def swap(z, hook, h=h):
                z = z.clone()
                z[:, :, h] = c_cf["blocks.0.attn.hook_z"][:, :, h]
                return z

            lg = model.run_with_hooks(clean, fwd_hooks=[("blocks.0.attn.hook_z", swap)] + held)
            want = abs(float((ld(lg) - ld(model(clean))).mean()) / den)
            assert got[h] == pytest.approx(want, rel=1e-4, abs=1e-7), h
    assert np.abs(got - df[(df["site"] == "head") & (df["layer"] == 0) & (df["positions"] == "all")
                           ]["effect"].abs().to_numpy()).max() > 1e-4  # below the last layer it is not |AtP|
    with pytest.raises(ValueError, match="choose one"):
        attribution.compute(model, d, n_pairs=4, grad_drop=True, ig_steps=2)
    with pytest.raises(ValueError, match="at least 2 layers"):
        attribution.compute(task_model(n_layers=1), d, n_pairs=4, grad_drop=True)
    assert attribution.compute(model, d, n_pairs=4, n_boot=0)["grad_drop"].isna().all()


def test_inside_is_the_closed_interval_to_rounding():
    """`inside`: 1 where the estimate lies in [lo, hi] (1e-5 either side for float32 rounding), 0 outside, NaN where
    the interval or the estimate is missing."""
    import pandas as pd

    from workbench.analysis.attribution import inside

    effect = pd.Series([0.5, 0.0, 1.0, 1.00001, 1.1, -0.2, 0.5, np.nan])
    lo = pd.Series([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, np.nan, 0.0])
    hi = pd.Series([1.0] * 8)
    np.testing.assert_array_equal(inside(effect, lo, hi).to_numpy(), [1, 1, 1, 1, 0, 0, np.nan, np.nan])
