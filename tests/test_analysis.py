"""Analyses against small hand-computable cases (tiny untrained models, synthetic data, no training)."""
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from scipy.linalg import toeplitz

from workbench.analysis import (ANALYSES, COMPUTE, NotApplicable, ablation, aggregate_seeds, angles, deposit,
                                deposit_sentence, distance_bias, extrapolation, hadamard_check, qk_means,
                                rope_expected_score, spectral)
from workbench.analysis.common import bootstrap_means, percentile_interval, rotary_planes, split_xy, tuples
from workbench.model import ModelConfig, PEClassifier, list_schemes

SCHEMES = list(list_schemes())


def make_model(scheme="rope", arch="paper", **kw):
    base = dict(vocab_size=24, n_classes=6, arch=arch, scheme=scheme, d_model=32, n_heads=4, d_ff=48, n_layers=2,
                max_len=16, dropout=0.0, seed=3)
    return PEClassifier(ModelConfig(**(base | kw))).eval()


def make_data(n=48, seq=16, seed=0, min_len=3, extrap=False):
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 24, (n, seq))
    for i in range(n):
        x[i, rng.integers(min_len, seq + 1):] = 0
    y = rng.integers(0, 6, n)
    data = SimpleNamespace(test_x=x, test_y=y, seq_len=seq, extrap={})
    if extrap:
        x2 = rng.integers(1, 24, (20, 2 * seq))
        data.extrap = {"len2x": (x2, rng.integers(0, 6, 20))}
    return data


# ---- head ablation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", SCHEMES)
def test_fast_ablation_equals_naive_loop_per_example(scheme):
    model = make_model(scheme)
    d = make_data(24)
    for mode in ("zero", "mean"):
        fast = ablation.per_example(model, d.test_x, d.test_y, mode=mode, method="fast", batch_size=5)
        naive = ablation.per_example(model, d.test_x, d.test_y, mode=mode, method="naive", trim=False)
        assert np.array_equal(fast["pred"], naive["pred"]), (scheme, mode)
        assert np.array_equal(fast["clean_pred"], naive["clean_pred"])
        np.testing.assert_allclose(fast["loss"], naive["loss"], rtol=1e-5, atol=1e-5)
        # and ablation really changes something (the test would be vacuous otherwise)
        assert np.abs(fast["loss"] - fast["clean_loss"][None, None]).max() > 1e-4


@pytest.mark.parametrize("scheme, arch", [("rope", "decoder"), ("alibi", "decoder"), ("nope", "decoder"),
                                          ("rope", "paper"), ("mla", "paper")])
def test_fast_ablation_equals_naive_loop_other_paths(scheme, arch):
    """The decoder (keys from the stream, no k/v sharing), and the paper arch without k/v sharing or trimming."""
    model = make_model(scheme, arch=arch, n_layers=3)
    d = make_data(20)
    naive = ablation.per_example(model, d.test_x, d.test_y, method="naive", trim=False)
    for kw in (dict(batch_size=3), dict(batch_size=7, share_kv=False, trim=False)):
        fast = ablation.per_example(model, d.test_x, d.test_y, method="fast", **kw)
        assert np.array_equal(fast["pred"], naive["pred"]), kw
        np.testing.assert_allclose(fast["loss"], naive["loss"], rtol=1e-5, atol=1e-5)


def test_ablation_agrees_with_transformer_lens_patching():
    from transformer_lens import ActivationCache, patching  # here: TransformerLens' package costs 2 CPU-s to import

    model = make_model("rope", n_layers=3)
    d = make_data(16)
    tokens, labels = torch.as_tensor(d.test_x), torch.as_tensor(d.test_y)
    _, cache = model.run_with_cache(tokens)
    zero = ActivationCache({k: torch.zeros_like(v) for k, v in cache.items()}, model)
    metrics = {"loss": lambda lg: F.cross_entropy(lg, labels, reduction="none"),
               "correct": lambda lg: (lg.argmax(-1) == labels).float()}
    res = patching.get_act_patch_attn_head_out_all_pos(model, tokens, zero, metrics, reduce="none")
    ours = ablation.per_example(model, d.test_x, d.test_y, method="fast", batch_size=4)
    torch.testing.assert_close(res["loss"].values, torch.as_tensor(ours["loss"]), rtol=1e-5, atol=1e-5)
    assert np.array_equal(res["correct"].values.numpy().astype(bool), ours["correct"])
    table = ablation.compute(model, d, n_boot=50)
    acc = table[table.metric == "accuracy"].sort_values(["layer", "head"])
    expect = ours["clean_correct"].mean() - res["correct"].values.mean(-1).numpy().ravel()
    np.testing.assert_allclose(acc["delta"].to_numpy(), expect, atol=1e-12)


