"""The authors' settings (docs/paper.md §7, docs/fidelity.md): each fact is checked on a tiny model, and the two
released forward passes are re-implemented here from docs/paper.md §7 (not from PE-Lab's model code) and fed
PE-Lab's weights: the logits must agree to 1e-5."""
import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from synthetic_tasks import get_spec
from synthetic_tasks.generators import dedup, generate
from workbench.cli import app
from workbench.model import ModelConfig, PEClassifier
from workbench.model.pe.alibi import alibi_slopes
from workbench.model.pe.sinusoidal import sinusoid_table
from workbench.store import RunStore, config_hash, run_id_for
from workbench.train import base_config, grid_points, resolve_config, train
from workbench.train.loop import counted_loss, evaluate

TINY = dict(vocab_size=24, n_classes=6, d_model=32, n_heads=4, d_ff=48, n_layers=2, max_len=16, dropout=0.0)


def fidelity_model(scheme, fidelity, **kw):
    """A tiny model whose config went through the named fidelity's resolution (no I/O)."""
    cfg = base_config("smoke", scheme, "trigger-distance", fidelity=fidelity)["model"]
    cfg.update(TINY | {"seed": 1} | kw)
    model = PEClassifier(ModelConfig.from_dict(cfg)).eval()
    with torch.no_grad():  # move every weight away from its init so LayerNorm, biases, zero-init PE all count
        g = torch.Generator().manual_seed(5)
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model


