"""Edge attribution patching: a head's edges split its node estimate by reader, exactly; known answers."""
import numpy as np
import pytest
import torch

from workbench.analysis import attribution, edges, patching

from test_analysis import make_data
from test_attribution import linear_tail
from test_causal import task_data, task_model


def test_edge_list_runs_downstream_only():
    e = edges.edge_list(2, 4)
    assert len(e) == 4 * 4 + 3 + 4 * 2 + 1
    assert ("head", 0, 3, "mlp", 0) in e and ("mlp", 0, -1, "mlp", 0) not in e  # a head's own layer's MLP reads it
    assert ("head", 1, 0, "attn", 1) not in e and ("mlp", 1, -1, "readout", 2) in e
    assert all(tl > l or (t == "mlp" and s == "head" and tl == l) for s, l, h, t, tl in e)


@pytest.mark.parametrize("task, arch, scheme", [("trigger-distance", "paper", "rope"),
                                                ("trigger-distance", "decoder", "alibi"),
                                                ("trigger-count", "paper", "mla")])
def test_a_heads_edges_sum_to_its_node_estimate(task, arch, scheme):
    """The stream's gradient is the sum of its later readers' gradients: summed over readers, a head's edges are
    its attribution estimate at all positions, pair by pair."""
    model, d = task_model(task, arch, scheme), task_data(task)
    pairs = patching.pairs_for(d, 10, seed=2)
    res = edges.per_pair(model, pairs, batch_size=4)
    node = attribution.per_pair(model, pairs, batch_size=3)
    np.testing.assert_allclose(res["ld_clean"], node["ld_clean"], rtol=1e-5, atol=1e-6)
    order = edges.edge_list(model.cfg.n_layers, model.cfg.n_heads)
    for l in range(model.cfg.n_layers):
        for h in range(model.cfg.n_heads):
            rows = [i for i, e in enumerate(order) if e[:3] == ("head", l, h)]
            total = res["edges"][rows].sum(0)
            np.testing.assert_allclose(total, node["ld_patched"][l, 0, h] - node["ld_clean"], rtol=1e-4, atol=1e-5)
    assert np.abs(res["edges"]).max() > 1e-3


def test_eap_ig_edges_sum_to_the_integrated_node_estimate():
    """With ig_steps each reader's gradient is averaged along the same path as attribution's: a head's EAP-IG edges
    still sum to its AtP-IG estimate, pair by pair, and differ from plain EAP; the table records the steps."""
    model, d = task_model("trigger-distance", "decoder", "alibi"), task_data()
    pairs = patching.pairs_for(d, 8, seed=6)
    res = edges.per_pair(model, pairs, batch_size=4, ig_steps=3)
    plain = edges.per_pair(model, pairs, batch_size=4)
    node = attribution.per_pair(model, pairs, batch_size=4, ig_steps=3)
    order = edges.edge_list(model.cfg.n_layers, model.cfg.n_heads)
    for l in range(model.cfg.n_layers):
        for h in range(model.cfg.n_heads):
            rows = [i for i, e in enumerate(order) if e[:3] == ("head", l, h)]
            np.testing.assert_allclose(res["edges"][rows].sum(0), node["ld_patched"][l, 0, h] - node["ld_clean"],
                                       rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res["ld_clean"], plain["ld_clean"], rtol=1e-6, atol=1e-7)
    assert np.abs(res["edges"] - plain["edges"]).max() > 1e-4
    df = edges.compute(model, d, n_pairs=8, n_boot=10, check_top=0, ig_steps=2)
    assert (df["ig_steps"] == 2).all() and df["path_effect"].isna().all()


