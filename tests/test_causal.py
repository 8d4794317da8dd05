"""Issue 14: resample ablation, counterfactual pairs, activation patching (nnsight), probes, trigger attention,
direct logit attribution and the head summary, on tiny untrained models and smoke-sized data."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from synthetic_tasks import get_spec
from synthetic_tasks.counterfactual import counterfactual_pairs
from workbench.analysis import ablation
from workbench.model import ModelConfig, PEClassifier

from test_analysis import make_data, make_model


# ---- resample ablation -----------------------------------------------------------------------------
def test_resample_partners_share_length_and_differ():
    x = make_data(40, min_len=12).test_x
    partner = ablation.resample_partners(x, seed=1)
    n = ablation.lengths(x)
    has = partner >= 0
    assert has.sum() >= 10
    assert (partner[has] != np.flatnonzero(has)).all() and (n[partner[has]] == n[has]).all()
    singles = [i for i in range(len(x)) if (n == n[i]).sum() == 1]
    assert all(partner[i] == -1 for i in singles)


@pytest.mark.parametrize("scheme, arch", [("rope", "paper"), ("alibi", "decoder"), ("mla", "paper")])
def test_resample_fast_equals_naive_loop(scheme, arch):
    model = make_model(scheme, arch=arch, n_layers=3)
    d = make_data(40, min_len=13)
    d.test_x[0, 3:] = 0  # the one example of length 3: no partner, left out
    fast = ablation.per_example(model, d.test_x, d.test_y, mode="resample", method="fast", batch_size=5, seed=2)
    naive = ablation.per_example(model, d.test_x, d.test_y, mode="resample", method="naive", trim=False, seed=2)
    assert np.array_equal(fast["kept"], naive["kept"]) and 0 not in fast["kept"] and len(fast["kept"]) == len(d.test_x) - 1
    assert np.array_equal(fast["pred"], naive["pred"])
    np.testing.assert_allclose(fast["loss"], naive["loss"], rtol=1e-5, atol=1e-5)
    assert np.abs(fast["loss"] - fast["clean_loss"][None, None]).max() > 1e-4


def test_resample_replaces_z_with_the_partner_z():
    """Hand check of one head: the ablated logits equal a forward whose hook_z slice is the partner's."""
    model = make_model("rope")
    x = np.array([[3, 4, 5, 0], [6, 7, 8, 0], [9, 10, 11, 12]])
    y = np.array([1, 2, 3])
    res = ablation.per_example(model, x, y, mode="resample", method="fast", batch_size=8)
    assert list(res["kept"]) == [0, 1]
    tok = torch.as_tensor(x[:2, :3])
    zp = ablation.partner_z(model, tok.flip(0))

    def patch(z, hook):
        z = z.clone()
        z[:, :, 1] = zp[0][:, :, 1]
        return z

    logits = model.run_with_hooks(tok, fwd_hooks=[("blocks.0.attn.hook_z", patch)])
    loss = torch.nn.functional.cross_entropy(logits, torch.as_tensor(y[:2]), reduction="none")
    np.testing.assert_allclose(res["loss"][0, 1], loss.detach().numpy(), rtol=1e-5, atol=1e-6)


# ---- counterfactual pairs ----------------------------------------------------------------------------
def test_distance_pairs_move_only_the_second_trigger():
    spec = get_spec("trigger-distance", preset="smoke")
    p = counterfactual_pairs(spec, [5, 7], 200, seed=3)
    assert len(p) > 150
    for c, f, y, yf in zip(p.clean_x, p.cf_x, p.clean_y, p.cf_y):
        assert (c != 0).sum() == (f != 0).sum()
        p1, p2, q2 = int(np.flatnonzero(c == 5)[0]), int(np.flatnonzero(c == 7)[0]), int(np.flatnonzero(f == 7)[0])
        assert p2 - p1 == y and q2 - p1 == yf and y != yf and np.flatnonzero(f == 5)[0] == p1
        assert spec.middle_min + 1 <= yf <= spec.middle_max + 1
        keep = lambda row: row[(row != 0) & (row != 5) & (row != 7)]  # noqa: E731
        assert np.array_equal(keep(c), keep(f))  # the filler words, in the same order
    assert p.trigger_mask.sum(1).min() >= 2


def test_count_pairs_swap_one_filler_for_a_trigger():
    spec = get_spec("trigger-count", preset="smoke")
    trig = np.array([3, 9, 11])
    p = counterfactual_pairs(spec, trig, 100, seed=1)
    diff = p.clean_x != p.cf_x
    assert (diff.sum(1) == 1).all() and (p.cf_y == p.clean_y + 1).all()
    assert np.isin(p.cf_x[diff], trig).all() and not np.isin(p.clean_x[diff], trig).any()
    assert (np.isin(p.clean_x, trig).sum(1) == p.clean_y).all()