def test_head_with_zero_W_O_has_zero_delta():
    model = make_model("rope")
    with torch.no_grad():
        model.blocks[1].attn.W_O[2] = 0
    table = ablation.compute(model, make_data(40), n_boot=100)
    row = table[(table.layer == 1) & (table["head"] == 2)]
    assert (row["delta"] == 0).all() and (row["ci_lo"] == 0).all() and (row["ci_hi"] == 0).all()
    others = table[~((table.layer == 1) & (table["head"] == 2)) & (table.metric == "loss")]
    assert (others["delta"].abs() > 1e-6).all()  # every other head does change the loss
    # mean-ablation of a zero-W_O head is also a no-op
    mean_t = ablation.compute(model, make_data(40), mode="mean", n_boot=20)
    assert (mean_t[(mean_t.layer == 1) & (mean_t["head"] == 2)]["delta"] == 0).all()
    assert set(mean_t["mode"]) == {"mean"}


def test_ablation_table_schema_and_signs():
    table = ablation.compute(make_model("alibi"), make_data(30), n_boot=100)
    assert len(table) == 2 * 4 * 2
    loss = table[table.metric == "loss"]
    np.testing.assert_allclose(loss["delta"], loss["clean"] - loss["ablated"])
    np.testing.assert_allclose(loss["importance"], -loss["delta"])
    assert ((table["ci_lo"] <= table["delta"] + 1e-12) & (table["delta"] <= table["ci_hi"] + 1e-12)).all()
    for (l, m), sub in table.groupby(["layer", "metric"]):
        imp = np.sort(sub["importance"].to_numpy())[::-1]
        assert sub["layer_gap"].iloc[0] == pytest.approx(imp[0] - imp[1])


def test_bootstrap_interval_contains_estimate_and_shrinks_with_n():
    rng = np.random.default_rng(1)
    widths = []
    for n in (50, 500, 5000):
        v = rng.binomial(1, 0.3, n).astype(float)
        reps = bootstrap_means(v, 500, seed=0)[:, 0]
        lo, hi = percentile_interval(reps)
        assert lo <= v.mean() <= hi
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]
    assert widths[2] == pytest.approx(2 * 1.96 * math.sqrt(0.3 * 0.7 / 5000), rel=0.2)
    # seeded: the same seed gives the same interval
    v = rng.normal(size=100)
    assert np.array_equal(bootstrap_means(v, 50, 7), bootstrap_means(v, 50, 7))


def test_aggregate_over_seeds():
    base = ablation.compute(make_model("rope"), make_data(30), n_boot=50)
    tables = []
    for shift in (0.0, 0.1, 0.2):
        t = base.copy()
        t["delta"] = t["delta"] + shift
        t["importance"] = np.where(t.metric == "accuracy", t["delta"], -t["delta"])
        tables.append(t)
    agg = aggregate_seeds(tables)
    merged = agg.merge(base, on=["layer", "head", "metric", "mode"], suffixes=("", "_b"))
    np.testing.assert_allclose(merged["delta"], merged["delta_b"] + 0.1)
    half = 4.302652729911275 * 0.1 / math.sqrt(3)  # t_{0.975, 2} * sd / sqrt(n)
    np.testing.assert_allclose(merged["ci_hi"] - merged["delta"], half, rtol=1e-6)
    assert (agg["n_seeds"] == 3).all() and (agg["interval"] == "t over seeds").all()
    one = aggregate_seeds([base]).merge(base, on=["layer", "head", "metric", "mode"], suffixes=("", "_b"))
    np.testing.assert_allclose(one["ci_lo"], one["ci_lo_b"])
    deposit.compute(agg)  # the aggregate is a valid input of the deposit statistics


# ---- deposit -----------------------------------------------------------------------------------------
def delta_table(deltas, gap_lo=None):
    """A hand-made ablation table: deltas [layer][head] of accuracy, intervals +-0.01."""
    rows = []
    for l, ds in enumerate(deltas):
        ds = np.asarray(ds, float)
        srt = np.sort(ds)[::-1]
        glo = (srt[0] - srt[1] - 0.02) if gap_lo is None else gap_lo
        for h, v in enumerate(ds):
            rows.append(dict(layer=l, head=h, metric="accuracy", mode="zero", delta=v, ci_lo=v - 0.01, ci_hi=v + 0.01,
                             importance=v, layer_gap=srt[0] - srt[1], layer_gap_lo=glo, layer_gap_hi=srt[0] - srt[1] + 0.02))
    return pd.DataFrame(rows)


def test_deposit_single_average_none():
    t = delta_table([[0.41, 0.02, 0.0, -0.01], [0.03, 0.03, 0.02, 0.02], [0, 0, 0, 0], [0.2, 0.1, 0.0, 0.0]])
    dep = deposit.compute(t).set_index("layer")
    assert dep.loc[0, "pattern"] == "single-head" and dep.loc[0, "top_head"] == 0
    assert dep.loc[0, "concentration"] == pytest.approx(0.41 / 0.43)
    assert dep.loc[1, "pattern"] == "average" and dep.loc[1, "concentration"] == pytest.approx(0.3)
    assert dep.loc[2, "pattern"] == "none" and np.isnan(dep.loc[2, "concentration"])
    assert dep.loc[3, "pattern"] == "average"  # 0.2 is only 2x the second head: no single-head deposit
    s = deposit_sentence(dep.reset_index(), scheme="rope", task="trigger-distance")
    assert s == ("RoPE, Task 1: single-head deposit at layer 0, head 0, delta 0.41 [0.40, 0.42]; "
                 "average deposit at layers 1, 3 (summed delta 0.10, 0.30)")
    assert deposit_sentence(deposit.compute(delta_table([[0, 0, 0]])), "nope", "trigger-count") == "NoPE, Task 2: no deposit"


