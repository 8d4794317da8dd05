"""Queries, keys and values: AtP* (the pattern recomputed) is the real patch where the path past the pattern is
linear, and plain AtP is not there; the linear estimate is the derivative of the patch; the real patch is the
patch of the rotated vectors; known answers and the table."""
import numpy as np
import pytest
import torch

from workbench.analysis import patching, qkv
from workbench.analysis.patching import SETS

from test_analysis import make_data
from test_attribution import linear_tail, patch_slope
from test_causal import task_data, task_model


def _real(model, pairs, batch_size=5):
    """Every (site, layer, head, set) patched for real: [L, 3, n_sets, H, N] LD shifts."""
    cfg = model.cfg
    chosen = [(site, l, h, j) for l in range(cfg.n_layers) for site in qkv.SITES for j in range(len(SETS))
              for h in range(cfg.n_heads)]
    out = qkv.patch_per_pair(model, pairs, chosen, batch_size=batch_size)
    return out.reshape(cfg.n_layers, len(qkv.SITES), len(SETS), cfg.n_heads, len(pairs))


@pytest.mark.parametrize("arch, scheme", [("paper", "rope"), ("decoder", "alibi")])
def test_atp_star_is_the_real_patch_where_the_path_past_the_pattern_is_linear(arch, scheme):
    """Last layer of a linear tail: AtP* of queries and keys equals their real patch pair by pair (the softmax
    recomputed, the rest linear), plain AtP does not (first order through the softmax); values: both equal it."""
    model, d = linear_tail(arch) if scheme == "rope" else _linear_tail_with(arch, scheme), task_data()
    pairs = patching.pairs_for(d, 10, seed=3)
    est = qkv.per_pair(model, pairs, batch_size=4)
    real = _real(model, pairs)
    last = model.cfg.n_layers - 1
    np.testing.assert_allclose(est["atp_star"][last], real[last], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(est["atp"][last, 2], real[last, 2], rtol=1e-4, atol=1e-5)  # values: linear
    assert np.abs(real[last, :2]).max() > 1e-2  # the query and key patches move LD
    assert np.abs(est["atp"][last, :2] - real[last, :2]).max() > 1e-3  # the linear term misses through the softmax
    assert np.abs(est["atp_star"][0] - real[0]).max() > 1e-4  # below: first order past the pattern


def _linear_tail_with(arch, scheme):
    model = task_model(arch=arch, scheme=scheme, final_ln="none")
    with torch.no_grad():
        model.blocks[-1].mlp.fc_out.weight.zero_()
        model.blocks[-1].mlp.fc_out.bias.zero_()
    return model


def test_linear_estimate_is_the_derivative_of_the_patch():
    """Patching a fraction t of the counterfactual's q, k or v moves LD by t x the linear estimate as t -> 0
    (central differences, float64)."""
    model, d = task_model().double(), task_data()
    pairs = patching.pairs_for(d, 8, seed=1)
    est = qkv.per_pair(model, pairs, batch_size=8)
    for layer, i, head in ((0, 0, 1), (0, 1, 2), (1, 1, 0), (0, 2, 3)):
        name = f"blocks.{layer}.attn.hook_{'qkv'[i]}"
        for s in range(len(SETS)):
            np.testing.assert_allclose(est["atp"][layer, i, s, head], patch_slope(model, pairs, name, head, s),
                                       rtol=1e-5, atol=1e-7)
        assert np.abs(est["atp"][layer, i, :, head]).max() > 1e-4


def test_real_patch_is_the_patch_of_the_rotated_vectors():
    """RoPE rotates each position on its own, so replacing a head's pre-rotation q (k) at a set of positions is
    replacing its rotated q (k) there: `patched` equals that patch done at hook_rot_q / hook_rot_k by hand."""
    model, d = task_model(arch="decoder"), task_data()
    pairs = patching.pairs_for(d, 9, seed=5)
    clean, cf = torch.as_tensor(pairs.clean_x), torch.as_tensor(pairs.cf_x)
    trig = torch.as_tensor(pairs.trigger_mask)
    y, y_cf = torch.as_tensor(pairs.clean_y), torch.as_tensor(pairs.cf_y)
    chosen = [("query", 1, 2, 0), ("key", 0, 3, 1), ("key", 1, 1, 2), ("query", 0, 0, 1)]
    got = qkv.patched(model, clean, cf, trig, y, y_cf, chosen)
    _, cache = model.run_with_cache(cf)
    sets = patching.position_masks(trig, clean).bool()
    r = torch.arange(len(pairs))
    with torch.no_grad():
        base = model(clean)
    for (site, l, h, j), g in zip(chosen, got):
        name = f"blocks.{l}.attn.hook_rot_{'q' if site == 'query' else 'k'}"

        def swap(a, hook):
            a = a.clone()
            a[:, :, h][sets[j]] = cache[name][:, :, h][sets[j]]
            return a
        with torch.no_grad():
            lg = model.run_with_hooks(clean, fwd_hooks=[(name, swap)])
        want = (lg[r, y_cf] - lg[r, y]) - (base[r, y_cf] - base[r, y])
        np.testing.assert_allclose(g.numpy(), want.double().numpy(), rtol=1e-5, atol=1e-6)
        assert np.abs(want.numpy()).max() > 1e-4


def test_table_known_answers_and_check():
    """A head with W_O = 0 has every effect 0, estimated and real; the top rows are patched for real, the rest
    not; MLA (rotary and content dims, a shared rotary key) runs."""
    model = task_model()
    with torch.no_grad():
        model.blocks[0].attn.W_O[1] = 0.0
    df = qkv.compute(model, task_data(), n_pairs=16, n_boot=40, check_per_site=2)
    assert len(df) == 2 * 3 * 3 * 4 and df["note"].eq("").all()
    dead = df[(df.layer == 0) & (df["head"] == 1)]
    np.testing.assert_allclose(dead[["effect", "atp"]].to_numpy(float), 0.0, atol=1e-7)
    checked = df[df["patch_effect"].notna()]
    want = {i for site in qkv.SITES for i in df[df.site == site]["effect"].abs().nlargest(2).index}
    assert len(checked) == 6 and set(checked.index) == want  # the two largest of each site
    assert checked["in_patch_ci"].isin([0.0, 1.0]).all() and checked["atp_in_patch_ci"].isin([0.0, 1.0]).all()
    for est, flag in (("effect", "in_patch_ci"), ("atp", "atp_in_patch_ci")):  # the flag is what it says
        inside = (checked[est] >= checked["patch_lo"] - 1e-5) & (checked[est] <= checked["patch_hi"] + 1e-5)
        assert checked[flag].tolist() == inside.astype(float).tolist(), flag
    assert df.loc[df["patch_effect"].isna(), "in_patch_ci"].isna().all()
    assert (df["ci_lo"] <= df["ci_hi"]).all() and (df["atp_lo"] <= df["atp_hi"]).all()
    v = df[df.site == "value"]
    np.testing.assert_allclose(v["effect"], v["atp"])
    mla = qkv.compute(task_model("trigger-count", "paper", "mla"), task_data("trigger-count"), n_pairs=8,
                      n_boot=20, check_per_site=1)
    assert mla["effect"].notna().all() and mla["patch_effect"].notna().sum() == 3


def test_bad_input():
    from workbench.analysis import NotApplicable

    with pytest.raises(NotApplicable, match="trigger-distance"):
        qkv.compute(task_model(), make_data(10), n_pairs=4)
    with pytest.raises(ValueError, match="classes"):
        qkv.compute(task_model(n_classes=5), task_data(), n_pairs=4)


def test_figure_checked_and_not():
    """The figure: heads x (query, key, value) heatmap, with AtP* and AtP against the real patch and the equal line
    when rows were checked (4 traces), the heatmap alone when none was (1)."""
    from workbench.figures import FIGURES

    df = qkv.compute(task_model(), task_data(), n_pairs=12, n_boot=20, check_per_site=2)
    fig = FIGURES["qkv"](df)
    assert len(fig.data) == 4 and list(fig.data[0].x) == ["query", "key", "value"]
    assert len(fig.data[0].y) == 2 * 4 and "of 6 AtP* and" in fig.layout.title.text
    bare = FIGURES["qkv"](qkv.compute(task_model(), task_data(), n_pairs=12, n_boot=20, check_per_site=0))
    assert len(bare.data) == 1 and "not checked" in bare.layout.title.text


def test_agreement_summary():
    """Per site over the checked rows: counts inside each interval and the largest miss, as the table has them."""
    df = qkv.compute(linear_tail("decoder"), task_data(), n_pairs=12, n_boot=20, check_per_site=10)
    a = qkv.agreement(df).set_index("site")
    c = df[df["patch_effect"].notna()]
    assert a["checked"].sum() == 30 and list(a["checked"]) == [10, 10, 10]
    for site, sub in c.groupby("site"):
        assert a.at[site, "atp_star_inside"] == int(sub["in_patch_ci"].sum())
        assert a.at[site, "atp_max_miss"] == pytest.approx((sub["atp"] - sub["patch_effect"]).abs().max())
    sh = qkv.shares(df).set_index("site")
    assert sh["share"].sum() == pytest.approx(1.0) and list(sh.index) == list(qkv.SITES)
    v = df[(df.site == "value") & (df.positions == "all")]
    assert sh.at["value", "total"] == pytest.approx(v["effect"].abs().sum())
    assert sh.at["value", "top_effect"] == pytest.approx(v.loc[v["effect"].abs().idxmax(), "effect"])
    assert "of 30 AtP* and" in qkv.check_line(df) and "not checked" in qkv.check_line(df.assign(patch_effect=np.nan))


def test_head_summary_shows_the_split_without_a_vote():
    """The head summary carries each head's AtP* through its queries, keys and values (all positions) and its card
    shows them; they vote for nothing (qkv estimates what patching measures, split by input)."""
    from workbench.analysis import head_summary
    from workbench.figures import FIGURES

    model, d = task_model(), task_data()
    ref = patching.compute(model, d, n_pairs=12, n_boot=20)
    split = qkv.compute(model, d, n_pairs=12, n_boot=20, check_per_site=0)
    s = head_summary.compute({"patching": ref, "qkv": split}).set_index(["layer", "head"])
    for site in qkv.SITES:
        want = split.query("site == @site and positions == 'all'").set_index(["layer", "head"])
        np.testing.assert_allclose(s[f"via_{site}"].loc[want.index], want["effect"])
        np.testing.assert_allclose(s[f"via_{site}_lo"].loc[want.index], want["ci_lo"])
    assert (s["n_methods"] == 1).all() and "qkv" in s["sources"].iloc[0]
    card = FIGURES["head_card"](s.reset_index(), layer=1, head=2)
    assert {"AtP* through its queries", "AtP* through its keys", "AtP* through its values"} <= set(card.data[0].y)
    assert len(FIGURES["head_summary"](s.reset_index(), measure="via_key").data) == 3
    # a summary made before qkv (or a shipped one, from before the columns) says what to compute for the map
    older = head_summary.compute({"patching": ref})
    for frame in (older, older.drop(columns=["via_key"])):
        with pytest.raises(ValueError, match="compute qkv for the run, then head_summary again"):
            FIGURES["head_summary"](frame, measure="via_key")
    with pytest.raises(ValueError, match="not a head-summary column"):
        FIGURES["head_summary"](older, measure="bogus")


def test_shares_run_by_run():
    """The cross-run table: three rows a run with a qkv table (shares summing to 1), runs without one left out,
    an undefined run named in the figure; none with the table: NotApplicable naming the command."""
    from types import SimpleNamespace

    from workbench.analysis import NotApplicable, experiments
    from workbench.figures import FIGURES

    split = qkv.compute(task_model(), task_data(), n_pairs=12, n_boot=20, check_per_site=0)
    undefined = split.assign(effect=np.nan, note=patching.UNDEFINED)

    def run(rid, scheme, table):
        saved = {"qkv": table} if table is not None else {}
        return SimpleNamespace(id=rid, config={"model": {"scheme": scheme}, "task": {"task": "trigger-distance"},
                                               "train": {"seed": 1}}, tables=lambda: list(saved),
                               load_table=lambda name: saved[name])

    runs = [run("a", "rope", split), run("b", "nope", undefined), run("c", "mla", None)]
    t = experiments.qkv_shares(runs=runs)
    assert (t["measure"] == "AtP*").all() and not qkv.exact(split)
    assert list(dict.fromkeys(t["run_id"])) == ["a", "b"] and len(t) == 6
    assert t[t.run_id == "a"]["share"].sum() == pytest.approx(1.0) and t[t.run_id == "b"]["share"].isna().all()
    assert (t[t.run_id == "b"]["note"] == patching.UNDEFINED).all()
    fig = FIGURES["qkv_shares"](t)
    assert len(fig.data) == 3 and list(fig.data[0].y) == [t.loc[t.run_id == "a", "label"].iloc[0] + " (AtP*)"]
    assert [tr.name for tr in fig.data] == ["through its queries", "through its keys", "through its values"]
    assert "undefined" in fig.layout.title.text and "nope" in fig.layout.title.text.lower()
    with pytest.raises(NotApplicable, match="--what qkv"):
        experiments.qkv_shares(runs=runs[2:])
    # every row patched (check_per_site=None): the shares are the real patches'
    full = qkv.compute(task_model(), task_data(), n_pairs=12, n_boot=20, check_per_site=None)
    assert full["patch_effect"].notna().all() and qkv.exact(full)
    real = experiments.qkv_shares(runs=[run("d", "rope", full)]).set_index("site")
    assert (real["measure"] == "real patch").all()
    v = full[(full.site == "value") & (full.positions == "all")]
    assert real.at["value", "total"] == pytest.approx(v["patch_effect"].abs().sum())
    fig = FIGURES["qkv"](full)  # the exact table's map shows the real patches
    assert fig.layout.annotations[0].text.startswith("real patch")
    assert np.nanmax(np.abs(np.asarray(fig.data[0].z, float))) == pytest.approx(
        full.loc[full.positions == "all", "patch_effect"].abs().max())


def test_report_says_an_unreadable_qkv_table_and_goes_on():
    """The Heads section's run-by-run figure over a run whose qkv table cannot be read: an error line in the
    report (and its problems), no exception, the rest of the section written."""
    from types import SimpleNamespace

    from workbench.report.build import Doc
    from workbench.report.heads import heads_section

    def unreadable(name):
        raise OSError("truncated parquet")

    run = SimpleNamespace(id="r1", config={"model": {"scheme": "rope"}, "task": {"task": "trigger-distance"}},
                          tables=lambda: ["qkv"], load_table=unreadable)
    doc, summary = Doc(), {}
    heads_section(doc, SimpleNamespace(get=lambda rid: run), [{"id": "r1", "tables": {"present": ["qkv"]}}], summary)
    assert any("qkv_shares over r1" in p and "truncated parquet" in p for p in doc.problems)
    assert not doc.figures and "</section>" in doc.parts[-1] and "no head summary yet" in "".join(doc.parts)