# ---- activation patching -------------------------------------------------------------------------
def task_data(task="trigger-distance"):
    spec = get_spec(task, preset="smoke")
    trig = np.array([5, 7]) if task == "trigger-distance" else np.array([3, 9, 11])
    return SimpleNamespace(spec=spec, trigger_ids=trig)


def task_model(task="trigger-distance", arch="paper", scheme="rope", **kw):
    n_classes = 16 if task == "trigger-distance" else 13
    base = dict(vocab_size=40, n_classes=n_classes, arch=arch, scheme=scheme, d_model=32, n_heads=4, d_ff=48,
                n_layers=2, max_len=24, dropout=0.0, seed=5)
    return PEClassifier(ModelConfig(**(base | kw))).eval()


@pytest.mark.parametrize("task, arch, scheme", [("trigger-distance", "paper", "rope"),
                                                ("trigger-distance", "decoder", "alibi"),
                                                ("trigger-count", "paper", "mla")])
def test_batched_patching_equals_naive_nnsight_loop(task, arch, scheme):
    from workbench.analysis import patching

    model, d = task_model(task, arch, scheme), task_data(task)
    pairs = patching.pairs_for(d, 14, seed=2)
    a = patching.per_pair(model, pairs, "batched", batch_size=4)
    b = patching.per_pair(model, pairs, "naive")
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-5)
    assert np.abs(a["ld_patched"] - a["ld_clean"]).max() > 1e-3  # patching changes something


def test_nnsight_patch_equals_transformer_lens_hooks():
    """The batched nnsight patch of head (1, 2) at trigger positions == the same patch with run_with_hooks."""
    from workbench.analysis import patching

    model, d = task_model(), task_data()
    pairs = patching.pairs_for(d, 6, seed=0)
    res = patching.per_pair(model, pairs, "batched", batch_size=6)
    clean, cf = torch.as_tensor(pairs.clean_x), torch.as_tensor(pairs.cf_x)
    _, cache = model.run_with_cache(cf)
    m = torch.as_tensor(pairs.trigger_mask)

    def patch(z, hook):
        z = z.clone()
        z[:, :, 2][m] = cache["blocks.1.attn.hook_z"][:, :, 2][m]
        return z

    lg = model.run_with_hooks(clean, fwd_hooks=[("blocks.1.attn.hook_z", patch)])
    r = torch.arange(len(pairs))
    ld = (lg[r, pairs.cf_y] - lg[r, pairs.clean_y]).detach().numpy()
    np.testing.assert_allclose(res["ld_patched"][1, patching.SETS.index("trigger"), 2], ld, rtol=1e-4, atol=1e-5)


AUTHORS_PADS = dict(attn_pad_mask=False, readout_include_pad=True, pad_trained=True, final_ln="none")


@pytest.mark.parametrize("arch, kw", [("paper", {}), ("decoder", {}), ("paper", AUTHORS_PADS)])
def test_patching_known_answers(arch, kw):
    """The last layer's whole stream carries everything (effect 1); a head whose W_O is zero carries nothing. In
    the authors' settings the pads attend and are pooled, so "all" positions includes them (it read 1.29 without)."""
    from workbench.analysis import patching

    model = task_model(arch=arch, **kw)
    with torch.no_grad():
        model.blocks[0].attn.W_O[1] = 0.0
    df = patching.compute(model, task_data(), n_pairs=20, n_boot=50)
    last = df[(df.site == "resid") & (df.layer == 1) & (df.positions == "all")].iloc[0]
    assert last.effect == pytest.approx(1.0, abs=1e-4)
    assert kw or last.ci_lo == pytest.approx(1.0, abs=1e-3)
    dead = df[(df.site == "head") & (df.layer == 0) & (df["head"] == 1)]
    assert np.allclose(dead.effect, 0.0, atol=1e-4)  # float rounding only
    assert len(df) == 2 * 3 * 5 and set(df.positions) == {"all", "trigger", "non_trigger"}


def test_patching_bad_input():
    from workbench.analysis import NotApplicable, patching

    with pytest.raises(NotApplicable, match="trigger-distance"):
        patching.compute(task_model(), make_data(10), n_pairs=4)
    with pytest.raises(ValueError, match="classes"):
        patching.compute(task_model(n_classes=5), task_data(), n_pairs=4)