def test_deposit_thresholds_and_interval_are_respected():
    t = delta_table([[0.41, 0.02, 0.0]], gap_lo=-0.01)  # interval of top - second crosses 0
    assert deposit.compute(t)["pattern"].iloc[0] == "average"
    t = delta_table([[0.04, 0.0, 0.0]])
    assert deposit.compute(t)["pattern"].iloc[0] == "none"
    assert deposit.compute(t, min_delta=0.03, min_sum=0.03)["pattern"].iloc[0] == "single-head"
    assert deposit.compute(delta_table([[0.3, 0.12]]), ratio=2.0)["pattern"].iloc[0] == "single-head"
    with pytest.raises(NotApplicable, match="ablation"):
        deposit.compute(pd.DataFrame())


def test_deposit_reads_a_table_stored_at_float32_as_it_was_made():
    """A shipped ablation table is float32 (`store.bundle`): its stored gap and the gap of its stored deltas differ
    by rounding (7.5e-9 on t1-rope-repro-s43-550c5e, layer 3), and the single-head deposit must survive it; a
    stored gap of another top/second pair still voids the interval."""
    t = delta_table([[0.299, 0.076, 0.0, 0.0]])
    made = deposit.compute(t)
    shipped = t.astype({c: "float32" for c in t.columns if t[c].dtype.kind == "f"})
    stored = float(shipped["layer_gap"].iloc[0])
    assert stored != float(shipped["delta"].iloc[0]) - float(shipped["delta"].iloc[1])  # rounding shows
    again = deposit.compute(shipped)
    assert made["pattern"].iloc[0] == again["pattern"].iloc[0] == "single-head"
    assert again["gap_lo"].iloc[0] == pytest.approx(made["gap_lo"].iloc[0], abs=1e-7)
    other = t.assign(layer_gap=0.2)  # the gap of another pair: its interval is not this pair's
    assert np.isnan(deposit.compute(other)["gap_lo"].iloc[0]) and deposit.compute(other)["pattern"].iloc[0] != \
        "single-head"


def test_deposit_on_real_ablation_finds_planted_head():
    """A model whose only useful head is planted: zero every W_O except one head -> that head is the deposit."""
    model = make_model("rope")
    d = make_data(200, seed=4)
    with torch.no_grad():
        for l in range(2):
            for h in range(4):
                if (l, h) != (0, 1):
                    model.blocks[l].attn.W_O[h] = 0
        model.blocks[0].attn.W_O[1] *= 50
    d.test_y = model(torch.as_tensor(d.test_x)).argmax(-1).numpy()  # labels = the model's own predictions
    dep = deposit.compute(ablation.compute(model, d, n_boot=200))
    row = dep[dep.layer == 0].iloc[0]
    assert row["pattern"] == "single-head" and row["top_head"] == 1 and row["concentration"] == 1.0
    assert dep[dep.layer == 1]["pattern"].iloc[0] == "none"


# ---- q/k means ---------------------------------------------------------------------------------
def test_qk_means_equal_known_biases_when_weights_are_zero():
    model = make_model("rope")
    bq = torch.arange(4 * 8, dtype=torch.float32).reshape(4, 8) / 10
    bk = -torch.arange(4 * 8, dtype=torch.float32).reshape(4, 8) / 7
    with torch.no_grad():
        for b in model.blocks:
            b.attn.W_Q.zero_(), b.attn.W_K.zero_()
            b.attn.b_Q.copy_(bq), b.attn.b_K.copy_(bk)
    df = qk_means.compute(model, make_data(20))
    q = df[(df.tensor == "q") & (df.layer == 1)].sort_values("dim")
    k = df[(df.tensor == "k") & (df.layer == 0)].sort_values("dim")
    np.testing.assert_allclose(q["mean"], bq.mean(0).numpy(), rtol=1e-5)
    np.testing.assert_allclose(k["mean"], bk.mean(0).numpy(), rtol=1e-5)
    np.testing.assert_allclose(q["abs_mean"], bq.abs().mean(0).numpy(), rtol=1e-5)
    assert np.allclose(q["std"], 0, atol=1e-5)
    # d_head 8: theta = 1, 0.1, 0.01, 0.001; L = 16 -> cycles 2.55, 0.25, ... -> planes 1..3 under-trained
    marks = q.groupby("plane")["undertrained"].first().tolist()
    assert marks == [False, True, True, True]
    assert q["cycles"].iloc[0] == pytest.approx(16 / (2 * math.pi))
    nope = qk_means.compute(make_model("nope"), make_data(10))
    assert not nope["undertrained"].any() and not nope["marks_apply"].any() and nope["mean"].abs().sum() > 0