def tokens(n=4, seq=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(1, 24, (n, seq), generator=g)
    for i, keep in enumerate([16, 9, 5, 12][:n]):
        t[i, keep:] = 0
    return t


# ---- the transformer script's facts, one at a time ---------------------------------------------------------
def test_pad_token_changes_the_output_only_when_unmasked():
    t = tokens()
    for mask, moves in ((True, False), (False, True)):
        model = PEClassifier(ModelConfig(scheme="rope", pad_trained=True, attn_pad_mask=mask, **TINY)).eval()
        before = model(t)
        with torch.no_grad():
            model.embed.weight[0] += 1.0  # a different PAD embedding
        after = model(t)
        assert (not torch.allclose(before[1:], after[1:], atol=1e-6)) == moves, mask
        torch.testing.assert_close(before[0], after[0])  # row 0 has no pad at all


def test_pooled_mean_includes_pads_with_readout_include_pad():
    t = tokens()
    model = PEClassifier(ModelConfig(scheme="nope", readout_include_pad=True, final_ln="none", **TINY)).eval()
    _, cache = model.run_with_cache(t)
    torch.testing.assert_close(cache["hook_readout"], cache["blocks.1.hook_resid_post"].mean(1))
    masked = PEClassifier(ModelConfig(scheme="nope", **TINY)).eval()
    _, cache = masked.run_with_cache(t)
    torch.testing.assert_close(cache["hook_readout"][2], cache["blocks.1.hook_resid_post"][2, :5].mean(0))
    assert not model.cfg.pads_are_inert and masked.cfg.pads_are_inert


def test_pad_embedding_is_trained_only_with_pad_trained():
    t = tokens()
    for trained in (False, True):
        model = PEClassifier(ModelConfig(scheme="nope", pad_trained=trained, attn_pad_mask=False, **TINY))
        assert (model.embed.weight[0].abs().sum() > 0) == trained
        model.loss(t, torch.tensor([1, 2, 3, 4])).backward()
        assert (model.embed.weight.grad[0].abs().sum() > 0) == trained


@pytest.mark.parametrize("final_ln", ["none", "before_pool", "after_pool"])
def test_final_layernorm_placement(final_ln):
    t = tokens()
    model = PEClassifier(ModelConfig(scheme="nope", final_ln=final_ln, unembed_vocab=True, **TINY)).eval()
    out, cache = model.run_with_cache(t)
    x, keep = cache["blocks.1.hook_resid_post"], (t != 0).float()[..., None]
    ln = lambda v: F.layer_norm(v, (32,))  # noqa: E731  (weights are the LayerNorm init: 1, 0)
    mean = lambda v: (v * keep).sum(1) / keep.sum(1)  # noqa: E731
    pooled = {"none": mean(x), "before_pool": mean(ln(x)), "after_pool": ln(mean(x))}[final_ln]
    torch.testing.assert_close(out, model.unembed(pooled), atol=1e-5, rtol=1e-5)
    assert out.shape == (4, 24)  # unembed_vocab: one output per vocabulary id


def test_label_zero_examples_contribute_nothing_to_loss_or_accuracy():
    logits = torch.randn(6, 5, requires_grad=True)
    y = torch.tensor([0, 1, 0, 2, 3, 0])
    loss_sum, correct, counted = counted_loss(logits, y, 0)
    assert counted.item() == 3
    loss_sum.backward()
    assert logits.grad[y == 0].abs().sum() == 0 and logits.grad[y != 0].abs().sum() > 0
    torch.testing.assert_close(loss_sum / counted, F.cross_entropy(logits, y, ignore_index=0))
    # evaluate(): accuracy over label != 0 only; a model that gets exactly the label-0 examples wrong scores 1.0
    class Oracle(torch.nn.Module):
        def forward(self, x):
            return F.one_hot(torch.where(x[:, 0] == 0, 4, x[:, 0]), 5).float() * 10

    x = y[:, None].clone()
    assert evaluate(Oracle(), x, y, 4, False, ignore_label=0)[1] == 1.0
    assert evaluate(Oracle(), x, y, 4, False)[1] == 0.5


def test_authors_input_encodings():
    pos, d = np.arange(10)[:, None], 8
    w = 10000.0 ** (-np.arange(0, d, 2) / d)
    concat = np.concatenate([np.sin(pos * w), np.cos(pos * w)], 1)
    np.testing.assert_allclose(sinusoid_table(10, d, layout="concat"), concat)
    inter = np.stack([np.sin(pos * w), np.cos(pos * w)], -1).reshape(10, d)  # sin even, cos odd: "absolute"
    np.testing.assert_allclose(sinusoid_table(10, d), inter)
    model = fidelity_model("rope", "authors")
    assert model.cfg.scheme == "rope+sinusoidal" and model.cfg.scheme_kwargs == {"layout": "concat"}
    _, cache = model.run_with_cache(tokens())
    w32 = 10000.0 ** (-np.arange(0, 32, 2) / 32)
    expect = np.concatenate([np.sin(np.arange(16)[:, None] * w32), np.cos(np.arange(16)[:, None] * w32)], 1)
    np.testing.assert_allclose(cache["hook_pos_embed"][0].numpy(), expect, atol=1e-6)


def test_alibi_slopes_paper_and_reference():
    torch.testing.assert_close(alibi_slopes(16, "paper"), torch.exp(-torch.arange(16.0) / 16))
    assert alibi_slopes(16, "paper")[0] == 1.0
    for h in (1, 2, 4, 8, 16):  # powers of two: the reference recipe is PE-Lab's geometric slopes
        torch.testing.assert_close(alibi_slopes(h, "reference"), alibi_slopes(h, "geometric"))
    # 12 heads: the 8-head slopes 2^-1..2^-8, then every other 16-head slope 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
    expect = [2.0 ** -k for k in range(1, 9)] + [2.0 ** -(k + 0.5) for k in range(4)]
    torch.testing.assert_close(alibi_slopes(12, "reference"), torch.tensor(expect))
    assert fidelity_model("alibi", "authors").cfg.scheme_kwargs == {"slopes": "paper"}


def test_relative_bias_table_is_normal_002():
    cfg = ModelConfig(scheme="relative", **(TINY | {"max_len": 128, "n_heads": 16, "d_model": 64}))
    table = PEClassifier(cfg).blocks[0].attn.rel_bias
    assert table.shape == (16, 255) and abs(table.std().item() - 0.02) < 0.002 and abs(table.mean().item()) < 0.002


# ---- the MLA script's facts ------------------------------------------------------------------------------------
def mla(**kw):
    return PEClassifier(ModelConfig(scheme="mla", arch="encoder", scheme_kwargs=kw, **TINY)).eval()


def test_mla_shared_rotary_query_is_identical_across_heads():
    t = tokens()
    for shared in (True, False):
        _, cache = mla(shared_rope_q=shared, d_rope=8).run_with_cache(t)
        q_r = cache["blocks.0.attn.hook_q"][..., 8:]  # [b, p, head, d_rope]
        same = torch.allclose(q_r, q_r[:, :, :1].expand_as(q_r))
        assert same == shared


def test_authors_rotary_read_is_not_norm_preserving_pelab_is():
    t = tokens()
    for read, preserved in (("rotation", True), ("authors", False)):
        _, cache = mla(rope_read=read, d_rope=8).run_with_cache(t)
        before, after = cache["blocks.0.attn.hook_k"][..., 8:], cache["blocks.0.attn.hook_rot_k"][..., 8:]
        ok = torch.allclose(before.norm(dim=-1), after.norm(dim=-1), atol=1e-5)
        assert ok == preserved, read


def test_mla_score_scale_and_zero_init_position_embedding():
    t = tokens()
    model = mla(score_scale_dim=16, input_pe="learned-zero", d_rope=8)
    assert model.pos_embed.W_pos.abs().sum() == 0 and model.pos_embed.W_pos.requires_grad
    _, cache = model.run_with_cache(t)
    q, k = cache["blocks.0.attn.hook_rot_q"], cache["blocks.0.attn.hook_rot_k"]
    s = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(16)
    real = (t != 0)[:, None, None, :]
    torch.testing.assert_close(cache["blocks.0.attn.hook_attn_scores"].masked_select(real.expand_as(s)),
                               s.masked_select(real.expand_as(s)), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="rope_read"):
        ModelConfig(scheme="rope", scheme_kwargs={"rope_read": "authors"}, **TINY)


# ---- independent re-implementations of the two released forward passes ------------------------------------
def _ln(x, ln):
    return F.layer_norm(x, x.shape[-1:], ln.weight, ln.bias)


def authors_transformer_forward(model, tok, kind):
    """docs/paper.md §7, transformer script: x = E[t] + PE (no padding index); keys/values from the embedded input
    M at every layer; no mask; RoPE on interleaved pairs per head; softmax(q k / sqrt(dh) + bias) v; x += out;
    x += FFN_relu(LN2 x); mean over all positions; linear layer (vocab outputs); no final LayerNorm."""
    B, N = tok.shape
    d, H = model.cfg.d_model, model.cfg.n_heads
    dh = d // H
    pos = torch.arange(N, dtype=torch.float32)[:, None]
    x = model.embed.weight[tok]
    if kind in ("rope", "absolute"):
        w = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
        if kind == "rope":
            x = x + torch.cat([torch.sin(pos * w), torch.cos(pos * w)], -1)
        else:
            pe = torch.zeros(N, d)
            pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * w), torch.cos(pos * w)
            x = x + pe
    if kind == "random":
        x = x + model.pos_embed.W_pos[:N]
    M = x
    for blk in model.blocks:
        a = blk.attn
        q = torch.einsum("bpd,hde->bhpe", _ln(x, blk.ln1), a.W_Q) + a.b_Q[None, :, None]
        k = torch.einsum("bpd,hde->bhpe", M, a.W_K) + a.b_K[None, :, None]
        v = torch.einsum("bpd,hde->bhpe", M, a.W_V) + a.b_V[None, :, None]
        if kind == "rope":
            ang = pos * 10000.0 ** (-torch.arange(0, dh, 2, dtype=torch.float32) / dh)  # [N, dh/2]
            def rot(t):
                t2 = t.reshape(B, H, N, dh // 2, 2)
                return torch.stack([t2[..., 0] * ang.cos() - t2[..., 1] * ang.sin(),
                                    t2[..., 0] * ang.sin() + t2[..., 1] * ang.cos()], -1).reshape(B, H, N, dh)
            q, k = rot(q), rot(k)
        s = (q / math.sqrt(dh)) @ k.transpose(-1, -2)
        rel = torch.arange(N)[None, :] - torch.arange(N)[:, None]  # j - i
        if kind == "alibi":
            s = s - torch.exp(-torch.arange(H, dtype=torch.float32) / H)[:, None, None] * rel.abs()
        if kind == "relative":
            s = s + a.rel_bias[:, rel + model.cfg.max_len - 1]
        z = torch.softmax(s, -1) @ v  # [B, H, N, dh]
        x = x + torch.einsum("bhpe,hed->bpd", z, a.W_O) + a.b_O
        f = blk.mlp
        x = x + f.fc_out(torch.relu(f.fc_in(_ln(x, blk.ln2))))
    return model.unembed(x.mean(1))


@pytest.mark.parametrize("scheme, kind", [("rope", "rope"), ("sinusoidal", "absolute"), ("alibi", "alibi"),
                                          ("relative", "relative"), ("learned", "random"), ("random", "random"),
                                          ("nope", "nope")])
def test_authors_transformer_forward_matches_independent_reimplementation(scheme, kind):
    model = fidelity_model(scheme, "authors")
    t = tokens()
    with torch.no_grad():
        ours, theirs = model(t), authors_transformer_forward(model, t, kind)
        explicit, _ = model.run_with_cache(t)
    assert ours.shape == (4, 24)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, theirs, atol=1e-5, rtol=1e-5)