# ---- probes ------------------------------------------------------------------------------------------
def probe_data(n=160, seq=24, fixed=True, bos=False, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(2, 40, (n, seq))
    if bos:
        x[:, 0] = 1
    if not fixed:
        for i in range(n):
            x[i, rng.integers(8, seq + 1):] = 0
    return SimpleNamespace(test_x=x, test_y=rng.integers(0, 6, n))


def probe_model(arch, scheme):
    return PEClassifier(ModelConfig(vocab_size=40, n_classes=6, arch=arch, scheme=scheme, d_model=32, n_heads=4,
                                    d_ff=48, n_layers=2, max_len=24, dropout=0.0, seed=1)).eval()


def position_scores(arch, scheme, **kw):
    from workbench.analysis import probes

    df = probes.compute(probe_model(arch, scheme), probe_data(**kw), probes=("position",), n_examples=160)
    return df.set_index("layer")


def test_position_probe_known_answers():
    """paper arch + NoPE is permutation invariant: on equal-length inputs no layer tells the position (R^2 ~ 0);
    an input PE makes it decodable from the embedded input (layer -1) on; a causal decoder without PE builds it
    up layer by layer (Haviv et al. 2022) -- seen here with a fixed first token, where the bidirectional NoPE
    model knows only what that token itself says (position 0)."""
    nope = position_scores("paper", "nope")
    assert (nope["score"] < 0.03).all() and (nope["control"] < 0.03).all()
    sin = position_scores("paper", "sinusoidal", fixed=False)
    assert sin.loc[-1, "score"] > 0.6 and sin.loc[0, "selectivity"] > 0.6
    assert sin.loc[-1, "score"] > sin.loc[-1, "baseline"] + 0.3  # more than the length alone tells
    dec, bi = position_scores("decoder", "nope", bos=True), position_scores("paper", "nope", bos=True)
    assert np.ptp(bi["score"].values) < 0.01  # nothing beyond the first token's identity, at every layer
    assert dec.loc[1, "score"] > bi["score"].max() + 0.1


def test_position_probe_runs_openblas_on_torchs_thread_count(monkeypatch):
    """The ridge fits' sums follow OpenBLAS's thread count (t1-alibi-repro-long-s42's `score_lo` 1.67e-06 apart at
    1 and 2 threads on the same weights), and the tables' provenance records torch's: so the position probe runs
    OpenBLAS on torch's thread count, whatever OpenBLAS's own (here 2, torch's 1)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from workbench.analysis import probes

    if not any(i["internal_api"] == "openblas" for i in threadpool_info()):
        pytest.skip("numpy here does not run on OpenBLAS")
    seen, ridge = [], probes._ridge

    def spy(alpha):
        make = ridge(alpha)

        def made():
            seen.append({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
            return make()
        return made

    monkeypatch.setattr(probes, "_ridge", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=2, user_api="blas"):
            probes.compute(probe_model("paper", "sinusoidal"), probe_data(40), probes=("position",), n_examples=40)
            assert {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"} == {2}  # restored
    finally:
        torch.set_num_threads(before)
    assert seen and all(s == {1} for s in seen), seen


def test_label_probes_find_a_planted_signal():
    """The label = how often token 2 occurs (0, 4, .., 20 times): the mean-pooled z of the heads and the pooled
    stream average the token embeddings, so the label is linearly decodable there; shuffled controls fail."""
    from workbench.analysis import probes

    d = probe_data(200)
    rng = np.random.default_rng(1)
    d.test_y = rng.integers(0, 6, 200)
    d.test_x = np.where(d.test_x == 2, 3, d.test_x)
    for row, k in zip(d.test_x, d.test_y):
        row[rng.choice(24, 4 * k, replace=False)] = 2
    model = probe_model("paper", "rope")
    df = probes.compute(model, d, probes=("label_head", "label_stream"), n_examples=200, n_folds=4)
    heads = df[df.probe == "label_head"]
    assert len(heads) == 8 and (heads["control"] < 0.5).all()
    assert heads["score"].max() > 0.6 and heads["selectivity"].max() > 0.4
    assert (df[df.probe == "label_stream"]["score"] > 0.6).all()
    assert (df["score_lo"] <= df["score"]).all() and (df["score"] <= df["score_hi"]).all()
    # 199 examples in 4 folds: training sets of 149 and 150 rows, solved per size (one stacked solve failed)
    uneven = probes.compute(model, d, probes=("label_head",), n_examples=199, n_folds=4)
    assert len(uneven) == 8 and uneven["score"].max() > 0.6 and (uneven["control"] < 0.5).all()


def test_probe_bad_input():
    from workbench.analysis import probes

    with pytest.raises(ValueError, match="layers 0..1"):
        probes.compute(probe_model("paper", "rope"), probe_data(), layers=[5])
    with pytest.raises(ValueError, match="n_folds"):
        probes.compute(probe_model("paper", "rope"), probe_data(6), n_folds=5)


# ---- trigger attention ----------------------------------------------------------------------------------
def test_trigger_attention_hand_checks():
    from workbench.analysis import NotApplicable, trigger_attention

    model, d = task_model(), task_data()
    pairs = counterfactual_pairs(d.spec, d.trigger_ids, 30, seed=0)
    d.test_x, d.test_y = pairs.clean_x, pairs.clean_y
    df = trigger_attention.compute(model, d, n_boot=30)
    tok = torch.as_tensor(pairs.clean_x)
    _, cache = model.run_with_cache(tok)
    pat = cache["blocks.1.attn.hook_pattern"][:, 3]
    r = torch.arange(len(tok))
    p1, p2 = (tok == 5).float().argmax(1), (tok == 7).float().argmax(1)
    row = df[(df.measure == "t2_to_t1") & (df.layer == 1) & (df["head"] == 3)].iloc[0]
    assert row.value == pytest.approx(float(pat[r, p2, p1].mean()), abs=1e-6) and row.ci_lo <= row.value <= row.ci_hi
    # a head that attends uniformly: every measure equals its uniform reference
    with torch.no_grad():
        model.blocks[0].attn.W_Q[2] = 0.0
        model.blocks[0].attn.b_Q[2] = 0.0
    df = trigger_attention.compute(model, SimpleNamespace(test_x=pairs.clean_x, test_y=pairs.clean_y,
                                                          trigger_ids=d.trigger_ids, spec=d.spec), n_boot=0)
    h = df[(df.layer == 0) & (df["head"] == 2)]
    to = h[h.measure == "to_triggers"].iloc[0]
    assert to.value == pytest.approx(to.uniform, abs=1e-5)
    bd = h[h.measure == "by_distance"]
    np.testing.assert_allclose(bd["value"], bd["uniform"], atol=1e-5)
    with pytest.raises(NotApplicable, match="trigger"):
        trigger_attention.compute(model, make_data(10))


def test_trigger_attention_reads_the_labelled_pair_and_the_keys_the_model_sees():
    """The authors' data: filler may hold the trigger words, so a row's first w1 or w2 need not be its pair's; the
    pair is the w1 whose w2 lies the label's distance after it (`trigger_pair`). The authors' model attends the pad
    keys too, so a head attending uniformly (W_Q = 0) sits at the uniform reference only if the pads count."""
    from workbench.analysis import trigger_attention
    from workbench.analysis.common import trigger_pair

    tok = torch.tensor([[7, 5, 9, 9, 7, 9, 0], [5, 9, 7, 5, 9, 9, 7]])  # w1 = 5, w2 = 7; labels 3 and 3
    p1, p2 = trigger_pair(tok, torch.tensor([3, 3]), [5, 7])
    assert p1.tolist() == [1, 3] and p2.tolist() == [4, 6]  # not the first 7 of row 0, nor the first 5 of row 1
    with pytest.raises(ValueError, match="labels"):
        trigger_pair(tok, torch.tensor([2, 3]), [5, 7])
    spec = get_spec("trigger-distance", preset="smoke")
    pairs = counterfactual_pairs(spec, np.array([5, 7]), 60, seed=0)
    d = SimpleNamespace(spec=spec, trigger_ids=np.array([5, 7]), test_x=pairs.clean_x, test_y=pairs.clean_y)
    m = PEClassifier(ModelConfig(vocab_size=40, n_classes=16, arch="paper", scheme="nope", d_model=32, n_heads=4,
                                 d_ff=48, n_layers=1, max_len=24, dropout=0.0, seed=5, attn_pad_mask=False,
                                 readout_include_pad=True, pad_trained=True, final_ln="none")).eval()
    with torch.no_grad():
        m.blocks[0].attn.W_Q.zero_()
        m.blocks[0].attn.b_Q.zero_()
    df = trigger_attention.compute(m, d, n_boot=0)
    h = df[df["head"] == 0]
    to = h[h.measure == "to_triggers"].iloc[0]
    assert to.value == pytest.approx(to.uniform, abs=1e-6)  # 0.0833 against 0.1373 over the word keys only
    bd = h[h.measure == "by_distance"]
    np.testing.assert_allclose(bd["value"], bd["uniform"], atol=1e-6)


@pytest.mark.parametrize("arch, task", [("paper", "trigger-distance"), ("decoder", "trigger-count")])
def test_trigger_attention_by_distance_and_trigger_mass_equal_a_per_pair_loop(arch, task):
    """`by_distance` (mean weight on visible pairs at |q - k| = delta, and its uniform reference) and `to_triggers`,
    recomputed pair by pair in plain Python from `run_with_cache`; padded, variable-length rows, batches of 7."""
    from workbench.analysis import trigger_attention

    model, d = task_model(task, arch=arch), task_data(task)
    pairs = counterfactual_pairs(d.spec, d.trigger_ids, 20, seed=1)
    x = pairs.clean_x.copy()
    x[::3, -4:] = 0  # some shorter rows (pads at the end): pairs with a pad are not visible
    d.test_x, d.test_y = x, pairs.clean_y
    df = trigger_attention.compute(model, d, n_boot=0, batch_size=7)
    tok = torch.as_tensor(x)
    _, cache = model.run_with_cache(tok)
    L, H = model.cfg.n_layers, model.cfg.n_heads
    trig = set(int(t) for t in d.trigger_ids)
    sums, n, uni = {}, {}, {}
    to = np.zeros((L, H))
    for e, row in enumerate(tok.tolist()):
        real = [i for i, t in enumerate(row) if t != 0]
        for q in real:
            keys = [k for k in real if arch != "decoder" or k <= q]
            for k in keys:
                delta = abs(q - k)
                n[delta] = n.get(delta, 0) + 1
                uni[delta] = uni.get(delta, 0.0) + 1 / len(keys)
                for l in range(L):
                    w = cache[f"blocks.{l}.attn.hook_pattern"][e, :, q, k].double().numpy()
                    sums[(l, delta)] = sums.get((l, delta), 0.0) + w
                    if row[k] in trig:
                        to[l] += w / len(real) / len(tok)
    bd = df[df.measure == "by_distance"]
    assert set(bd.distance) == set(n)
    for r in bd.itertuples():
        assert r.value == pytest.approx(sums[(r.layer, r.distance)][r.head] / n[r.distance], abs=1e-9)
        assert r.uniform == pytest.approx(uni[r.distance] / n[r.distance], abs=1e-12)
    tt = df[df.measure == "to_triggers"]
    np.testing.assert_allclose(tt.sort_values(["layer", "head"])["value"], to.flatten(), atol=1e-9)


# ---- direct logit attribution ---------------------------------------------------------------------------
@pytest.mark.parametrize("arch, scheme", [("paper", "rope"), ("decoder", "alibi"), ("paper", "mla")])
def test_dla_components_sum_to_the_logits(arch, scheme):
    """With the final LayerNorm's scale frozen at the clean run the decomposition is exact: the per-head direct
    effects plus the embedding, attention-bias, MLP and bias terms give the logits."""
    from workbench.analysis import dla

    model = make_model(scheme, arch=arch)
    tok = torch.as_tensor(make_data(12).test_x)
    with torch.no_grad():
        labels, contrib, logits = dla.decompose(model, tok)
        torch.testing.assert_close(contrib.sum(1), model(tok), rtol=1e-4, atol=1e-4)
    assert sum(c == "head" for c, _, _ in labels) == model.cfg.n_layers * model.cfg.n_heads
    d = make_data(30)
    df = dla.compute(model, d, n_boot=20)
    logits = model(torch.as_tensor(d.test_x)).detach().numpy()
    assert df["dla"].sum() == pytest.approx(logits[np.arange(30), d.test_y].mean(), abs=1e-4)
    # the two margins add up to their logit margins: vs the mean over classes, and vs the runner-up class (the
    # highest logit other than the label's, found here independently by sorting)
    at = logits[np.arange(30), d.test_y]
    assert df["dla_vs_mean"].sum() == pytest.approx((at - logits.mean(1)).mean(), abs=1e-4)
    order = np.argsort(-logits, 1)
    second = np.where(order[:, 0] == d.test_y, order[:, 1], order[:, 0])
    assert df["dla_vs_runner_up"].sum() == pytest.approx((at - logits[np.arange(30), second]).mean(), abs=1e-4)
    assert (df["vs_runner_up_lo"] <= df["dla_vs_runner_up"] + 1e-12).all()
    assert (df["dla_vs_runner_up"] <= df["vs_runner_up_hi"] + 1e-12).all()
    # a head with W_O = 0 has no direct effect
    with torch.no_grad():
        model.blocks[1].attn.W_O[0] = 0.0
    df = dla.compute(model, d, n_boot=0)
    assert df[(df.component == "head") & (df.layer == 1) & (df["head"] == 0)]["dla"].abs().max() < 1e-7


# ---- head summary ------------------------------------------------------------------------------------------
def fake_tables(L=2, H=4):
    """Per-head tables where head (1, 2) is strong by ablation and patching, (0, 1) by ablation only."""
    import pandas as pd

    abl, pat, dl = [], [], []
    for l in range(L):
        for h in range(H):
            d = 0.3 if (l, h) in ((1, 2), (0, 1)) else 0.0
            abl.append(dict(layer=l, head=h, metric="accuracy", mode="zero", delta=d, ci_lo=d - 0.05, ci_hi=d + 0.05,
                            layer_gap=0.3, layer_gap_lo=0.2, layer_gap_hi=0.4))
            e = 0.6 if (l, h) == (1, 2) else 0.01
            for pos in ("all", "trigger", "non_trigger"):
                pat.append(dict(site="head", layer=l, head=h, positions=pos, effect=e, ci_lo=e - 0.05, ci_hi=e + 0.05))
            r = 0.8 if (l, h) == (0, 1) else 0.1  # (0, 1) writes to the label against the runner-up class only
            dl.append(dict(component="head", layer=l, head=h, dla_vs_mean=0.1, vs_mean_lo=0.0, vs_mean_hi=0.2,
                           dla_vs_runner_up=r, vs_runner_up_lo=r - 0.1, vs_runner_up_hi=r + 0.1))
    return {"ablation": pd.DataFrame(abl), "patching": pd.DataFrame(pat), "dla": pd.DataFrame(dl)}


def test_head_summary_needs_agreement_and_keeps_the_paper_verdict():
    from workbench.analysis import NotApplicable, head_summary

    df = head_summary.compute(fake_tables(), dla_measure="mean")  # no dla vote on the mean margin here
    assert len(df) == 8 and (df["n_methods"] == 3).all()
    dep = df[df.deposit_head]
    assert list(zip(dep.layer, dep["head"])) == [(1, 2)] and dep.methods.iloc[0] == "ablation+patching"
    paper = df[df.paper_deposit]  # the paper's zero-ablation definition flags both single-head deposits
    assert set(zip(paper.layer, paper["head"])) == {(0, 1), (1, 2)}
    assert df.probe_acc.isna().all() and df.by_probe.isna().all()
    assert head_summary.compute(fake_tables(), min_agree=1, dla_measure="mean").deposit_head.sum() == 2
    assert head_summary.compute(fake_tables(), min_effect=0.7, dla_measure="mean").deposit_head.sum() == 0
    with pytest.raises(NotApplicable, match="workbench analyze"):
        head_summary.compute({})


def test_head_summary_dla_vote_reads_the_chosen_margin():
    """`dla_measure` picks the margin the dla vote reads; both margins are shown either way, and a dla table made
    before it had the runner-up margin is refused for that vote with what to do."""
    from workbench.analysis import NotApplicable, head_summary

    mean = head_summary.compute(fake_tables(), dla_measure="mean")
    runner = head_summary.compute(fake_tables())  # the default
    assert not mean.by_dla.any() and (mean.dla_measure == "mean").all()
    assert list(zip(runner.layer[runner.by_dla], runner["head"][runner.by_dla])) == [(0, 1)]
    dep = runner[runner.deposit_head]
    assert set(zip(dep.layer, dep["head"])) == {(0, 1), (1, 2)} and "ablation+dla" in set(dep.methods)
    for df in (mean, runner):  # the same columns, whichever the vote reads
        assert df.dla_runner_up.max() == pytest.approx(0.8) and df.dla.max() == pytest.approx(0.1)
    old = fake_tables()
    old["dla"] = old["dla"].drop(columns=["dla_vs_runner_up", "vs_runner_up_lo", "vs_runner_up_hi"])
    assert head_summary.compute(old, dla_measure="mean").dla_runner_up.isna().all()
    with pytest.raises(NotApplicable, match="compute dla again"):
        head_summary.compute(old)
    with pytest.raises(ValueError, match="dla_measure='median' is unknown"):
        head_summary.compute(fake_tables(), dla_measure="median")


def _mean_vote_summary():
    """A head summary as made before 2026-11-28: its dla vote read the mean margin (no dla_measure column), and
    it made (0, 1) (ablation+dla) and (1, 2) (ablation+patching+dla) deposit heads."""
    from workbench.analysis import head_summary

    t = fake_tables()
    t["dla"]["dla_vs_mean"], t["dla"]["vs_mean_lo"] = 0.9, 0.5  # every head votes on the mean margin
    hs = head_summary.compute(t, dla_measure="mean").drop(columns=["dla_measure"])
    assert set(zip(hs.layer[hs.deposit_head], hs["head"][hs.deposit_head])) == {(0, 1), (1, 2)}
    return hs


def test_report_and_heads_page_count_a_summary_without_its_mean_margin_dla_vote():
    """The report's Heads section and the dashboard's Heads page show a head summary whose dla vote read the mean
    margin as the claims count it (`head_summary.counted`): the note says so with the command, and only the head
    that two other methods mark stays a deposit head."""
    from types import SimpleNamespace

    from workbench.report.build import Doc
    from workbench.report.heads import heads_section

    hs = _mean_vote_summary()
    run = SimpleNamespace(id="r1", config={"model": {"scheme": "rope"}, "task": {"task": "trigger-distance"}},
                          tables=lambda: ["head_summary"], load_table=lambda name: hs.copy(), status="finished",
                          info={}, has_table=lambda name: name == "head_summary", store=SimpleNamespace(readonly=True))
    doc, summary = Doc(), {}
    heads_section(doc, SimpleNamespace(get=lambda rid: run), [{"id": "r1", "tables": {"present": ["head_summary"]}}],
                  summary)
    assert [(h["layer"], h["head"], h["methods"]) for h in summary["heads"]["r1"] if h["deposit_head"]] == [
        (1, 2, "ablation+patching")]
    assert "left out here" in "".join(doc.parts) and "--what dla,head-summary" in "".join(doc.parts)

    import json

    from apps.pages.heads import render_map

    hints, fig, text = render_map(SimpleNamespace(get=lambda rid: run), "r1", "n_agree")
    assert text == "1 deposit head: L1.H2 (ablation+patching)"
    assert "left out here" in json.dumps([h.to_plotly_json() for h in hints], default=str)


# ---- figures ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def head_tables():
    from workbench.analysis import (attribution, dla, edges, head_summary, patching, probes, qkv, self_repair,
                                    trigger_attention)

    model, d = task_model(), task_data()
    pairs = counterfactual_pairs(d.spec, d.trigger_ids, 60, seed=4)
    d.test_x, d.test_y = pairs.clean_x, pairs.clean_y
    t = {"patching": patching.compute(model, d, n_pairs=20, n_boot=30),
         "probes": probes.compute(model, d, n_examples=60, n_folds=3),
         "trigger_attention": trigger_attention.compute(model, d, n_boot=30),
         "dla": dla.compute(model, d, n_boot=30),
         "ablation": ablation.compute(model, d, n_boot=30),
         "ablation_resample": ablation.compute(model, d, mode="resample", n_boot=30)}
    t["attribution"] = attribution.check_against(attribution.compute(model, d, n_pairs=20, n_boot=30), t["patching"])
    t["edges"] = edges.compute(model, d, n_pairs=20, n_boot=30)
    t["qkv"] = qkv.compute(model, d, n_pairs=20, n_boot=30, check_per_site=2)
    t["self_repair"] = self_repair.compute(model, d, n_boot=30, min_direct=0.0)
    t["head_summary"] = head_summary.compute(t)
    return t


HEAD_FIGS = {"patching": 4, "attribution": 3, "edges": 3, "qkv": 4, "probes": 5, "trigger_attention": 4, "dla": 2,
             "self_repair": 6, "head_summary": 3, "ablation_resample": 1}


@pytest.mark.parametrize("name", sorted(HEAD_FIGS))
def test_head_figures_build_from_their_tables(name, head_tables):
    from workbench.figures import FIGURES

    fig = FIGURES[name](head_tables[name])
    assert len(fig.data) == HEAD_FIGS[name], name
    fig.to_json()


def test_heads_page_maps_a_run_from_its_ablation_tables_when_no_summary_is_stored(head_tables):
    """A shipped run with only its ablation tables (the paper-scale GPU runs) gets its map and head card from those
    tables joined on the page, said in a hint, equal to `head_summary.compute` of them; a run with no per-head table
    keeps the missing-table hint; a stored summary is shown as stored."""
    import json
    from types import SimpleNamespace

    from apps.pages.heads import render_card, render_map
    from workbench.analysis import head_summary

    def stand_in(tables: dict, readonly=True):
        run = SimpleNamespace(id="r1", config={"model": {"scheme": "rope"}, "task": {"task": "trigger-distance"}},
                              tables=lambda: list(tables), load_table=lambda name: tables[name].copy(),
                              status="finished", info={}, has_table=lambda name: name in tables,
                              store=SimpleNamespace(readonly=readonly, root="results/paper"))
        return SimpleNamespace(get=lambda rid: run)

    abl = {"ablation": head_tables["ablation"]}
    store = stand_in(abl)
    hints, fig, text = render_map(store, "r1", "zero_delta")
    said = json.dumps([h.to_plotly_json() for h in hints], default=str)
    assert fig is not None and "stores no head_summary table" in said and "(ablation)" in said
    assert "--what head-summary" not in said  # a shipped run's tables cannot be added
    want = head_summary.compute(abl)
    assert np.allclose(np.asarray(fig.data[0].z, float)[want.layer, want["head"]], want.zero_delta)
    card = json.dumps([c.to_plotly_json() for c in render_card(store, "r1", None, 0)], default=str)
    assert "zero_delta" in card and "stores no head_summary" not in card
    for click in ({"points": [{"x": "../x", "y": 0}]}, "garbage", {"points": [{"x": 99, "y": 0}]}, {"points": []}):
        assert json.dumps([c.to_plotly_json() for c in render_card(store, "r1", click, 0)], default=str) == card
    own = json.dumps([h.to_plotly_json() for h in render_map(stand_in(abl, readonly=False), "r1", "n_agree")[0]],
                     default=str)
    assert "--what head-summary" in own
    hints, fig, _ = render_map(stand_in({"qk_means": head_tables["ablation"]}), "r1", "n_agree")
    assert fig is None and "no head_summary table" in json.dumps([h.to_plotly_json() for h in hints], default=str)
    hints, fig, _ = render_map(stand_in({"head_summary": head_tables["head_summary"], **abl}), "r1", "n_agree")
    assert fig is not None and "stores no head_summary" not in json.dumps([h.to_plotly_json() for h in hints],
                                                                          default=str)


def test_the_report_draws_a_runs_per_head_tables_without_its_head_summary(head_tables):
    """A run analysed for probes only (`workbench analyze RUN --what probes`): the report's Heads section said "no
    head summary yet" and left the stored probes out; now it says that and draws the probes, as the dashboard's
    Heads page does. A run with no per-head table keeps the one line."""
    from types import SimpleNamespace

    from workbench.report.build import Doc
    from workbench.report.heads import heads_section

    run = SimpleNamespace(id="r1", config={"model": {"scheme": "rope"}, "task": {"task": "trigger-distance"}},
                          tables=lambda: ["probes"], load_table=lambda name: head_tables[name].copy(),
                          status="finished", info={}, has_table=lambda name: name == "probes",
                          store=SimpleNamespace(readonly=True, root="results/repro"))
    doc, summary = Doc(), {}
    heads_section(doc, SimpleNamespace(get=lambda rid: run), [{"id": "r1", "tables": {"present": ["probes"]}}],
                  summary)
    text = "".join(doc.parts)
    assert [f["figure"] for f in doc.figures] == ["probes"] and "no head summary yet" in text
    assert "head_summary missing" not in text and not summary["heads"]
    doc = Doc()
    heads_section(doc, SimpleNamespace(get=lambda rid: run), [{"id": "r1", "tables": {"present": ["ablation"]}}], {})
    assert not doc.figures and "".join(doc.parts).count("missing") <= 1


def test_the_head_card_shows_a_tiny_measure_and_a_missing_one_as_they_are(head_tables):
    """The Heads page's card printed every measure with 3 decimals: a patching effect of 1.55e-4 read 0.000 and a
    missing self-repair nan; now `style.shown` (3 significant digits below 0.01, '–' for NaN), as tables are."""
    import json
    from types import SimpleNamespace

    from apps.pages.heads import render_card
    from workbench.figures.style import shown

    summary = head_tables["head_summary"].assign(patch_effect=np.float32(1.55e-4), self_repair=np.nan)
    run = SimpleNamespace(id="r1", config={"model": {"scheme": "rope"}, "task": {"task": "trigger-distance"}},
                          tables=lambda: ["head_summary"], load_table=lambda name: summary.copy(), status="finished",
                          info={}, has_table=lambda name: name == "head_summary",
                          store=SimpleNamespace(readonly=True, root="results/paper"))
    card = json.dumps([c.to_plotly_json() for c in render_card(SimpleNamespace(get=lambda rid: run), "r1", None, 0)],
                      default=str)
    assert '"measure": "patch_effect", "value": "0.000155"' in card and '"value": "0.000"' not in card
    assert '"measure": "self_repair", "value": "\\u2013"' in card and '"nan"' not in card
    assert shown("test_loss", 4.5e-7) == 4.5e-7 and shown("test_loss", 0.12345) == 0.123
    assert shown("wall_s", 3.14) == 3.1
    assert shown("x", None) == "–" and shown("x", "ceiling") == "ceiling"


def test_dla_figure_draws_the_chosen_margin(head_tables):
    """The dla figure draws the margin vs the runner-up where the table has it, vs the mean when asked or when an
    older table has only that; the heads' heatmap and the components' bars are that column."""
    from workbench.figures import FIGURES

    df = head_tables["dla"]
    rest = df[df["component"] != "head"]
    for measure, col in ((None, "dla_vs_runner_up"), ("runner_up", "dla_vs_runner_up"), ("mean", "dla_vs_mean")):
        fig = FIGURES["dla"](df, **({"measure": measure} if measure else {}))
        np.testing.assert_allclose(np.asarray(fig.data[1].y, float), rest[col])
        assert np.nanmax(np.abs(np.asarray(fig.data[0].z, float))) == pytest.approx(
            df[df.component == "head"][col].abs().max())
        assert ("runner-up" in fig.layout.annotations[0].text) == (col == "dla_vs_runner_up")
    assert not np.allclose(df["dla_vs_runner_up"], df["dla_vs_mean"])  # the two margins differ, so the test can tell
    old = df.drop(columns=["dla_vs_runner_up", "vs_runner_up_lo", "vs_runner_up_hi"])
    assert "mean logit" in FIGURES["dla"](old).layout.annotations[0].text
    with pytest.raises(ValueError, match="the table has mean"):
        FIGURES["dla"](old, measure="runner_up")


def test_head_card_and_attention_figures(head_tables):
    import pandas as pd

    from workbench.figures import FIGURES

    s = head_tables["head_summary"]
    assert {"zero_delta", "resample_delta", "patch_effect", "probe_selectivity", "dla", "t2_to_t1"} <= set(s.columns)
    assert s[["zero_delta", "resample_delta", "patch_effect", "dla", "t2_to_t1"]].notna().all().all()
    card = FIGURES["head_card"](s, layer=1, head=2)
    assert len(card.data) == 2 and len(card.data[0].x) + len(card.data[1].x) == 16  # all but mean ablation
    assert list(card.data[1].y) == ["direct effect vs the mean (logits)", "direct effect vs the runner-up (logits)",
                                    "self-repair (logits)"]  # logits on their own axis
    assert card.data[1].xaxis != card.data[0].xaxis and "share of the direct effect made up" in card.data[0].y
    with pytest.raises(ValueError, match="layer 7"):
        FIGURES["head_card"](s, layer=7, head=0)
    P = 5
    q, k = np.meshgrid(np.arange(P), np.arange(P), indexing="ij")
    words = ["a", "*t1", "b", "*t2", "c"]
    pat = pd.DataFrame({"layer": 1, "head": 2, "q_pos": q.ravel(), "k_pos": k.ravel(), "weight": 1 / P,
                        "q_token": np.asarray(words)[q.ravel()], "k_token": np.asarray(words)[k.ravel()]})
    fig = FIGURES["head_attention"](pat)
    assert len(fig.data) == 2 and sorted(fig.data[1].x[:2]) == [1, 3]