def test_qk_means_partial_rope_and_mla_planes():
    df = qk_means.compute(make_model("rope", scheme_kwargs={"rope_layers": [1]}), make_data(10))
    assert not df[df.layer == 0]["undertrained"].any() and df[df.layer == 1]["undertrained"].any()
    mla = make_model("mla")
    theta = rotary_planes(mla.blocks[0].attn, 4, 8 + mla.blocks[0].attn.d_rope).theta
    assert np.isnan(theta[:, :4]).all() and not np.isnan(theta[:, 4:]).any()  # only the trailing rotary dims
    odd = make_model("mla", d_model=30, n_heads=2)  # d_head 15: the rotary dims start at dim 15, in no plane
    for analysis, kw in ((qk_means.compute, {}), (angles.compute, {"n_pairs": 50})):
        with pytest.raises(NotApplicable, match="odd d_head.*use an even d_head"):
            analysis(odd, make_data(10), **kw)


# ---- initial angles ----------------------------------------------------------------------------
def test_coca_initial_angles_are_zero():
    model = make_model("coca")
    df = angles.compute(model, make_data(30), n_pairs=600)
    assert len(df) == 2 * 4 * 4
    assert (df["angle_abs_max"] < 1e-6).all()
    assert (df["share_anomalous"] == 0).all() and np.allclose(df["mean_cos"], 1.0)
    assert (df["n_pairs"] + df["n_zero"] == 600).all()


def test_rope_initial_angles_match_direct_computation():
    model = make_model("rope")
    d = make_data(30)
    df = angles.compute(model, d, n_pairs=800, seed=5).set_index(["layer", "head", "plane"])
    ex, m, n = angles.sample_pairs(d.test_x, 800, "paper", 5)
    _, cache = model.run_with_cache(torch.as_tensor(d.test_x))
    theta = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    for l in range(2):
        q = cache[f"blocks.{l}.attn.hook_q"][ex, m].double().numpy()  # [P, H, 8]
        k = cache[f"blocks.{l}.attn.hook_k"][ex, n].double().numpy()
        qc, kc = q[..., 0::2] + 1j * q[..., 1::2], k[..., 0::2] + 1j * k[..., 1::2]
        Theta = np.mod(np.angle(qc * np.conj(kc)), 2 * np.pi)  # counter-clockwise from k to q
        # the definition reproduces RoPE's score: sum_j |q_j||k_j| cos(Theta_j + (m - n) theta_j) = rq_m . rk_n
        rq = cache[f"blocks.{l}.attn.hook_rot_q"][ex, m].double().numpy()
        rk = cache[f"blocks.{l}.attn.hook_rot_k"][ex, n].double().numpy()
        recon = (np.abs(qc) * np.abs(kc) * np.cos(Theta + (m - n)[:, None, None] * theta)).sum(-1)
        np.testing.assert_allclose(recon, (rq * rk).sum(-1), rtol=1e-6, atol=1e-6)
        dlt = (m - n)[:, None, None]
        anom = ((dlt < 0) & (Theta > 0) & (Theta < np.pi)) | ((dlt > 0) & (Theta > np.pi))
        for h in range(4):
            for j in range(4):
                r = df.loc[(l, h, j)]
                assert r["share_anomalous"] == pytest.approx(anom[:, h, j].mean())
                tau = np.where(dlt[:, 0, 0] < 0, Theta[:, h, j], 2 * np.pi - Theta[:, h, j]) / theta[j]
                assert r["tau_mean"] == pytest.approx(tau[anom[:, h, j]].mean())
    # random q and k: about half the pairs sit in an anomalous scenario
    assert 0.35 < df["share_anomalous"].mean() < 0.65


def test_plane_angles_hand_cases():
    q = np.array([[0.0, 1.0, 1.0, 0.0]])  # plane 0 at 90 deg, plane 1 at 0 deg
    k = np.array([[1.0, 0.0, 0.0, 2.0]])  # plane 0 at 0 deg, plane 1 at 90 deg
    ang, mag = angles.plane_angles(q, k)
    np.testing.assert_allclose(ang[0], [np.pi / 2, 3 * np.pi / 2])
    np.testing.assert_allclose(mag[0], [1.0, 2.0])


@pytest.mark.parametrize("scheme", ["nope", "alibi", "tapa", "sinusoidal"])
def test_non_rotary_angles_not_applicable(scheme):
    with pytest.raises(NotApplicable) as err:
        angles.compute(make_model(scheme), make_data(5))
    for name in ("rope", "coca", "fope", "mla"):
        assert name in str(err.value)


def test_partial_rope_without_rotating_heads_is_not_applicable():
    with pytest.raises(NotApplicable, match="rotat"):
        angles.compute(make_model("rope", scheme_kwargs={"rope_heads": 0}), make_data(5))


# ---- spectral ----------------------------------------------------------------------------------
def explained_variance(S: np.ndarray, valid: np.ndarray | None = None) -> float:
    """Reference: share of the variance of one matrix S (over `valid` entries) its diagonal means explain, by
    a plain loop over the diagonals (spectral.compute accumulates the same sums with index_add over batches)."""
    S = np.asarray(S, dtype=np.float64)
    valid = np.ones_like(S, bool) if valid is None else valid
    off = np.arange(S.shape[1])[None, :] - np.arange(S.shape[0])[:, None]
    vals, offs = S[valid], off[valid]
    fitted = np.empty_like(vals)
    for d in np.unique(offs):
        fitted[offs == d] = vals[offs == d].mean()
    ss_tot = ((vals - vals.mean()) ** 2).sum()
    return float(1 - ((vals - fitted) ** 2).sum() / ss_tot) if ss_tot > 0 else float("nan")