def authors_mla_forward(model, tok):
    """docs/paper.md §7, MLA script: pre-LN encoder on x = E[t] + P (trained, zero-init position table); per layer,
    from h = LN1(x): c_kv = h W_DKV, k_c = c_kv W_UK, v = c_kv W_UV, k_r = rope(h W_KR) shared by heads,
    c_q = h W_DQ, q_c = c_q W_UQ, q_r = rope(c_q W_QR) ONE vector shared by heads; rope reads sin = T[0::2],
    cos = T[1::2] from T = [sin(p theta) ; cos(p theta)] and writes [evens ; odds]; scores q.k / sqrt(2 dh) with
    pad keys masked; no attention biases; x += FFN_gelu(LN2 x); LN_f on every position, masked mean, linear."""
    B, N = tok.shape
    d, H = model.cfg.d_model, model.cfg.n_heads
    dh = d // H
    x = model.embed.weight[tok] + model.pos_embed.W_pos[:N]
    pos = torch.arange(N, dtype=torch.float32)[:, None]
    theta = 10000.0 ** (-torch.arange(0, dh, 2, dtype=torch.float32) / dh)
    table = torch.cat([torch.sin(pos * theta), torch.cos(pos * theta)], -1)  # [N, dh]
    sin, cos = table[:, 0::2], table[:, 1::2]

    def rope(t):  # [..., N, dh]
        e, o = t[..., 0::2], t[..., 1::2]
        return torch.cat([e * cos - o * sin, e * sin + o * cos], -1)

    keep = tok != 0
    for blk in model.blocks:
        a = blk.attn
        h = _ln(x, blk.ln1)
        c_kv, c_q = h @ a.W_DKV, h @ a.W_DQ
        k_c = torch.einsum("bpc,hce->bhpe", c_kv, a.W_UK)
        v = torch.einsum("bpc,hce->bhpe", c_kv, a.W_UV)
        q_c = torch.einsum("bpc,hce->bhpe", c_q, a.W_UQ)
        k_r = rope(h @ a.W_KR)[:, None].expand(B, H, N, dh)
        q_r = rope(c_q @ a.W_QR)[:, None].expand(B, H, N, dh)
        q, k = torch.cat([q_c, q_r], -1), torch.cat([k_c, k_r], -1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(2 * dh)
        s = s.masked_fill(~keep[:, None, None, :], float("-inf"))
        z = torch.softmax(s, -1) @ v
        x = x + torch.einsum("bhpe,hed->bpd", z, a.W_O)
        f = blk.mlp
        x = x + f.fc_out(F.gelu(f.fc_in(_ln(x, blk.ln2))))
    x = _ln(x, model.ln_final)
    w = keep.float()[..., None]
    return model.unembed((x * w).sum(1) / w.sum(1))


def test_authors_mla_forward_matches_independent_reimplementation():
    model = fidelity_model("mla", "authors-mla")
    cfg = model.cfg
    assert cfg.arch == "encoder" and not cfg.attn_bias and cfg.dropout_sites == ["mlp_hidden", "mlp_out"]
    assert not any(n.endswith(("b_O", "b_Q", "b_K", "b_V")) for n, _ in model.named_parameters())
    t = tokens()
    with torch.no_grad():
        ours, theirs = model(t), authors_mla_forward(model, t)
        explicit, _ = model.run_with_cache(t)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, theirs, atol=1e-5, rtol=1e-5)


