"""Self-repair: the parts add up to what ablation measures (the ablated logits of `ablation`'s own reference loop),
the direct part is the head's direct logit attribution and its path patch to the logits, nothing is repaired where
nothing is downstream; the table, the figure and bad input."""
import re

import numpy as np
import pytest
import torch

from workbench.analysis import ablation, dla, self_repair

from test_analysis import make_data
from test_attribution import linear_tail
from test_causal import task_model


def _margin(logits: torch.Tensor, y: torch.Tensor, against: torch.Tensor | None = None) -> torch.Tensor:
    at = lambda c: logits.gather(-1, c.expand(*logits.shape[:-1])[..., None])[..., 0]  # noqa: E731
    return at(y) - (logits.mean(-1) if against is None else at(against))


def _fill(model, mode: str, x: np.ndarray):
    if mode == "zero":
        return None
    if mode == "mean":
        return ablation.head_means(model, x)
    with torch.no_grad():  # resample: any other example's z is a fill (the identity does not need equal lengths)
        return ablation.partner_z(model, torch.as_tensor(np.roll(x, 1, 0)))


@pytest.mark.parametrize("arch, scheme, final_ln", [("paper", "rope", "after_pool"),
                                                    ("decoder", "alibi", "before_pool"), ("paper", "mla", "none")])
@pytest.mark.parametrize("mode", ablation.MODES)
def test_parts_add_up_to_what_ablation_measures(arch, scheme, final_ln, mode):
    """total is the margin's drop under `ablation`'s reference loop (one hooked forward a head), and direct less
    what later heads, MLPs and the final LayerNorm made up is total, example by example: every other component is
    upstream or a bias, so a decomposition that lost or double-counted a term would fail here."""
    model, d = task_model(arch=arch, scheme=scheme, final_ln=final_ln), make_data(n=10)
    tok, y = torch.as_tensor(d.test_x), torch.as_tensor(d.test_y)
    fill = _fill(model, mode, d.test_x)
    with torch.no_grad():
        res = self_repair.per_batch(model, tok, y, fill, measure="margin")
        clean, abl = ablation.ablated_logits_naive(model, tok, fill)
    total = (_margin(clean, y)[None, None] - _margin(abl, y)).double()
    np.testing.assert_allclose(res["total"], total, rtol=1e-4, atol=1e-5)
    made_up = res["via_heads"] + res["via_mlps"] + res["via_layernorm"]
    np.testing.assert_allclose(res["direct"] - made_up, res["total"], rtol=1e-4, atol=1e-5)
    assert res["self_repair"].abs().max() > 1e-3  # something downstream moves: the identity is not 0 = 0
    assert res["via_heads"][:-1].abs().max() > 1e-4 and res["via_mlps"].abs().max() > 1e-4
    if final_ln == "none":
        assert res["via_layernorm"].abs().max() == 0
    else:
        assert res["via_layernorm"].abs().max() > 1e-5


@pytest.mark.parametrize("mode", ["zero", "resample"])
def test_the_runner_up_measure_adds_up_to_the_ablated_logits_too(mode):
    """measure="runner_up": logit(label) - logit of the clean run's runner-up, held for the ablated runs; the same
    identity against `ablation`'s reference loop, and a different measure from the margin against the mean."""
    model, d = task_model(final_ln="after_pool"), make_data(n=10)
    tok, y = torch.as_tensor(d.test_x), torch.as_tensor(d.test_y)
    fill = _fill(model, mode, d.test_x)
    with torch.no_grad():
        res = self_repair.per_batch(model, tok, y, fill)  # the default measure
        clean, abl = ablation.ablated_logits_naive(model, tok, fill)
        runner = clean.scatter(1, y[:, None], float("-inf")).argmax(-1)
        mean = self_repair.per_batch(model, tok, y, fill, measure="margin")
    assert (runner != y).all()
    total = (_margin(clean, y, runner)[None, None] - _margin(abl, y, runner)).double()
    np.testing.assert_allclose(res["total"], total, rtol=1e-4, atol=1e-5)
    made_up = res["via_heads"] + res["via_mlps"] + res["via_layernorm"]
    np.testing.assert_allclose(res["direct"] - made_up, res["total"], rtol=1e-4, atol=1e-5)
    assert (res["total"] - mean["total"]).abs().max() > 1e-3
    df = self_repair.compute(model, d, n_examples=None, n_boot=0)
    assert (df["measure"] == "runner_up").all()  # the default
    with pytest.raises(ValueError, match="measure='logprob' is unknown"):
        self_repair.compute(model, d, measure="logprob")