def test_explained_variance_of_hand_built_matrices():
    T = toeplitz([3.0, 1.0, -2.0, 0.5, 0.0], [3.0, 4.0, 2.0, -1.0, 7.0])
    assert explained_variance(T) == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    assert explained_variance(rng.normal(size=(40, 40))) < 0.2
    spec = spectral.toeplitz_spectrum(np.eye(5) * 2)
    assert spec["eig_min"] == spec["eig_max"] == 2 and spec["cond"] == pytest.approx(1.0)
    t = np.array([0.5, 1.0, 2.0, 1.0, 0.5])  # offsets -2..2, symmetric
    np.testing.assert_allclose(spectral.toeplitz_from_profile(t, 3), toeplitz([2, 1, 0.5]))


def test_spectral_explained_variance_matches_the_reference_per_head():
    """On one example the pooled and the per-example R^2 of spectral.compute are the reference's on that
    example's non-pad score matrix; on two, the per-example one is the mean of the two references."""
    from workbench.analysis.common import cache_hooks, valid_pairs
    model, data = make_model("rope"), make_data(2, seed=5)
    data.test_x[0, 9:] = 0
    ref = np.zeros((2, 2, 4))
    for i in range(2):
        tok = torch.as_tensor(data.test_x[i:i + 1])
        ok = valid_pairs(tok, "paper")[0].numpy()
        for l in range(2):
            S = cache_hooks(model, tok, [f"blocks.{l}.attn.hook_attn_scores"])[f"blocks.{l}.attn.hook_attn_scores"]
            ref[i, l] = [explained_variance(S[0, h].double().numpy(), ok) for h in range(4)]
    one = spectral.compute(model, SimpleNamespace(test_x=data.test_x[:1], test_y=data.test_y[:1])
                           ).drop_duplicates(["layer", "head"]).set_index(["layer", "head"])
    two = spectral.compute(model, data).drop_duplicates(["layer", "head"]).set_index(["layer", "head"])
    for l in range(2):
        for h in range(4):
            assert one.loc[(l, h), "explained_var"] == pytest.approx(ref[0, l, h], abs=1e-9)
            assert one.loc[(l, h), "explained_var_per_example"] == pytest.approx(ref[0, l, h], abs=1e-9)
            assert two.loc[(l, h), "explained_var_per_example"] == pytest.approx(ref[:, l, h].mean(), abs=1e-9)
    assert not np.allclose(ref[0], 1.0)  # RoPE's scores depend on content too: the check is not vacuous


def test_spectral_on_pure_alibi_logits_is_exactly_toeplitz():
    model = make_model("alibi")
    with torch.no_grad():
        for b in model.blocks:
            for p in (b.attn.W_Q, b.attn.W_K, b.attn.b_Q, b.attn.b_K):
                p.zero_()
    df = spectral.compute(model, make_data(20))
    per_head = df.drop_duplicates(["layer", "head"])
    assert np.allclose(per_head["explained_var"], 1.0) and np.allclose(per_head["explained_var_per_example"], 1.0)
    slopes = 2.0 ** (-8 * np.arange(1, 5) / 4)
    for h in range(4):
        sub = df[(df.layer == 0) & (df["head"] == h)]
        np.testing.assert_allclose(sub["mean_logit"], -slopes[h] * sub["offset"].abs(), rtol=1e-5, atol=1e-6)
        T = toeplitz(-slopes[h] * np.arange(16))
        assert sub["eig_min"].iloc[0] == pytest.approx(np.linalg.eigvalsh(T)[0], rel=1e-4)
    # an untrained content-only model is far from Toeplitz
    nope = spectral.compute(make_model("nope"), make_data(20)).drop_duplicates(["layer", "head"])
    assert (nope["explained_var"] < 0.5).all()


def test_hadamard_check_confirms_lemma_b1():
    df = hadamard_check(sizes=(8, 24), n_trials=6)
    assert df["lemma_holds"].all()  # max|f| <= sum of weights, always
    assert df["radius_contracted"].all()  # T is entrywise non-negative: |x*(T o E)x| <= |x|^T T |x|
    lin = df[df.kind == "linear"]  # phases k*theta: a unitary similarity, the lemma's equality case
    np.testing.assert_allclose(lin["range_H"], lin["range_T"], rtol=1e-8)
    assert lin["lemma_equality"].all()
    assert df[df.kind == "rope"]["range_contracted"].all()  # RoPE's plane mixture is PSD with unit diagonal
    assert not df[df.kind == "random"]["lemma_equality"].any()