def test_dropout_sites():
    cfg = ModelConfig(scheme="nope", **(TINY | {"dropout": 0.5, "dropout_sites": ["mlp_hidden", "mlp_out"]}))
    model = PEClassifier(cfg).train()
    assert model.blocks[0].attn.attn_dropout.p == 0 and model.blocks[0].drop_attn.p == 0
    assert model.blocks[0].mlp.drop_hidden.p == 0.5 and model.blocks[0].drop_mlp.p == 0.5
    assert model.blocks[0].attn.fast_path_ok()  # no attention dropout: the fused kernel may run while training


# ---- data -------------------------------------------------------------------------------------------------------
def test_authors_task1_data():
    spec = get_spec("trigger-distance", "smoke", sampling="authors", filler_includes_triggers=True)
    ds = generate(spec)
    x = np.concatenate([ds.train_x, ds.test_x])
    w1, w2 = ds.trigger_ids
    assert len(dedup(x, np.zeros(len(x)))[0]) == len(x)  # duplicates removed
    triggers_as_filler = 0
    for row, label in zip(x, np.concatenate([ds.train_y, ds.test_y])):
        real = row[row != 0]
        # w1 at some i with w2 at i + label, and the three segments around them free of repeated words
        fits = [i for i in np.flatnonzero(real == w1) if i + label < len(real) and real[i + label] == w2
                and all(len(set(seg.tolist())) == len(seg)
                        for seg in (real[:i], real[i + 1:i + label], real[i + label + 1:]))]
        assert fits, row
        triggers_as_filler += int((real == w1).sum() + (real == w2).sum() > 2)
    assert triggers_as_filler > 0
    # the split is a seeded random permutation of the de-duplicated examples, reproducible
    again = generate(spec)
    assert np.array_equal(again.train_x, ds.train_x) and ds.hash == again.hash
    iid = generate(get_spec("trigger-distance", "smoke"))
    assert iid.hash != ds.hash and "sampling" not in get_spec("trigger-distance", "smoke").to_json()
    with pytest.raises(ValueError, match="filler_includes_triggers"):
        get_spec("trigger-distance", "smoke", sampling="authors")