@pytest.mark.parametrize("arch, final_ln", [("paper", "after_pool"), ("decoder", "before_pool")])
def test_direct_part_of_zero_ablation_is_the_heads_direct_logit_attribution(arch, final_ln):
    """Zeroing a head removes its direct term, so its direct part is `dla`'s dla_vs_mean, head by head."""
    model, d = task_model(arch=arch, final_ln=final_ln), make_data(n=40)
    got = self_repair.compute(model, d, n_examples=None, n_boot=0, measure="margin")
    ref = dla.compute(model, d, n_examples=None, n_boot=0)
    ref = ref[ref["component"] == "head"]
    np.testing.assert_allclose(got["direct"], ref["dla_vs_mean"], rtol=1e-4, atol=1e-6)
    assert got["direct"].abs().max() > 1e-3


def test_direct_part_is_the_path_patch_to_the_logits():
    """Without a final LayerNorm, the direct part of a mean ablation is the margin's drop when only the head's
    change of output, (mean z - z) W_O, is added to the last residual stream and nothing downstream is recomputed."""
    model, d = task_model(final_ln="none"), make_data(n=12)
    tok, y = torch.as_tensor(d.test_x), torch.as_tensor(d.test_y)
    means = ablation.head_means(model, d.test_x)
    last = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
    with torch.no_grad():
        res = self_repair.per_batch(model, tok, y, means, measure="margin")
        _, cache = model.run_with_cache(tok)
        clean = _margin(model(tok), y)
        for l, h in ((0, 1), (0, 3), (1, 2)):
            delta = (means[l, h] - cache[f"blocks.{l}.attn.hook_z"][:, :, h]) @ model.blocks[l].attn.W_O[h]
            patched = model.run_with_hooks(tok, fwd_hooks=[(last, lambda x, hook, dl=delta: x + dl)])
            np.testing.assert_allclose(res["direct"][l, h], (clean - _margin(patched, y)).double(), rtol=1e-4,
                                       atol=1e-6)


@pytest.mark.parametrize("arch", ["paper", "decoder"])
def test_nothing_is_repaired_where_nothing_is_downstream(arch):
    """The last layer's heads of a model with no final LayerNorm and a last MLP that writes nothing: total is
    direct and self-repair 0; the first layer's heads, with a layer above them, are repaired (or act through it)."""
    model, d = linear_tail(arch), make_data(n=30)
    df = self_repair.compute(model, d, n_examples=None, n_boot=0, min_direct=0.0)
    top = df[df["layer"] == model.cfg.n_layers - 1]
    np.testing.assert_allclose(top["total"], top["direct"], atol=1e-6)
    assert top[["self_repair", "via_heads", "via_mlps", "via_layernorm"]].abs().max().max() < 1e-6
    assert df.loc[df["layer"] == 0, "self_repair"].abs().max() > 1e-3


def test_table_intervals_shares_and_repairers():
    model, d = task_model(), make_data(n=80)
    L = model.cfg.n_layers
    cut = float(self_repair.compute(model, d, mode="mean", n_examples=None, n_boot=0)["direct"].abs().median())
    df = self_repair.compute(model, d, mode="mean", n_examples=None, n_boot=40, min_direct=cut)
    assert len(df) == L * model.cfg.n_heads and (df["mode"] == "mean").all() and (df["n_examples"] == 80).all()
    for p in self_repair.PARTS:
        assert (df[f"{p}_lo"] <= df[p] + 1e-12).all() and (df[p] <= df[f"{p}_hi"] + 1e-12).all(), p
    defined = df["direct"].abs() >= cut
    assert defined.any() and (~defined).any()
    assert df.loc[~defined, ["repaired", "repaired_lo", "repaired_hi"]].isna().all().all()
    ok = df[defined]
    np.testing.assert_allclose(ok["repaired"], ok["self_repair"] / ok["direct"], rtol=1e-9)
    for r in df.itertuples():  # the repairer is downstream: a head of a later layer or an MLP of this layer on
        m = re.fullmatch(r"L(\d+)\.H\d+|mlp L(\d+)", r.top_component)
        assert m and (int(m[1]) > r.layer if m[1] else int(m[2]) >= r.layer), r
    assert (df.loc[df["layer"] == L - 1, "top_component"] == f"mlp L{L - 1}").all()
    resampled = self_repair.compute(model, d, mode="resample", n_examples=None, n_boot=10)
    assert 0 < resampled["n_examples"].iloc[0] <= 80


def test_figure_has_its_traces():
    from workbench.figures import FIGURES

    df = self_repair.compute(task_model(), make_data(n=30), n_examples=None, n_boot=20)
    fig = FIGURES["self_repair"](df, top=5)
    assert len(fig.data) == 6  # the heads of each of 2 layers, the no-repair line, three stacked parts
    assert sum(len(t.x) for t in fig.data[:2]) == len(df) and [len(t.y) for t in fig.data[3:]] == [5, 5, 5]
    assert fig.data[2].meta == {"baseline": "no self-repair"} and fig.data[0].name == "layer 0"
    assert "minus the clean run's runner-up" in fig.layout.title.text  # the table's measure
    fig.to_json()