# ---- distance bias ---------------------------------------------------------------------------------
def test_distance_bias_of_pure_alibi_is_its_slope_times_distance_gap():
    model = make_model("alibi")
    with torch.no_grad():
        for b in model.blocks:
            for p in (b.attn.W_Q, b.attn.W_K, b.attn.b_Q, b.attn.b_K):
                p.zero_()
    df = distance_bias.compute(model, make_data(40, min_len=12), n_pairs=500, short=(0, 2), long=(8, 11))
    per = df.drop_duplicates(["layer", "head"])
    assert (per["share_positive"] == 1).all() and (per["n_pairs"] == 500).all()
    slopes = 2.0 ** (-8 * np.arange(1, 5) / 4)
    x, _ = split_xy(make_data(40, min_len=12), "test")  # the same triples as compute draws (all examples, seed 0)
    _, m, ns, nl = distance_bias.sample_triples(x, 500, (0, 2), (8, 11), "paper", 0)
    gap = np.mean(np.abs(m - nl) - np.abs(m - ns))  # the mean distance gap, long minus short
    assert 6 <= gap <= 11
    for l in range(model.cfg.n_layers):
        for h in range(4):  # score(short) - score(long) = slope (|m - n_long| - |m - n_short|), every layer
            r = per[(per.layer == l) & (per["head"] == h)].iloc[0]
            assert r["mean_diff"] == pytest.approx(slopes[h] * gap, rel=1e-5, abs=1e-6), (l, h)
    assert (df.groupby(["layer", "head"])["count"].sum() == 500).all()
    nope = make_model("nope")
    with torch.no_grad():
        for b in nope.blocks:
            b.attn.W_Q.zero_(), b.attn.b_Q.zero_()
    flat = distance_bias.compute(nope, make_data(40, min_len=12), n_pairs=300, short=(0, 2), long=(8, 11))
    assert np.allclose(flat["mean_diff"], 0) and np.allclose(flat["std_diff"], 0)


def test_distance_bias_bins_are_not_set_by_one_extreme_head():
    """A shipped RoPE run had one head with logit differences of +-7,000 among heads within +-1: pooled quantiles
    made bins 361 wide and put every other head in one bin. `shared_edges` leaves such a head out of the edges (its
    pairs count in the end bins); without one, the edges are the pooled 0.1-99.9 % quantiles, as before."""
    rng = np.random.default_rng(0)
    typical = {l: rng.normal(0, 1, (2000, 4)) for l in range(3)}
    edges = distance_bias.shared_edges(typical, 40)
    pooled = np.concatenate([d.ravel() for d in typical.values()])
    np.testing.assert_allclose(edges, np.linspace(*np.quantile(pooled, [0.001, 0.999]), 41))
    wild = {l: d.copy() for l, d in typical.items()}
    wild[2][:, 1] = rng.uniform(-7000, 7000, 2000)
    edges = distance_bias.shared_edges(wild, 40)
    assert np.allclose(edges, distance_bias.shared_edges(typical | {2: np.delete(wild[2], 1, 1)}, 40))
    assert edges[-1] - edges[0] < 10, "the typical heads' range, not the extreme head's"
    counts, _ = np.histogram(np.clip(typical[0][:, 0], edges[0], edges[-1]), bins=edges)
    assert counts.max() < 0.2 * counts.sum(), "a typical head spreads over the bins"


def test_rope_expected_score_analytic_and_monte_carlo():
    df = rope_expected_score(d_head=16, max_distance=64, n_samples=4000)
    zero = df[df.q_mean == 0]
    assert np.allclose(zero["expected_score"], 0)
    one = df[df.q_mean == 1.0]
    assert one[one.distance == 0]["expected_score"].iloc[0] == pytest.approx(16.0)  # 2 * sum_j cos(0) = d
    z = (df["mc_mean"] - df["expected_score"]) / df["mc_se"]
    assert (z.abs() < 5).all()
    ideal = rope_expected_score(means=(1.0,), std=0.0, d_head=16, max_distance=64)
    np.testing.assert_allclose(ideal["mc_mean"], ideal["expected_score"], atol=1e-9)
    assert one["expected_score"].iloc[0] > one["expected_score"].iloc[40]  # long-term decay with a non-zero mean


# ---- extrapolation -------------------------------------------------------------------------------
def test_extrapolation_learned_is_not_applicable():
    with pytest.raises(NotApplicable, match="learned.*rope"):
        extrapolation.compute(make_model("learned"), make_data(10, extrap=True))


def test_extrapolation_rows_match_direct_evaluation():
    model = make_model("rope")
    d = make_data(30, extrap=True)
    df = extrapolation.compute(model, d, n_boot=100).set_index("split")
    assert list(df.index) == ["test", "len2x"]
    for split, (x, y) in (("test", (d.test_x, d.test_y)), ("len2x", d.extrap["len2x"])):
        logits = model(torch.as_tensor(x))
        assert df.loc[split, "accuracy"] == pytest.approx((logits.argmax(-1).numpy() == y).mean())
        assert df.loc[split, "loss"] == pytest.approx(F.cross_entropy(logits, torch.as_tensor(y)).item(), rel=1e-5)
        assert df.loc[split, "acc_lo"] <= df.loc[split, "accuracy"] <= df.loc[split, "acc_hi"]
    assert df.loc["len2x", "max_len"] == 32 and not df.loc["len2x", "in_training_range"]
    assert df.loc["test", "in_training_range"]
    with pytest.raises(NotApplicable, match="extrapolation splits"):
        extrapolation.compute(model, make_data(10))