# ---- resolution: API, CLI, grids -------------------------------------------------------------------------------
def test_fidelity_resolves_to_explicit_fields_and_changes_the_run_id():
    pelab = resolve_config("smoke", "rope", "t1")
    authors = resolve_config("smoke", "rope", "t1", fidelity="authors")
    assert pelab["fidelity"] == "pelab" and authors["fidelity"] == "authors"
    m = authors["model"]
    assert (m["attn_pad_mask"], m["pad_trained"], m["readout_include_pad"], m["final_ln"], m["unembed_vocab"]) == \
        (False, True, True, "none", True)
    assert authors["train"]["ignore_label"] == 0 and authors["task"]["overrides"]["sampling"] == "authors"
    assert run_id_for(authors) != run_id_for(pelab)
    assert authors["model"]["scheme"] == "rope+sinusoidal" and authors["tag"] == "rope"  # the authors' name
    assert resolve_config("smoke", "random", "t1", fidelity="authors")["model"]["scheme"] == "learned"
    assert resolve_config("smoke", "rope", "t1", fidelity="authors", tag="mine")["tag"] == "mine"
    mla = resolve_config("smoke", None, "t1", fidelity="authors-mla")
    assert mla["model"]["scheme"] == "mla" and mla["model"]["arch"] == "encoder"
    # a single field stays overridable after the named setting
    one = resolve_config("smoke", "rope", "t1", fidelity="authors", sets=["model.final_ln=after_pool"])
    assert one["model"]["final_ln"] == "after_pool" and config_hash(one) != config_hash(authors)


def test_pelab_runs_keep_their_ids_when_new_fields_are_at_their_defaults():
    cfg = resolve_config("smoke", "rope", "t1")
    old = json.loads(json.dumps(cfg))  # a config.json written before the fidelity fields existed
    for k in ("attn_pad_mask", "pad_trained", "final_ln", "unembed_vocab", "activation", "dropout_sites", "attn_bias"):
        del old["model"][k]
    del old["train"]["ignore_label"], old["fidelity"]
    assert config_hash(old) == config_hash(cfg)