def test_edges_known_answers():
    """Linear tail (no final LayerNorm, the last MLP writes nothing): a last-layer head is read by the readout
    alone, and that edge is its real patch; a head with W_O = 0 and the silent MLP write nothing."""
    model, d = linear_tail("decoder"), task_data()
    with torch.no_grad():
        model.blocks[0].attn.W_O[2] = 0.0
    df = edges.compute(model, d, n_pairs=16, n_boot=40)
    real = patching.compute(model, d, n_pairs=16, n_boot=40)
    assert len(df) == len(edges.edge_list(2, 4)) and df["note"].eq("").all()
    last = df[(df.source == "head") & (df.layer == 1)]
    np.testing.assert_allclose(last[last.target == "mlp"]["effect"], 0.0, atol=1e-7)
    ref = real[(real.site == "head") & (real.layer == 1) & (real.positions == "all")].set_index("head")["effect"]
    got = last[last.target == "readout"].set_index("head")["effect"]
    np.testing.assert_allclose(got, ref.loc[got.index], rtol=1e-4, atol=1e-4)
    assert np.allclose(df[(df.source == "head") & (df.layer == 0) & (df["head"] == 2)]["effect"], 0.0, atol=1e-7)
    assert np.allclose(df[(df.source == "mlp") & (df.layer == 1)]["effect"], 0.0, atol=1e-7)
    assert (df["ci_lo"] <= df["effect"] + 1e-9).all() and (df["effect"] <= df["ci_hi"] + 1e-9).all()


def test_path_patch_is_the_patch_of_one_reader_and_checks_the_top_edges():
    """The real path patch of head (0, 1) -> readout, by hand: the head's output difference added to the final
    stream alone, read out by the model's head; `compute` path-patches its top edges, the rest stay unchecked."""
    model, d = task_model("trigger-distance", "decoder", "alibi"), task_data()
    pairs = patching.pairs_for(d, 12, seed=4)
    clean, cf = torch.as_tensor(pairs.clean_x), torch.as_tensor(pairs.cf_x)
    L = model.cfg.n_layers
    edge = ("head", 0, 1, "readout", L)
    got = edges.path_per_pair(model, pairs, [edge], batch_size=5)[0]
    with torch.no_grad():
        _, c = model.run_with_cache(clean)
        _, c_cf = model.run_with_cache(cf)
        dz = c_cf["blocks.0.attn.hook_z"][:, :, 1] - c["blocks.0.attn.hook_z"][:, :, 1]
        delta = (dz @ model.blocks[0].attn.W_O[1]) * (clean != 0)[:, :, None]
        r = torch.arange(len(pairs))
        ld = lambda lg: (lg[r, pairs.cf_y] - lg[r, pairs.clean_y]).double().numpy()  # noqa: E731
        by_hand = ld(model.head(c[f"blocks.{L - 1}.hook_resid_post"] + delta, clean)) - ld(model(clean))
    np.testing.assert_allclose(got, by_hand, rtol=1e-4, atol=1e-5)
    assert np.abs(by_hand).max() > 1e-4

    df = edges.compute(model, d, n_pairs=16, n_boot=40, check_top=5)
    checked = df[df["path_effect"].notna()]
    assert len(checked) == 5 and df["path_effect"].isna().sum() == len(df) - 5
    assert checked["effect"].abs().min() >= df.drop(checked.index)["effect"].abs().max()  # the top 5 by |estimate|
    assert checked["in_path_ci"].isin([0.0, 1.0]).all()
    lin = edges.compute(linear_tail("decoder"), d, n_pairs=16, n_boot=40, check_top=40)
    exact = lin[(lin.source == "head") & (lin.layer == 1) & (lin.target == "readout")]
    np.testing.assert_allclose(exact["path_effect"], exact["effect"], rtol=1e-4, atol=1e-4)  # linear: the same
    assert edges.compute(model, d, n_pairs=8, n_boot=10, check_top=0)["path_effect"].isna().all()


def test_edges_bad_input():
    from workbench.analysis import NotApplicable

    with pytest.raises(NotApplicable, match="trigger-distance"):
        edges.compute(task_model(), make_data(10), n_pairs=4)