# ---- registry ----------------------------------------------------------------------------------
def test_registry_is_complete():
    assert set(ANALYSES) == {"ablation", "deposit", "qk_means", "angles", "spectral", "distance_bias", "extrapolation",
                             "ablation_resample", "patching", "attribution", "edges", "qkv", "probes",
                             "trigger_attention", "dla", "self_repair", "head_summary"}
    assert set(COMPUTE) == set(ANALYSES)


def test_run_wrapper_saves_tagged_table():
    saved = {}
    model = make_model("rope")
    run = SimpleNamespace(id="r1", config={"model": {"scheme": "rope"}, "task": {"task": "trigger-distance"},
                                           "train": {"seed": 1}},
                          load_model=lambda device="cpu": model, load_dataset=lambda: make_data(12),
                          save_table=lambda name, df: saved.__setitem__(name, df), tables=lambda: list(saved),
                          load_table=lambda name: saved[name])
    df = ANALYSES["ablation"](run, n_boot=20)
    assert saved["ablation"] is df and (df["run_id"] == "r1").all() and (df["task"] == "trigger-distance").all()
    assert (df["analysed_on"] == "cpu").all()
    dep = ANALYSES["deposit"](run)
    assert "deposit" in saved and deposit_sentence(dep).startswith("RoPE, Task 1: ")
    mean = ANALYSES["deposit"](run, table="ablation_mean")  # its ablation table missing: computed in its own mode
    assert set(saved["ablation_mean"]["mode"]) == set(mean["mode"]) == {"mean"}
    with pytest.raises(ValueError, match="'probes' is not an ablation table"):
        ANALYSES["deposit"](run, table="probes")


def test_analyses_count_what_training_counted_with_ignore_label(tmp_path):
    """The authors' script drops count-0 examples from loss and accuracy (train.ignore_label = 0): the analyses
    see the same examples, so the ablation's clean accuracy is the run's own final test accuracy."""
    from workbench.analysis.common import run_data
    from workbench.store import RunStore
    from workbench.train import resolve_config, train

    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", "nope", "trigger-count", fidelity="authors", store=store,
                         sets=["model.d_model=16", "model.n_heads=2", "model.d_ff=32", "model.n_layers=1",
                               "train.epochs=1", "task.count_min=0", "task.count_max=3"])
    run = train(cfg, store, progress=False, threads=1)
    full, seen = run.load_dataset(), run_data(run)
    assert (full.test_y == 0).any(), "the test set should hold count-0 examples for this check"
    assert not (seen.test_y == 0).any() and len(seen.test_y) == int((full.test_y != 0).sum())
    assert not (seen.train_y == 0).any() and all(not (y == 0).any() for _, y in seen.extrap.values())
    table = ANALYSES["ablation"](run, n_boot=10)
    clean = float(table[table.metric == "accuracy"]["clean"].iloc[0])
    assert clean == pytest.approx(run.final["test_acc"], abs=1e-6)


def test_tuples_reads_the_rows_itertuples_gives():
    """`tuples(df)` (the claims' fast row read) yields what `df.itertuples()` does: the index first, every column
    (strings, NaN, ints, bools, lists; names that are not identifiers renamed alike), as the same Python types."""
    df = pd.DataFrame({"run_id": ["a", "b", None], "test_acc": [0.5, float("nan"), 1.0], "seed": [42, 43, 44],
                       "learned": [True, False, True], "runs": [["x"], [], ["y", "z"]], "2 words": [1.5, 2.5, 3.5],
                       "class": ["p", "q", "r"]}, index=[7, 3, 5])
    for frame in (df, df[df.seed > 42], df.iloc[:0], df[["seed"]]):
        want, got = list(frame.itertuples()), list(tuples(frame))
        assert len(got) == len(want) and all(g._fields == w._fields for g, w in zip(got, want))
        for g, w in zip(got, want):
            assert [type(v) for v in g] == [type(v) for v in w]
            assert all(a == b or (a != a and b != b) for a, b in zip(g, w)), (g, w)


# ---- the bootstrap and the deposit rule at their boundaries (intervals and thresholds read as registered) ---------
def test_the_percentile_interval_is_the_central_level():
    """95 % leaves 2.5 % on each side: 0..1000 gives exactly (25, 975); a one-sided 5 % would give (50, 950)."""
    lo, hi = percentile_interval(np.arange(1001.0)[:, None], 0.95)
    assert (float(lo[0]), float(hi[0])) == (pytest.approx(25.0), pytest.approx(975.0))
    lo, hi = percentile_interval(np.arange(1001.0)[:, None], 0.5)
    assert (float(lo[0]), float(hi[0])) == (pytest.approx(250.0), pytest.approx(750.0))


def test_bootstrap_means_resample_every_column_alike():
    """The same resamples for every column: a column shifted by 1 stays exactly 1 apart in every replicate (the
    paired gap interval of the deposit rule depends on it)."""
    v = np.random.default_rng(0).random(50)
    reps = bootstrap_means(np.c_[v, v + 1], 200, 0)
    np.testing.assert_allclose(reps[:, 1] - reps[:, 0], 1.0, atol=1e-12)