@pytest.mark.parametrize("kw, words", [
    (dict(scheme="rope", fidelity="authors-mla"), "scheme"),
    (dict(scheme="rope", arch="encoder", fidelity="authors"), "arch"),
    (dict(scheme="rope", fidelity="authentic"), "fidelity"),
    (dict(scheme="rope", sets=["model.arch=decoder", "model.readout_include_pad=true"]), "readout_include_pad"),
    (dict(scheme="rope", sets=["train.ignore_label=zero"]), "ignore_label"),
])
def test_invalid_combinations_name_the_fields(kw, words):
    with pytest.raises(ValueError, match=words):
        resolve_config("smoke", task="t1", **kw)


def test_grid_fidelity_top_level_and_per_variant():
    grid = {"preset": "smoke", "schemes": ["rope"], "fidelity": "authors",
            "variants": [{"name": "mla-authors", "scheme": "mla", "fidelity": "authors-mla"},
                         {"name": "rope-pelab", "scheme": "rope", "fidelity": "pelab"}]}
    cfgs = {p["tag"] or p["scheme"]: resolve_config(**p) for p in grid_points(grid)}
    assert {k: (c["fidelity"], c["model"]["arch"], c["model"]["scheme"]) for k, c in cfgs.items()} == {
        "rope": ("authors", "paper", "rope+sinusoidal"), "mla-authors": ("authors-mla", "encoder", "mla"),
        "rope-pelab": ("pelab", "paper", "rope")}


def test_cli_dry_run_prints_the_resolved_config_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "runs"
    res = CliRunner().invoke(app, ["train", "--fidelity", "authors", "--preset", "smoke", "--dry-run",
                                   "--root", str(root)])
    assert res.exit_code == 0, res.output
    body, run_id = res.output.rsplit("}", 1)
    cfg = json.loads(body + "}")
    assert cfg["fidelity"] == "authors" and cfg["model"]["attn_pad_mask"] is False and run_id.strip()
    assert list(tmp_path.iterdir()) == []
    bad = CliRunner().invoke(app, ["train", "--fidelity", "authors-mla", "--scheme", "rope", "--dry-run"])
    assert bad.exit_code == 2 and "scheme" in bad.output


@pytest.mark.parametrize("fidelity, task", [("authors", "trigger-count"), ("authors-mla", "trigger-distance")])
def test_smoke_training_of_each_named_setting(fidelity, task, tmp_path):
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    cfg = resolve_config("smoke", None, task, fidelity=fidelity, store=store,
                         sets=["train.epochs=1", "model.n_layers=1"])
    run = train(cfg, store, progress=False)
    assert run.status == "finished" and run.config["fidelity"] == fidelity
    assert 0.0 <= run.final["test_acc"] <= 1.0 and math.isfinite(run.final["test_loss"])
    model = run.load_model()
    assert model.cfg == ModelConfig.from_dict(cfg["model"])


# ---- official-code variants of the other seeds (docs/paper.md §3) -------------------------------------------------
def _turn(x, ang):
    """Interleaved-pair rotation of x [b, p, h, d] by ang [p, d/2], written out."""
    c, s = ang.cos()[None, :, None], ang.sin()[None, :, None]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2)


@pytest.mark.parametrize("strict", [False, True])
def test_coca_released_score_is_the_untied_dual_form(strict):
    t = tokens()
    cfgs = {sc: ModelConfig(scheme="coca", scheme_kwargs={"score": sc, "strict": strict}, **TINY) for sc in
            ("released", "collinear")}
    out = {}
    for sc, cfg in cfgs.items():
        model = PEClassifier(cfg).eval()
        logits, cache = model.run_with_cache(t)
        torch.testing.assert_close(model(t), logits, atol=1e-5, rtol=1e-5)  # SDPA fast path = explicit scores
        out[sc] = cache["blocks.0.attn.hook_attn_scores"]
        if sc == "released":
            q, c = cache["blocks.0.attn.hook_q"], cache["blocks.0.attn.hook_k"]
            ang = torch.arange(16.0)[:, None] * 10000.0 ** (-torch.arange(0, 8, 2.0) / 8)
            a = torch.einsum("bmhd,bnhd->bhmn", _turn(q, ang) * q, _turn(c, ang)) / math.sqrt(8)
            real = (t != 0)[:, None, None, :].expand_as(a)
            torch.testing.assert_close(out[sc].masked_select(real), a.masked_select(real), atol=1e-5, rtol=1e-5)
            assert not model.blocks[0].attn.collinear
    # equal to the collinear score exactly when the query pair is tied (CoCA-Strict), different otherwise
    assert torch.allclose(out["released"], out["collinear"], atol=1e-5) == strict