def test_bad_input_says_what_to_change():
    model, d = task_model(), make_data(n=20)
    with pytest.raises(ValueError, match="mode='ones' is unknown"):
        self_repair.compute(model, d, mode="ones")
    with pytest.raises(ValueError, match="needs labels"):
        self_repair.compute(model, (d.test_x, None))
    with pytest.raises(ValueError, match="min_direct"):
        self_repair.compute(model, d, min_direct=-1)
    x = np.zeros((5, 16), np.int64)
    for i in range(5):  # every length once
        x[i, :i + 3] = 7
    with pytest.raises(ValueError, match="share a length"):
        self_repair.compute(model, (x, np.zeros(5, np.int64)), mode="resample")
    with pytest.raises(ValueError, match="labels up to 40"):
        self_repair.compute(model, (d.test_x, np.full(20, 40)))


def test_shares_add_up_to_one_and_the_experiment_compares_runs():
    """Of the heads' summed |direct effect|: the share their ablations still show plus the shares made up add up
    to 1 (direct - total = the parts, head by head); run by run, four rows a run with the table, others left out."""
    from types import SimpleNamespace

    from workbench.analysis import NotApplicable
    from workbench.analysis.experiments import self_repair_shares
    from workbench.figures import FIGURES

    df = self_repair.compute(task_model(), make_data(n=40), n_examples=None, n_boot=0)
    sh = self_repair.shares(df)
    assert list(sh["part"]) == list(self_repair.SHARES) and sh["share"].sum() == pytest.approx(1.0, abs=1e-9)
    assert sh["sum_direct"].iloc[0] == pytest.approx(df["direct"].abs().sum())
    kept = (np.sign(df["direct"]) * df["total"]).sum() / df["direct"].abs().sum()
    assert sh.loc[sh["part"] == "kept", "share"].item() == pytest.approx(kept)

    def fake(rid, scheme, tables, final=None):
        return SimpleNamespace(id=rid, config={"model": {"scheme": scheme}, "task": {"task": "trigger-distance"},
                                               "train": {"seed": 1}},
                               final=final or {}, info={}, tables=lambda: list(tables), load_table=lambda n: tables[n])

    runs = [fake("a", "rope", {"self_repair": df}, {"test_acc": 0.16}), fake("b", "nope", {}),
            fake("c", "alibi", {"self_repair": df})]
    out = self_repair_shares(runs=runs)
    assert list(dict.fromkeys(out["run_id"])) == ["a", "c"] and len(out) == 8
    assert out.loc[out["run_id"] == "a", "label"].iloc[0].endswith("· test 16%")  # a run that did not learn shows it
    assert "test" not in out.loc[out["run_id"] == "c", "label"].iloc[0]  # no accuracy recorded: none said
    fig = FIGURES["self_repair_shares"](out)
    assert len(fig.data) == 4 and all(len(t.y) == 2 for t in fig.data)
    assert sh["sum_total"].iloc[0] == pytest.approx(df["total"].abs().sum())
    # a run whose ablations move the margin far more than its heads write directly is named: its shares say little
    flagged = out.assign(sum_total=np.where(out["run_id"] == "c", 10 * out["sum_direct"], out["sum_direct"]))
    title = FIGURES["self_repair_shares"](flagged).layout.title.text
    assert "read little into their shares" in title and "alibi" in title.split("shares")[-1]
    assert "rope" not in title.split("shares)")[-1]
    with pytest.raises(NotApplicable, match="--what self-repair"):
        self_repair_shares(runs=runs[1:2])


def test_the_mean_fill_is_each_heads_z_averaged_over_the_real_tokens():
    """`head_means`, checked against one cached forward of the whole padded batch: every head's hook_z averaged over
    the non-pad tokens of all examples (a batch size that splits the data, so per-batch means weighted wrong would
    show; a mean that counted pads would be pulled towards the pads' z)."""
    model, d = task_model(), make_data(n=10)
    assert (d.test_x == 0).any()  # padded examples
    tok = torch.as_tensor(d.test_x)
    with torch.no_grad():
        _, cache = model.run_with_cache(tok)
    real = (tok != 0)
    want = torch.stack([cache[f"blocks.{l}.attn.hook_z"][real].double().mean(0)
                        for l in range(model.cfg.n_layers)]).float()  # [layer, head, d_head]
    torch.testing.assert_close(ablation.head_means(model, d.test_x, batch_size=3), want, rtol=1e-5, atol=1e-6)
