"""Issue 14: resample ablation, counterfactual pairs, activation patching (nnsight), probes, trigger attention,
direct logit attribution and the head summary, on tiny untrained models and smoke-sized data."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from synthetic_tasks import generate, get_spec
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


@pytest.mark.parametrize("arch", ["paper", "decoder"])
def test_patching_known_answers(arch):
    """The last layer's whole stream carries everything (effect 1); a head whose W_O is zero carries nothing."""
    from workbench.analysis import patching

    model = task_model(arch=arch)
    with torch.no_grad():
        model.blocks[0].attn.W_O[1] = 0.0
    df = patching.compute(model, task_data(), n_pairs=20, n_boot=50)
    last = df[(df.site == "resid") & (df.layer == 1) & (df.positions == "all")].iloc[0]
    assert last.effect == pytest.approx(1.0, abs=1e-4) and last.ci_lo == pytest.approx(1.0, abs=1e-3)
    dead = df[(df.site == "head") & (df.layer == 0) & (df["head"] == 1)]
    assert np.allclose(dead.effect, 0.0, atol=1e-4)  # float rounding only
    assert len(df) == 2 * 3 * 5 and set(df.positions) == {"all", "trigger", "non_trigger"}


def test_patching_bad_input():
    from workbench.analysis import NotApplicable, patching

    with pytest.raises(NotApplicable, match="trigger-distance"):
        patching.compute(task_model(), make_data(10), n_pairs=4)
    with pytest.raises(ValueError, match="classes"):
        patching.compute(task_model(n_classes=5), task_data(), n_pairs=4)