def test_fope_official_construction():
    cfg = ModelConfig(scheme="fope", scheme_kwargs={"construction": "official", "sigma": 0.3},
                      **(TINY | {"d_model": 64, "n_heads": 4, "max_len": 16}))  # d_head 16: 8 planes
    model = PEClassifier(cfg).eval()
    attn = model.blocks[0].attn
    theta = 10000.0 ** (-torch.arange(0, 16, 2.0) / 16)
    kept = theta[theta >= 2 * math.pi / 16]
    n_in, n_out = len(kept), min(len(kept), 16 // 4)
    assert 0 < n_out < 8 and n_in < 8  # some planes clipped, some planes without a series
    assert attn.cos_coef.shape == (4, n_in, n_out) and not attn.cos_coef.requires_grad
    C, S = attn.cos_sin(16, torch.float32)  # [pos, head, d_head] (each plane's value on both dims)
    pos = torch.arange(16.0)[:, None]
    for h in range(4):  # independent evaluation of the series on the first n_out planes
        c_ref = torch.cos(pos * kept) @ attn.cos_coef[h]
        s_ref = torch.sin(pos * kept) @ attn.sin_coef[h]
        torch.testing.assert_close(C[:, h, 0:2 * n_out:2], c_ref, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(S[:, h, 0:2 * n_out:2], s_ref, atol=1e-5, rtol=1e-5)
    assert (C[:, :, 2 * n_out:] == 1).all() and (S[:, :, 2 * n_out:] == 1).all()  # 1/1 on the remaining planes
    step_eye = torch.zeros(n_in, n_out)
    step_eye[torch.arange(n_out) * math.ceil(n_in / n_out), torch.arange(n_out)] = 1
    noise = torch.cat([b.blocks[0].attn.cos_coef - step_eye for b in
                       [PEClassifier(cfg.replace(seed=s)) for s in range(30)]])
    expect = 0.3 * math.sqrt(2 / (n_in * n_out + 4 * n_out))
    assert abs(noise.std().item() / expect - 1) < 0.1
    t = tokens()
    torch.testing.assert_close(model(t), model.run_with_cache(t)[0], atol=1e-5, rtol=1e-5)
    paper = PEClassifier(cfg.replace(scheme_kwargs={"sigma": 0.3})).blocks[0].attn
    assert paper.cos_coef.shape == (4, 8, 8)


def test_every_new_option_is_listed_by_workbench_schemes_and_documented():
    from pathlib import Path

    res = CliRunner().invoke(app, ["schemes", "--json"])
    rows = {r["name"]: r["params"] for r in json.loads(res.output)}
    for scheme, param in [("mla", "shared_rope_q"), ("mla", "rope_read"), ("mla", "score_scale_dim"),
                          ("mla", "input_pe"), ("coca", "score"), ("fope", "construction"), ("alibi", "slopes"),
                          ("sinusoidal", "layout"), ("rope+sinusoidal", "layout")]:
        assert param in rows[scheme], (scheme, param)
    fid = CliRunner().invoke(app, ["schemes", "--fidelity"])
    assert fid.exit_code == 0
    one = CliRunner().invoke(app, ["schemes", "authors", "--fidelity", "--json"])  # NAME: one setting's fields
    assert one.exit_code == 0 and {r["setting"] for r in json.loads(one.output)} == {"authors"}
    bad = CliRunner().invoke(app, ["schemes", "bogus", "--fidelity"])  # it listed everything, exit 0
    assert bad.exit_code == 2 and "unknown fidelity setting 'bogus'" in bad.output
    docs = Path(__file__).resolve().parent.parent / "docs"
    fidelity_md, schemes_md = (docs / "fidelity.md").read_text(), (docs / "schemes.md").read_text()
    for name in ("attn_pad_mask", "pad_trained", "readout_include_pad", "final_ln", "unembed_vocab", "activation",
                 "dropout_sites", "attn_bias", "ignore_label", "sampling", "shared_rope_q", "rope_read",
                 "score_scale_dim", "input_pe", "layout", "slopes", "construction", "score"):
        assert f"`{name}" in fidelity_md, name
        assert name in fid.output, name
    for name in ("shared_rope_q", "rope_read", "score_scale_dim", "input_pe", "construction", "released", "reference",
                 "concat"):
        assert name in schemes_md, name


def test_extrapolation_is_not_applicable_with_the_authors_mla_position_table():
    from types import SimpleNamespace

    from workbench.analysis import NotApplicable, extrapolation

    data = SimpleNamespace(test_x=np.ones((4, 16), dtype=np.int64), test_y=np.zeros(4, dtype=np.int64),
                           extrap={"len2x": (np.ones((4, 32), dtype=np.int64), np.zeros(4, dtype=np.int64))})
    with pytest.raises(NotApplicable, match="'mla', as this run configures it, cannot run past"):
        extrapolation.compute(mla(input_pe="learned-zero"), data, n_boot=10)
    assert len(extrapolation.compute(mla(), data, n_boot=10)) == 2


@pytest.mark.parametrize("fidelity, scheme", [("authors", "rope"), ("authors-mla", "mla")])
def test_direct_logit_attribution_adds_up_under_the_authors_layernorm_placements(fidelity, scheme):
    """No final LayerNorm (transformer script) and LayerNorm before the pooling (MLA script): the components
    still sum to the logits exactly, with the pads pooled (authors) or masked (authors-mla)."""
    from workbench.analysis import dla

    model = fidelity_model(scheme, fidelity)
    t = tokens()
    with torch.no_grad():
        labels, contrib, logits = dla.decompose(model, t)
        torch.testing.assert_close(contrib.sum(1), model(t), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(logits, model(t), rtol=1e-5, atol=1e-5)
    assert contrib.shape[-1] == 24  # one column per output (vocab_size with unembed_vocab)


def test_the_margin_against_the_mean_reads_the_classes_only_where_the_output_layer_is_the_vocab():
    """`unembed_vocab` (authors): 24 outputs, 6 classes. `dla_vs_mean` and self-repair's margin subtract the mean
    logit of the 6 classes, not of all 24 outputs (18 are never a label; they averaged over those)."""
    from types import SimpleNamespace

    from workbench.analysis import dla, self_repair

    model = fidelity_model("rope", "authors")
    assert model.cfg.unembed_vocab and model.cfg.n_classes == 6
    t = tokens(n=4)
    y = torch.tensor([1, 5, 0, 3])
    df = dla.compute(model, SimpleNamespace(test_x=t.numpy(), test_y=y.numpy()), n_examples=None, n_boot=0)
    with torch.no_grad():
        logits = model(t)
    at = logits[torch.arange(4), y]
    over_classes = float((at - logits[:, :6].mean(1)).mean())
    assert df["dla_vs_mean"].sum() == pytest.approx(over_classes, abs=1e-4)
    assert abs(over_classes - float((at - logits.mean(1)).mean())) > 1e-2  # the two means differ: the test can tell
    torch.testing.assert_close(self_repair.measured(logits, y, None, 6), at - logits[:, :6].mean(1))


def test_grid_entries_with_a_named_setting_take_its_arch():
    grid = {"preset": "smoke", "archs": ["paper", "decoder"], "schemes": ["nope"],
            "variants": [{"name": "mla-authors", "scheme": "mla", "fidelity": "authors-mla"},
                         {"name": "rope-authors", "scheme": "rope", "fidelity": "authors"}]}
    points = grid_points(grid)
    assert sorted((p["tag"] or p["scheme"], p["arch"]) for p in points) == [
        ("mla-authors", "encoder"), ("nope", "decoder"), ("nope", "paper"), ("rope-authors", "paper")]
    for p in points:
        assert resolve_config(**p)["model"]["arch"] == p["arch"]  # no conflict with the named setting