def _one_layer(wrong: dict[int, range], n: int = 100, heads: int = 3) -> dict[str, np.ndarray]:
    """Per-example outcomes of one layer: the clean model right everywhere, head h wrong on `wrong[h]`."""
    correct = np.ones((1, heads, n), dtype=bool)
    for h, idx in wrong.items():
        correct[0, h, list(idx)] = False
    return {"correct": correct, "clean_correct": np.ones(n, dtype=bool),
            "loss": np.where(correct, 0.1, 2.0), "clean_loss": np.full(n, 0.1)}


def test_the_layer_gap_interval_is_paired_between_the_top_and_the_second_head():
    """Hand-computed: top head wrong on 30 of 100, second on 10, third never. Nested (second's 10 inside top's 30):
    the per-example gap is 1 on 20 examples, mean 0.2, sd 0.4, se 0.04: about [0.12, 0.28]. Disjoint: +1 on 30,
    -1 on 10, sd 0.6, se 0.06: about [0.08, 0.32]. An unpaired bootstrap gives the same width to both, a gap to
    the last head (the third) a gap of 0.3."""
    from workbench.analysis.ablation import table_from_examples

    for second, (want_lo, want_hi) in ((range(0, 10), (0.12, 0.28)), (range(30, 40), (0.08, 0.32))):
        t = table_from_examples(_one_layer({0: range(0, 30), 1: second}), n_boot=4000, seed=1)
        row = t[(t.metric == "accuracy") & (t["head"] == 0)].iloc[0]
        assert row.layer_gap == pytest.approx(0.2, abs=1e-12)
        assert row.layer_gap_lo == pytest.approx(want_lo, abs=0.02)
        assert row.layer_gap_hi == pytest.approx(want_hi, abs=0.02)


def _deposit_of(drops, dtype=np.float64) -> str:
    from workbench.analysis import deposit

    d = np.asarray(drops, dtype=dtype)
    gap = d[0] - d[1]
    abl = pd.DataFrame({"layer": 0, "head": range(len(d)), "metric": "accuracy", "mode": "zero", "delta": d,
                        "layer_gap": gap, "layer_gap_lo": gap / 2, "layer_gap_hi": gap * 2})
    return deposit.compute(abl)["pattern"].iloc[0]


def test_the_deposit_thresholds_are_read_as_written_at_their_boundaries():
    """The spec's >= 0.05, >= 3x and summed >= 0.05, on drops that are counts out of 1,000 as float subtraction
    computes them (950 - 900 of 1,000 is 0.04999999999999993) and as float32 tables ship them (0.15 reads
    0.15000000596, 3 x 0.05 0.15000000224)."""
    drop = lambda right_clean, right_ablated: right_clean / 1000 - right_ablated / 1000  # noqa: E731
    for dtype in (np.float64, np.float32):
        assert _deposit_of([drop(950, 900), 0, 0, 0], dtype) == "single-head"  # exactly 0.05
        assert _deposit_of([drop(950, 800), drop(950, 900), 0, 0], dtype) == "single-head"  # exactly 3x
        assert _deposit_of([0.15, 0.051, 0, 0], dtype) == "average"  # less than 3x
        assert _deposit_of([0.049, 0, 0, 0], dtype) == "none"  # below 0.05, summed below 0.05
        assert _deposit_of([drop(950, 920), drop(950, 940), drop(950, 940), 0], dtype) == "average"  # sum 0.05


def test_a_deposit_at_the_higher_threshold_keeps_a_drop_of_exactly_that():
    from workbench.analysis.claims.rules import _at

    dep = pd.DataFrame({"layer": [0, 1], "single_head_deposit": [True, True],
                        "top_delta": [0.95 - 0.85, 0.0999]})  # 0.09999999999999998: exactly 0.10 as counts
    assert list(_at(dep, 0.10).single_head_deposit) == [True, False]


def test_seed_aggregated_layer_gap_has_the_t_interval_of_the_per_seed_gaps():
    """Per-seed gaps 0.1, 0.2, 0.3 (top head 0.3, 0.4, 0.5; second 0.2 each): mean 0.2, t(0.975, 2) = 4.303,
    sd 0.1: 0.2 -+ 4.303 x 0.1 / sqrt(3) = [-0.048, 0.448]."""
    from workbench.analysis.ablation import aggregate_seeds

    tables = [pd.DataFrame({"layer": 0, "head": [0, 1, 2], "metric": "accuracy", "mode": "zero",
                            "delta": [top, 0.2, 0.0], "importance": [top, 0.2, 0.0], "ci_lo": 0.0, "ci_hi": 0.0,
                            "layer_gap": top - 0.2, "layer_gap_lo": 0.0, "layer_gap_hi": 0.0})
              for top in (0.3, 0.4, 0.5)]
    row = aggregate_seeds(tables).query("head == 0").iloc[0]
    assert row.layer_gap == pytest.approx(0.2)
    assert (row.layer_gap_lo, row.layer_gap_hi) == (pytest.approx(-0.04843, abs=1e-4), pytest.approx(0.44843, abs=1e-4))
